"""`ghindex export`: every table and view of a snapshot as Parquet files.

One file (or one directory of files) per table, named after it. When the snapshot
holds several repositories, tables with a `repo` column are written as hive-style
partitions (`issues/repo=owner%2Fname/data_0.parquet`), which pandas, Polars,
Spark and DuckDB read back as one table with its `repo` column (last, as hive
partitioning puts it). A partitioned table with no rows has no partition to write: it
is one empty file, `commits/data_0.parquet`, with the same columns in the same order,
so `read_parquet('commits/**/*.parquet')` opens every table, empty or not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ghindex.state.database import no_state
from ghindex.vocabulary.tables import MIGRATION_LOG

# The one file of a partitioned table with no rows (partitions live in repo=… folders).
EMPTY_FILE = "data_0.parquet"


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
            if split and has_repo:
                schema_only = dest / name / EMPTY_FILE
                schema_only.unlink(missing_ok=True)  # an earlier export's, when it had no rows
                count = _copy(con, f"SELECT * FROM {name}", dest / name, "PARTITION_BY (repo)")
                if not count:  # no partition was written: an empty file gives the schema
                    schema_only.parent.mkdir(exist_ok=True)
                    empty = f"SELECT * EXCLUDE (repo), repo FROM {name} LIMIT 0"
                    _copy(con, empty, schema_only)
            else:
                count = _copy(con, f"SELECT * FROM {name}", dest / f"{name}.parquet")
            report.tables[name] = count
    finally:
        con.close()
    return report


def _copy(con, query: str, target: Path, *options: str) -> int:
    """Write `query`'s rows as Parquet at `target`; COPY answers its row count."""
    settings = ", ".join(["FORMAT parquet", "OVERWRITE_OR_IGNORE true", *options])
    return con.execute(f"COPY ({query}) TO '{_quoted(target)}' ({settings})").fetchone()[0]


def _relations(con) -> list[tuple[str, bool]]:
    """Every table and view (not the migration log), with whether it has a repo column."""
    return con.execute(
        "SELECT table_name, bool_or(column_name = 'repo') FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_name <> ? GROUP BY table_name ORDER BY 1",
        [MIGRATION_LOG],
    ).fetchall()


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
