"""What a fetch could not read (`fetch_gaps`): kept until a later run reads it."""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

from ghindex.store.rows import now


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
        [repo, surface, node_id, handle, reason, now(), now()],
    )


def clear(con: duckdb.DuckDBPyConnection, repo: str, surface: str, node_ids: Iterable[str]) -> None:
    """Forget gaps that were read after all (or confirmed gone)."""
    ids = list(node_ids)
    if ids:
        con.execute(
            "DELETE FROM fetch_gaps WHERE repo = ? AND surface = ? AND list_contains(?, node_id)",
            [repo, surface, ids],
        )


def items(con: duckdb.DuckDBPyConnection, repo: str) -> dict[str, list[str]]:
    """The node ids of the items waiting to be read again, by surface."""
    found: dict[str, list[str]] = {}
    for surface, node_id in con.execute(
        "SELECT surface, node_id FROM fetch_gaps WHERE repo = ? AND node_id <> '' "
        "ORDER BY first_seen, node_id",
        [repo],
    ).fetchall():
        found.setdefault(surface, []).append(node_id)
    return found
