"""`ghindex export`: every table and view of a snapshot as Parquet files.

One file (or one directory of files) per table, named after it. When the snapshot
holds several repositories, tables with a `repo` column are written as hive-style
partitions (`issues/repo=owner%2Fname/data_0.parquet`), which pandas, Polars,
Spark and DuckDB read back as one table with its `repo` column (last, as hive
partitioning puts it). A partitioned table with no rows has no partition to write: it
is one empty file, `commits/data_0.parquet`, with the same columns in the same order,
so `read_parquet('commits/**/*.parquet')` opens every table, empty or not.

Exporting again into the same folder replaces each table's files whole: partitions of
repositories the snapshot no longer holds, and files of the other layout (a table
written as one file before and as partitions now), are removed first. Only what an
export writes is ever removed; anything else in a table's place is refused up front.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ghindex.errors import ExportError
from ghindex.state.database import no_state
from ghindex.vocabulary.tables import MIGRATION_LOG

# The one file of a partitioned table with no rows (partitions live in repo=… folders).
EMPTY_FILE = "data_0.parquet"
_REFUSAL = "export to a new folder, or move it away first"


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
        relations = _relations(con)
        for name, _has_repo in relations:  # checked first: nothing is removed on a refusal
            _earlier(dest, name)
        for name, has_repo in relations:
            _clear(dest, name)
            if split and has_repo:
                schema_only = dest / name / EMPTY_FILE
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


def _earlier(dest: Path, name: str) -> list[Path]:
    """What an earlier export left of table `name` in `dest`: `name.parquet`, and the
    folder `name/` when it holds only what an export writes (`repo=…` folders of Parquet
    files, the empty table's file). A folder holding anything else is refused, so that
    nothing but an export's own files is ever removed."""
    found = [p for p in (dest / f"{name}.parquet",) if p.is_file() and not p.is_symlink()]
    folder = dest / name
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ExportError(f"{folder} is not a folder an export wrote: {_REFUSAL}")
    if folder.is_dir():
        for entry in folder.iterdir():
            ours = (entry.name == EMPTY_FILE and entry.is_file()) or (
                entry.name.startswith("repo=")
                and entry.is_dir()
                and not entry.is_symlink()
                and all(
                    f.suffix == ".parquet" and f.is_file() and not f.is_symlink()
                    for f in entry.iterdir()
                )
            )
            if not ours:
                raise ExportError(f"{entry} was not written by an export: {_REFUSAL}")
        found.append(folder)
    return found


def _clear(dest: Path, name: str) -> None:
    """Remove an earlier export of `name`, so that no partition of a repository the
    snapshot no longer holds, and no file of the other layout, is read back with it."""
    for path in _earlier(dest, name):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


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
