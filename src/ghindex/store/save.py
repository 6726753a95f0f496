"""Saving GitHub's GraphQL nodes into the state database (no network here).

Each `save_*` function takes the nodes of one page exactly as the queries in
`fetch/queries/` return them, and upserts them by handle: running it twice with
the same nodes leaves the same rows. Callers wrap a page and its cursor move in
one transaction (`store.state.transaction`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import duckdb
import pyarrow as pa

from ghindex import __version__

Node = dict[str, Any]


def issue_handle(repo: str, number: int) -> str:
    return f"{repo}#{number}"


def github_time(value: str) -> datetime:
    """A GitHub DateTime ('2015-03-01T12:00:00Z') as an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def newest_update(nodes: Sequence[Node]) -> datetime | None:
    """The latest `updatedAt` among nodes, or None for no nodes."""
    return max((github_time(n["updatedAt"]) for n in nodes), default=None)


def save_repository(con: duckdb.DuckDBPyConnection, node: Node) -> str:
    """Upsert one repository; returns its canonical 'owner/name'."""
    repo = node["nameWithOwner"]
    owner, name = repo.split("/", 1)
    row = {
        "repo": repo,
        "handle": repo,
        "node_id": node.get("id"),
        "owner": owner,
        "name": name,
        "description": node.get("description"),
        "url": node.get("url"),
        "default_branch": (node.get("defaultBranchRef") or {}).get("name"),
        "is_private": node.get("isPrivate"),
        "is_archived": node.get("isArchived"),
        "is_fork": node.get("isFork"),
        "created_at": node.get("createdAt"),
        "updated_at": node.get("updatedAt"),
        "pushed_at": node.get("pushedAt"),
        "fetched_at": _now(),
    }
    _upsert(con, "repos", "repo", [row])
    return repo


def save_issues(con: duckdb.DuckDBPyConnection, repo: str, nodes: Sequence[Node]) -> int:
    rows = [{**_thread_row(repo, node), "state_reason": node.get("stateReason")} for node in nodes]
    _upsert(con, "issues", "handle", rows)
    _save_item_links(con, repo, nodes)
    return len(rows)


def save_pull_requests(con: duckdb.DuckDBPyConnection, repo: str, nodes: Sequence[Node]) -> int:
    rows = [
        {
            **_thread_row(repo, node),
            "is_draft": node.get("isDraft"),
            "merged": node.get("merged"),
            "merged_at": node.get("mergedAt"),
            "base_ref": node.get("baseRefName"),
            "head_ref": node.get("headRefName"),
            "additions": node.get("additions"),
            "deletions": node.get("deletions"),
            "changed_files": node.get("changedFiles"),
        }
        for node in nodes
    ]
    _upsert(con, "pull_requests", "handle", rows)
    _save_item_links(con, repo, nodes)
    return len(rows)


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
) -> None:
    con.execute(
        "INSERT INTO runs VALUES (?, ?, ?, now(), ?, ?, ?, ?, ?)",
        [
            run_id,
            command,
            started_at,
            status,
            list(repos),
            json.dumps(stats or {}, sort_keys=True, default=str),
            error,
            __version__,
        ],
    )


def _thread_row(repo: str, node: Node) -> dict[str, Any]:
    """Columns issues and pull requests share."""
    author = node.get("author") or {}
    milestone = node.get("milestone") or {}
    return {
        "handle": issue_handle(repo, node["number"]),
        "repo": repo,
        "number": node["number"],
        "node_id": node.get("id"),
        "title": node["title"],
        "body": node.get("body"),
        "state": node["state"],
        "locked": node.get("locked"),
        "author": author.get("login"),
        "author_type": author.get("__typename"),
        "author_association": node.get("authorAssociation"),
        "milestone_number": milestone.get("number"),
        "milestone": milestone.get("title"),
        "comments_count": (node.get("comments") or {}).get("totalCount"),
        "reactions_count": (node.get("reactions") or {}).get("totalCount"),
        "url": node["url"],
        "created_at": node["createdAt"],
        "updated_at": node["updatedAt"],
        "closed_at": node.get("closedAt"),
        "fetched_at": _now(),
    }


def _save_item_links(con: duckdb.DuckDBPyConnection, repo: str, nodes: Sequence[Node]) -> None:
    """Labels, assignees and milestones of a page: replaced, not merged, per item."""
    handles = [issue_handle(repo, node["number"]) for node in nodes]
    if not handles:
        return
    labels, item_labels, assignees, milestones = {}, [], [], {}
    for handle, node in zip(handles, nodes, strict=True):
        for label in _nodes(node.get("labels")):
            labels[label["name"]] = {
                "repo": repo,
                "name": label["name"],
                "color": label.get("color"),
                "description": label.get("description"),
            }
            item_labels.append({"handle": handle, "repo": repo, "label": label["name"]})
        for user in _nodes(node.get("assignees")):
            assignees.append({"handle": handle, "repo": repo, "login": user["login"]})
        milestone = node.get("milestone")
        if milestone:
            milestones[milestone["number"]] = {
                "repo": repo,
                "number": milestone["number"],
                "title": milestone["title"],
                "state": milestone.get("state"),
                "due_on": milestone.get("dueOn"),
                "url": milestone.get("url"),
            }
    for table in ("issue_labels", "assignees"):
        con.execute(f"DELETE FROM {table} WHERE list_contains(?, handle)", [handles])
    _insert(con, "issue_labels", _unique(item_labels, ("handle", "label")))
    _insert(con, "assignees", _unique(assignees, ("handle", "login")))
    _upsert(con, "labels", ("repo", "name"), list(labels.values()))
    _upsert(con, "milestones", ("repo", "number"), list(milestones.values()))


def _nodes(connection: dict[str, Any] | None) -> list[Node]:
    return [n for n in (connection or {}).get("nodes") or [] if n]


def _unique(rows: list[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    return list({tuple(row[k] for k in key): row for row in rows}.values())


def _upsert(
    con: duckdb.DuckDBPyConnection, table: str, key: str | tuple[str, ...], rows: list[dict]
) -> None:
    if not rows:
        return
    keys = (key,) if isinstance(key, str) else key
    rows = _unique(rows, keys)
    batch = pa.Table.from_pylist(rows)
    con.register("_batch", batch)
    try:
        match = " AND ".join(f"t.{k} = b.{k}" for k in keys)
        con.execute(f"DELETE FROM {table} t WHERE EXISTS (SELECT 1 FROM _batch b WHERE {match})")
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _batch")
    finally:
        con.unregister("_batch")


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    con.register("_batch", pa.Table.from_pylist(rows))
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _batch")
    finally:
        con.unregister("_batch")


def _now() -> datetime:
    return datetime.now(UTC)
