"""`ghindex export`: every table and view of a snapshot as Parquet files.

One file (or one directory of files) per table, named after it. When the snapshot
holds several repositories, tables with a `repo` column are written as hive-style
partitions (`issues/repo=owner%2Fname/data_0.parquet`), which pandas, Polars,
Spark and DuckDB read back as one table with its `repo` column.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ghindex.state.database import no_state
from ghindex.vocabulary.tables import MIGRATION_LOG


@dataclass
class ExportReport:
    dest: str
    partitioned: bool
    tables: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def export(state: Path, dest: Path, *, partition: bool | None = None) -> ExportReport:
    if not state.exists():
        raise no_state(state)
    dest.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(state), read_only=True)
    try:
        repos = con.execute("SELECT count(*) FROM repos").fetchall()[0][0]
        split = repos > 1 if partition is None else partition
        report = ExportReport(dest=str(dest), partitioned=split)
        for name, has_repo in _relations(con):
            target = dest / name if split and has_repo else dest / f"{name}.parquet"
            options = "FORMAT parquet, OVERWRITE_OR_IGNORE true"
            if split and has_repo:
                options += ", PARTITION_BY (repo)"
            copy = f"COPY (SELECT * FROM {name}) TO '{_quoted(target)}' ({options})"
            report.tables[name] = con.execute(copy).fetchone()[0]  # COPY answers its row count
    finally:
        con.close()
    return report


def _relations(con) -> list[tuple[str, bool]]:
    """Every table and view (not the migration log), with whether it has a repo column."""
    return con.execute(
        "SELECT table_name, bool_or(column_name = 'repo') FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_name <> ? GROUP BY table_name ORDER BY 1",
        [MIGRATION_LOG],
    ).fetchall()


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
