"""What a fetch could not read (`fetch_gaps`): kept until a later run reads it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import duckdb

from ghindex.state.redact import redact
from ghindex.state.rows import now


def record(
    con: duckdb.DuckDBPyConnection,
    repo: str,
    surface: str,
    node_id: str,
    handle: str | None,
    reason: str,
) -> None:
    """Note one gap, or that an old one was met again."""
    con.execute(
        """
        INSERT INTO fetch_gaps (repo, surface, node_id, handle, reason, first_seen, last_seen,
                                attempts)
        VALUES (?, ?, ?, ?, ?, ?, ?, 1)
        ON CONFLICT (repo, surface, node_id) DO UPDATE SET
            handle = coalesce(excluded.handle, fetch_gaps.handle),
            reason = excluded.reason,
            last_seen = excluded.last_seen,
            attempts = fetch_gaps.attempts + 1
        """,
        [repo, surface, node_id, handle, redact(reason), now(), now()],
    )


def clear(con: duckdb.DuckDBPyConnection, repo: str, surface: str, node_ids: Iterable[str]) -> None:
    """Forget gaps that were read after all (or confirmed gone)."""
    ids = list(node_ids)
    if ids:
        con.execute(
            "DELETE FROM fetch_gaps WHERE repo = ? AND surface = ? AND list_contains(?, node_id)",
            [repo, surface, ids],
        )


def waiting(con: duckdb.DuckDBPyConnection, repo: str) -> list[tuple[str, str, str | None]]:
    """The items waiting to be read again: (surface, node id, handle), oldest first."""
    return con.execute(
        "SELECT surface, node_id, handle FROM fetch_gaps WHERE repo = ? AND node_id <> '' "
        "ORDER BY first_seen, node_id",
        [repo],
    ).fetchall()


def items(con: duckdb.DuckDBPyConnection, repo: str) -> dict[str, list[str]]:
    """The node ids of the items waiting to be read again, by surface."""
    found: dict[str, list[str]] = {}
    for surface, node_id, _handle in waiting(con, repo):
        found.setdefault(surface, []).append(node_id)
    return found


def health(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Per repository: how its last fetch went and what is still unread, for the
    manifest and `status` (a permissions change shows here)."""
    found: dict[str, dict[str, Any]] = {}
    for repo, surface, node_id, reason in con.execute(
        "SELECT repo, surface, node_id, reason FROM fetch_gaps ORDER BY repo, surface, node_id"
    ).fetchall():
        entry = found.setdefault(repo, {"unread_items": 0, "refused": {}})
        if node_id:
            entry["unread_items"] += 1
        else:
            entry["refused"][surface] = reason
    for run_id, finished, status, stats in con.execute(
        "SELECT run_id, finished_at, status, stats FROM runs WHERE command = 'fetch' "
        "ORDER BY started_at"
    ).fetchall():
        body = json.loads(stats) if stats else {}
        for repo in body.get("repos") or []:
            if not isinstance(repo, dict) or not isinstance(repo.get("repo"), str):
                continue
            entry = found.setdefault(repo["repo"], {"unread_items": 0, "refused": {}})
            entry["last_fetch"] = {
                "run_id": run_id,
                "finished_at": finished.isoformat() if finished else None,
                "status": status,
                **{key: len(repo.get(key) or []) for key in _COUNTED},
            }
    return found


# What a fetch report lists per repository, counted in `health`.
_COUNTED = ("deleted", "transferred", "inaccessible", "held_back", "hidden", "skipped")
