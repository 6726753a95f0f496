"""Sync cursors (`sync_state`) and the record of runs (`runs`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb

from ghindex import __version__
from ghindex.state.redact import redact, redact_value

# A time mark is a time GitHub gave, kept to what a mark can be: never before FLOOR (no
# item on GitHub is older), never after the run that set it began, plus SKEW for the
# clocks of GitHub and this machine. A stored mark outside that (set by a version
# without these bounds) is not trusted: the surface is listed from its start again.
FLOOR = datetime(2000, 1, 1, tzinfo=UTC)
SKEW = timedelta(minutes=1)


def get_high_water_mark(con: duckdb.DuckDBPyConnection, repo: str, surface: str) -> datetime | None:
    """The surface's mark, or None (list it from the start) when there is none or it is
    not one a run could have set: before FLOOR, or after the time it was written."""
    rows = con.execute(
        "SELECT high_water_mark, updated_at FROM sync_state WHERE repo = ? AND surface = ?",
        [repo, surface],
    ).fetchall()
    if not rows or rows[0][0] is None:
        return None
    mark, written = rows[0]
    return mark if FLOOR <= mark <= written + SKEW else None


def untrusted_mark(con: duckdb.DuckDBPyConnection, repo: str, surface: str) -> datetime | None:
    """The stored mark when `get_high_water_mark` does not trust it, else None."""
    rows = con.execute(
        "SELECT high_water_mark FROM sync_state WHERE repo = ? AND surface = ?", [repo, surface]
    ).fetchall()
    mark = rows[0][0] if rows else None
    if mark is None or get_high_water_mark(con, repo, surface) is not None:
        return None
    return mark


def bounded_mark(mark: datetime | None, started: datetime) -> datetime | None:
    """`mark` as a run that began at `started` may set it: at most `started` + SKEW;
    None (the mark stays) for a time before FLOOR."""
    if mark is None or mark < FLOOR:
        return None
    return min(mark, started + SKEW)


def set_high_water_mark(
    con: duckdb.DuckDBPyConnection,
    repo: str,
    surface: str,
    mark: datetime | None,
    seen: int,
    started: datetime | None = None,
) -> None:
    """Move a cursor forward (never back) and count the items it covered; `mark` is
    first bounded for a run that began at `started` (default: now). A stored mark that
    is not trusted (`get_high_water_mark`) is replaced, not kept as the greater."""
    mark = bounded_mark(mark, started or datetime.now(UTC))
    con.execute(
        """
        INSERT INTO sync_state (repo, surface, high_water_mark, items_seen, updated_at)
        VALUES (?, ?, ?, ?, now())
        ON CONFLICT (repo, surface) DO UPDATE SET
            high_water_mark = CASE
                WHEN sync_state.high_water_mark < ?
                  OR sync_state.high_water_mark > sync_state.updated_at + to_seconds(?)
                THEN excluded.high_water_mark
                ELSE greatest(sync_state.high_water_mark, excluded.high_water_mark)
            END,
            items_seen = sync_state.items_seen + excluded.items_seen,
            updated_at = excluded.updated_at
        """,
        [repo, surface, mark, seen, FLOOR, SKEW.total_seconds()],
    )


def get_cursor(con: duckdb.DuckDBPyConnection, repo: str, surface: str) -> str | None:
    """The text cursor of a surface (a git sha for git sources)."""
    rows = con.execute(
        "SELECT cursor FROM sync_state WHERE repo = ? AND surface = ?", [repo, surface]
    ).fetchall()
    return rows[0][0] if rows else None


def set_cursor(
    con: duckdb.DuckDBPyConnection,
    repo: str,
    surface: str,
    sha: str,
    mark: datetime | None,
    seen: int,
) -> None:
    """Point a git surface at `sha`. Unlike time marks it may move back (a force push)."""
    con.execute(
        """
        INSERT INTO sync_state (repo, surface, high_water_mark, items_seen, updated_at, cursor)
        VALUES (?, ?, ?, ?, now(), ?)
        ON CONFLICT (repo, surface) DO UPDATE SET
            high_water_mark = excluded.high_water_mark,
            items_seen = sync_state.items_seen + excluded.items_seen,
            updated_at = excluded.updated_at,
            cursor = excluded.cursor
        """,
        [repo, surface, mark, seen, sha],
    )


def record_run(
    con: duckdb.DuckDBPyConnection,
    *,
    run_id: str,
    command: str,
    started_at: datetime,
    status: str,
    repos: Iterable[str] = (),
    stats: dict[str, Any] | None = None,
    error: str | None = None,
    requests: int | None = None,
    cost: int | None = None,
) -> None:
    con.execute(
        """
        INSERT INTO runs (run_id, command, started_at, finished_at, status, repos, stats,
                          error, ghindex_version, requests, cost)
        VALUES (?, ?, ?, now(), ?, ?, ?, ?, ?, ?, ?)
        """,
        [
            run_id,
            command,
            started_at,
            status,
            list(repos),
            json.dumps(redact_value(stats or {}), sort_keys=True, default=str),
            redact(error) if error else error,
            __version__,
            requests,
            cost,
        ],
    )
