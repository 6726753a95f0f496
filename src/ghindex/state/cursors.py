"""Sync cursors (`sync_state`) and the record of runs (`runs`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import duckdb

from ghindex import __version__
from ghindex.state.redact import redact, redact_value


def get_high_water_mark(con: duckdb.DuckDBPyConnection, repo: str, surface: str) -> datetime | None:
    rows = con.execute(
        "SELECT high_water_mark FROM sync_state WHERE repo = ? AND surface = ?", [repo, surface]
    ).fetchall()
    return rows[0][0] if rows else None


def set_high_water_mark(
    con: duckdb.DuckDBPyConnection, repo: str, surface: str, mark: datetime | None, seen: int
) -> None:
    """Move a cursor forward (never back) and count the items it covered."""
    con.execute(
        """
        INSERT INTO sync_state (repo, surface, high_water_mark, items_seen, updated_at)
        VALUES (?, ?, ?, ?, now())
        ON CONFLICT (repo, surface) DO UPDATE SET
            high_water_mark = greatest(sync_state.high_water_mark, excluded.high_water_mark),
            items_seen = sync_state.items_seen + excluded.items_seen,
            updated_at = excluded.updated_at
        """,
        [repo, surface, mark, seen],
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
