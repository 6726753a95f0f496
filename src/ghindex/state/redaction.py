"""Which redaction the stored text went through, and bringing it in line.

`ghindex_meta` records, per writer ('github' for fetch, 'git' for git sources), the
redaction rules the stored text passed (`redact.rules_version()`: ghindex's own rules'
version and the detector's, e.g. `v4+kingfisher-1.5.0/488`) or `off`. Before writing, a
run compares it with what the settings ask for:

- same: nothing to do;
- redaction wanted, stored text raw or from older rules (a workdir from before
  redaction at ingestion is raw; a new ghindex or detector release finds more): the
  stored text is redacted in place, now, with a message that counts what was found per
  kind, so the next snapshot holds none of what the current rules find;
- raw text wanted (`redact = false`), stored text redacted: the raw text can only
  come from the source again, so the caller re-reads everything (`fetch --full`,
  git sources in full) and records `off` once that succeeded. Never a silent mix.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ghindex.state import redact
from ghindex.state.database import compact, open_state
from ghindex.state.rows import now, registered, replace_from

# Which tables each writer fills; `SHARED` ones are written by both (links, run
# records, gaps) and redacted with either.
SOURCES = {
    "github": (
        "repos",
        "issues",
        "pull_requests",
        "discussions",
        "comments",
        "reviews",
        "review_comments",
        "releases",
        "milestones",
        "labels",
        "issue_labels",
        "assignees",
    ),
    "git": ("docs", "commits", "commit_files"),
}
SHARED = ("edges", "fetch_gaps", "runs")


def wanted(enabled: bool) -> str:
    return redact.rules_version() if enabled else "off"


def stored(con: duckdb.DuckDBPyConnection, source: str, schema: str = "main") -> str | None:
    row = con.execute(
        f"SELECT value FROM {schema}.ghindex_meta WHERE key = ?", [f"redaction:{source}"]
    ).fetchone()
    return row[0] if row else None


def forget(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Record that nobody knows what the stored text of `source` went through: the
    next `prepare` redacts it (or, with redaction off, takes it as raw)."""
    con.execute("DELETE FROM ghindex_meta WHERE key = ?", [f"redaction:{source}"])


def record(con: duckdb.DuckDBPyConnection, source: str, enabled: bool) -> None:
    _set(con, f"redaction:{source}", wanted(enabled))


def state_of(con: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    """What each writer's stored text went through: {"github": "v2", "git": "off"}."""
    return {source: stored(con, source) for source in SOURCES}


def index_stale(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the stored text changed redaction since the index was last pruned."""
    row = con.execute("SELECT value FROM ghindex_meta WHERE key = 'redaction:index'").fetchone()
    return (row[0] if row else None) != _index_value(con)


def record_index(con: duckdb.DuckDBPyConnection) -> None:
    _set(con, "redaction:index", _index_value(con))


def _set(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute(
        "INSERT OR REPLACE INTO ghindex_meta (key, value, updated_at) VALUES (?, ?, ?)",
        [key, value, now()],
    )


def _index_value(con: duckdb.DuckDBPyConnection) -> str:
    return " ".join(f"{k}={v}" for k, v in state_of(con).items())


def prepare(con: duckdb.DuckDBPyConnection, source: str, enabled: bool) -> tuple[bool, str]:
    """Bring the stored text of `source` in line with `enabled`. Returns whether
    everything must be read again from the source (raw text wanted, redacted text
    stored) and what was done, for the user ('' when nothing). After text was redacted
    in place, the caller compacts the file (`store.state.compact`) once it is closed:
    `needs_compacting` says so."""
    before = stored(con, source)
    if before == wanted(enabled):
        return False, ""
    if not enabled:
        if before is None or not has_rows(con, source):  # older state: its text is raw
            record(con, source, enabled)
            return False, ""
        return True, (
            f"redact = false: the stored {source} text was redacted; reading it all again "
            "to store it raw"
        )
    if not has_rows(con, source):
        record(con, source, enabled)
        return False, ""
    with redact.tally() as found:
        changed = redact_in_place(con, SOURCES[source] + SHARED)
    record(con, source, enabled)
    if changed:
        _set(con, "compact", "needed")
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(found.items())) or "nothing new"
    return False, (
        f"redacting the stored {source} text with redaction rules {wanted(True)} "
        f"(was {before or 'none recorded'}): {changed} rows changed; found {kinds}"
    )


def needs_compacting(con: duckdb.DuckDBPyConnection) -> bool:
    return con.execute("SELECT 1 FROM ghindex_meta WHERE key = 'compact'").fetchone() is not None


def compact_if_needed(path: Path, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """After text was redacted in place: close `con`, rewrite the file without the old
    values, and return a new connection (the same `con` when nothing was needed)."""
    if not needs_compacting(con):
        return con
    con.close()
    compact(path)
    con = open_state(path)
    con.execute("DELETE FROM ghindex_meta WHERE key = 'compact'")
    return con


def scanned_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """(column, type) of every column of `table` that redaction scans: strings, lists
    of strings and JSON, less what GitHub and git generate (`redact.NEVER_SCANNED`)."""
    return [
        (column, kind)
        for column, kind in con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
            [table],
        ).fetchall()
        if kind in ("VARCHAR", "VARCHAR[]", "JSON") and redact.scanned(table, column)
    ]


def primary_key(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    row = con.execute(
        "SELECT constraint_column_names FROM duckdb_constraints() "
        "WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
        [table],
    ).fetchone()
    return list(row[0]) if row else []


def scanned_rows(
    con: duckdb.DuckDBPyConnection, table: str, key: str = "rowid"
) -> tuple[list[tuple[str, str]], Iterator[tuple[Any, list[Any]]]]:
    """The scanned columns of `table` and an iterator over its rows as (`key`, the
    columns' values), read in batches: memory holds a batch, not the table. Nothing
    else may run on `con` until the iterator is done."""
    columns = scanned_columns(con, table)

    def rows() -> Iterator[tuple[Any, list[Any]]]:
        if not columns:
            return
        names = ", ".join(f'"{c}"' for c, _ in columns)
        cursor = con.execute(f"SELECT {key}, {names} FROM {table}")
        while batch := cursor.fetchmany(_BATCH):
            for first, *values in batch:
                yield first, values

    return columns, rows()


_BATCH = 4096


def redact_in_place(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...]) -> int:
    """Redact every scanned column of `tables` where it holds something; rows changed.
    Only the changed rows are held in memory. A row whose key changed (a secret in a
    label or tag name) replaces any row that already had the redacted key."""
    changed = 0
    for table in tables:
        columns, rows = scanned_rows(con, table)
        updates = []
        for rowid, values in rows:
            fresh = [
                redact.scrub_json(v) if kind == "JSON" else redact.redact_value(v)
                for (_, kind), v in zip(columns, values, strict=True)
            ]
            if fresh != values:
                updates.append((rowid, dict(zip((c for c, _ in columns), fresh, strict=True))))
        if updates:
            _rewrite(con, table, updates)
            changed += len(updates)
    return changed


def _rewrite(con: duckdb.DuckDBPyConnection, table: str, updates: list) -> None:
    """Replace the rows `updates` names ((rowid, new values)) with their new values."""
    with registered(con, "_changed", pa.table({"rid": [rowid for rowid, _ in updates]})):
        whole = con.sql(
            f"SELECT rowid AS _rid, * FROM {table} WHERE rowid IN (SELECT rid FROM _changed)"
        ).to_arrow_table()
        by_id = dict(updates)
        rows = []
        for row in whole.to_pylist():
            rid = row.pop("_rid")
            rows.append({**row, **by_id[rid]})
        key = primary_key(con, table)
        if key:
            rows = list({tuple(r[k] for k in key): r for r in rows}.values())
        con.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rid FROM _changed)")
    with registered(con, "_redacted", pa.Table.from_pylist(rows, schema=whole.schema.remove(0))):
        if key:
            replace_from(con, table, "_redacted", key)
        else:
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _redacted")


def stored_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """How many redactions of each kind the stored text holds, for the manifest."""
    counts: dict[str, int] = {}
    tables = [t for group in SOURCES.values() for t in group] + list(SHARED)
    for table in tables:
        for column, _ in scanned_columns(con, table):
            for kind, n in con.execute(
                f'SELECT k, count(*) FROM (SELECT unnest(regexp_extract_all("{column}"::VARCHAR, '
                f"?, 1)) AS k FROM {table}) GROUP BY k",
                [redact.MARKER.pattern],
            ).fetchall():
                counts[kind] = counts.get(kind, 0) + n
    return dict(sorted(counts.items()))


def has_rows(con: duckdb.DuckDBPyConnection, source: str) -> bool:
    return any(
        con.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in SOURCES[source]
    )
