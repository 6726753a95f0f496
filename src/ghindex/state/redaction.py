"""Which redaction the stored text went through, and bringing it in line.

`ghindex_meta` records, per writer ('github' for fetch, 'git' for git sources), the
redaction rules version the stored text passed (`v2`) or `off`. Before writing, a
run compares it with what the settings ask for:

- same: nothing to do;
- redaction wanted, stored text raw or from older rules (a workdir from before
  redaction at ingestion is raw): the stored text is redacted in place, now, with a
  message, so the next snapshot holds no raw secret;
- raw text wanted (`redact = false`), stored text redacted: the raw text can only
  come from the source again, so the caller re-reads everything (`fetch --full`,
  git sources in full) and records `off` once that succeeded. Never a silent mix.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from ghindex.state import redact
from ghindex.state.database import compact, open_state
from ghindex.state.rows import now

# Which tables each writer fills.
SOURCES = {
    "github": ("repos", "issues", "pull_requests", "discussions", "comments", "reviews",
               "review_comments", "releases", "milestones", "labels"),
    "git": ("docs", "commits", "commit_files"),
}  # fmt: skip


def wanted(enabled: bool) -> str:
    return f"v{redact.RULES_VERSION}" if enabled else "off"


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
    changed = redact_in_place(con, SOURCES[source])
    record(con, source, enabled)
    if changed:
        _set(con, "compact", "needed")
    return False, (
        f"redacting the stored {source} text for redaction rules v{redact.RULES_VERSION}: "
        f"{changed} rows changed"
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


def redact_in_place(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...]) -> int:
    """Redact the text columns of `tables` where they hold something; rows changed."""
    changed = 0
    for table in tables:
        columns = redact.TEXT_COLUMNS.get(table, ())
        if not columns:
            continue
        names = ", ".join(columns)
        updates = []
        for rowid, *values in con.execute(f"SELECT rowid, {names} FROM {table}").fetchall():
            fresh = [redact.redact(v) if isinstance(v, str) else v for v in values]
            if fresh != values:
                updates.append({"rid": rowid, **dict(zip(columns, fresh, strict=True))})
        if not updates:
            continue
        con.register("_redacted", pa.Table.from_pylist(updates))
        try:
            sets = ", ".join(f"{c} = r.{c}" for c in columns)
            con.execute(f"UPDATE {table} SET {sets} FROM _redacted r WHERE {table}.rowid = r.rid")
        finally:
            con.unregister("_redacted")
        changed += len(updates)
    return changed


def stored_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """How many redactions of each kind the stored text holds, for the manifest."""
    counts: dict[str, int] = {}
    for table, columns in redact.TEXT_COLUMNS.items():
        for column in columns:
            for kind, n in con.execute(
                f"SELECT k, count(*) FROM (SELECT unnest(regexp_extract_all({column}, ?, 1)) "
                f"AS k FROM {table}) GROUP BY k",
                [redact.MARKER.pattern],
            ).fetchall():
                counts[kind] = counts.get(kind, 0) + n
    return dict(sorted(counts.items()))


def has_rows(con: duckdb.DuckDBPyConnection, source: str) -> bool:
    return any(
        con.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in SOURCES[source]
    )
