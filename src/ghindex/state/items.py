"""Saving GitHub's top-level items: repositories, issues, pull requests,
discussions and releases (no network here).

Each `save_*` function takes the nodes of one page exactly as the queries in
`fetch/queries/` return them, with every nested connection read to its end,
and upserts them by handle: saving the same nodes twice leaves the same rows.
An item's labels, assignees, comments, reviews and links are replaced, not
merged, because the item was just read in full. Callers wrap a page and its
cursor move in one transaction (`store.state.transaction`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import duckdb

from ghindex.errors import GhindexError, disk_problem, first_line
from ghindex.state import conversation, edges
from ghindex.state.rows import (
    Node,
    author_of,
    count,
    delete_where_in,
    insert,
    login,
    nodes_of,
    now,
    replace_where,
    upsert,
)
from ghindex.vocabulary.handles import comment_handle, item_handle, release_handle


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
        "fetched_at": now(),
    }
    upsert(con, "repos", "repo", [row])
    return repo


Save = Callable[[duckdb.DuckDBPyConnection, str, Sequence[Node]], int]

# What storing a node raises when the node itself is at fault (a value of a shape no
# rule expected: a date that is no date, a number out of range, a missing field); any
# other failure is the database's or the disk's and fails the run as before.
_ITEM_FAULTS = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    OverflowError,
    RecursionError,
    duckdb.ConversionException,
    duckdb.ConstraintException,
    duckdb.InvalidInputException,
    duckdb.OutOfRangeException,
    duckdb.TypeMismatchException,
)


def item_fault(exc: BaseException) -> bool:
    """Whether `exc`, raised while storing nodes, may be one node's fault."""
    if isinstance(exc, GhindexError | OSError | MemoryError) or disk_problem(exc):
        return False
    return isinstance(exc, _ITEM_FAULTS)


def unstorable(
    con: duckdb.DuckDBPyConnection, save: Save, repo: str, nodes: Sequence[Node]
) -> list[tuple[Node, str]]:
    """The nodes `save` cannot store, each with its cause in one line, found by saving
    each alone in a transaction that is rolled back (the state is left as it was). For
    a page whose saving failed, so that one node never fails a repository."""
    bad = []
    for node in nodes:
        con.execute("BEGIN TRANSACTION")
        try:
            save(con, repo, [node])
        except Exception as exc:
            if not item_fault(exc):
                con.execute("ROLLBACK")
                raise
            cause = f"{type(exc).__name__}: {first_line(exc, 200)}"
            bad.append((node, f"could not be stored ({cause})"))
        con.execute("ROLLBACK")
    return bad


def save_issues(con: duckdb.DuckDBPyConnection, repo: str, nodes: Sequence[Node]) -> int:
    rows = [{**_thread_row(repo, node), "state_reason": node.get("stateReason")} for node in nodes]
    upsert(con, "issues", "handle", rows)
    _save_item_links(con, repo, nodes)
    _save_thread_children(con, repo, "issue", nodes)
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
    upsert(con, "pull_requests", "handle", rows)
    _save_item_links(con, repo, nodes)
    _save_thread_children(con, repo, "pull_request", nodes)
    reviewed, reviews, threaded, notes = [], [], [], []
    for node in nodes:
        handle, number = item_handle(repo, node["number"]), node["number"]
        if "reviews" in node:
            reviewed.append(handle)
            reviews += conversation.review_rows(repo, handle, number, node["reviews"])
        if "reviewThreads" in node:
            threaded.append(handle)
            threads = nodes_of(node["reviewThreads"])
            notes += conversation.review_comment_rows(repo, handle, number, threads)
    conversation.replace_children(con, "reviews", reviewed, reviews)
    conversation.replace_children(con, "review_comments", threaded, notes)
    return len(rows)


def save_discussions(con: duckdb.DuckDBPyConnection, repo: str, nodes: Sequence[Node]) -> int:
    rows = []
    for node in nodes:
        handle = item_handle(repo, node["number"])
        author = author_of(node)
        answer = node.get("answer") or {}
        category = node.get("category") or {}
        rows.append(
            {
                "handle": handle,
                "repo": repo,
                "number": node["number"],
                "node_id": node.get("id"),
                "title": node["title"],
                "body": node.get("body"),
                "url": node["url"],
                "category": category.get("name"),
                "is_answerable": category.get("isAnswerable"),
                "answer_handle": comment_handle(handle, answer["databaseId"]) if answer else None,
                "answer_chosen_at": node.get("answerChosenAt"),
                "answer_chosen_by": login(node.get("answerChosenBy")),
                "state": "CLOSED" if node.get("closed") else "OPEN",
                "state_reason": node.get("stateReason"),
                "locked": node.get("locked"),
                "author": author.get("login"),
                "author_type": author.get("__typename"),
                "author_association": node.get("authorAssociation"),
                "comments_count": count(node.get("comments")),
                "reactions_count": count(node.get("reactions")),
                "upvote_count": node.get("upvoteCount"),
                "created_at": node["createdAt"],
                "updated_at": node["updatedAt"],
                "closed_at": node.get("closedAt"),
                "fetched_at": now(),
            }
        )
    upsert(con, "discussions", "handle", rows)
    _save_item_links(con, repo, nodes)
    _save_thread_children(con, repo, "discussion", nodes)
    return len(rows)


def replace_releases(con: duckdb.DuckDBPyConnection, repo: str, nodes: Sequence[Node]) -> int:
    """Make `releases` hold exactly these releases of `repo` (a complete listing)."""
    rows = [
        {
            "handle": release_handle(repo, node["tagName"]),
            "repo": repo,
            "tag": node["tagName"],
            "name": node.get("name"),
            "body": node.get("description"),
            "url": node.get("url"),
            "node_id": node.get("id"),
            "database_id": node.get("databaseId"),
            "author": login(author_of(node)),
            "is_draft": node.get("isDraft"),
            "is_prerelease": node.get("isPrerelease"),
            "is_latest": node.get("isLatest"),
            "tag_commit": (node.get("tagCommit") or {}).get("oid"),
            "created_at": node["createdAt"],
            "published_at": node.get("publishedAt"),
            "updated_at": node.get("updatedAt") or node["createdAt"],
            "fetched_at": now(),
        }
        for node in nodes
    ]
    con.execute("DELETE FROM releases WHERE repo = ?", [repo])
    insert(con, "releases", rows, key=("handle",))
    edges.replace_release_links(con, repo, rows)
    return len(rows)


_THREAD_TABLES = {"issues": "issue", "pull_requests": "pull_request", "discussions": "discussion"}


def delete_items(con: duckdb.DuckDBPyConnection, table: str, handles: Sequence[str]) -> None:
    """Remove items confirmed gone from GitHub, with everything hanging off them.

    A handle another kind of item now holds (an issue converted to a discussion keeps
    its number) keeps its labels, links and the new item's comments: only the
    comments of the removed kind go with it."""
    delete_where_in(con, table, "handle", handles)
    others = [t for t in _THREAD_TABLES if t != table]
    taken = {
        h
        for other in others
        for (h,) in con.execute(
            f"SELECT handle FROM {other} WHERE list_contains(?, handle)", [list(handles)]
        ).fetchall()
    }
    if taken and table in _THREAD_TABLES:
        con.execute(
            "DELETE FROM comments WHERE list_contains(?, parent_handle) AND parent_type = ?",
            [sorted(taken), _THREAD_TABLES[table]],
        )
    orphans = [h for h in handles if h not in taken]
    for child in ("issue_labels", "assignees"):
        delete_where_in(con, child, "handle", orphans)
    for child in ("comments", "reviews", "review_comments"):
        delete_where_in(con, child, "parent_handle", orphans)
    edges.delete_from_sources(con, orphans)


def _thread_row(repo: str, node: Node) -> dict[str, Any]:
    """Columns issues and pull requests share."""
    author = author_of(node)
    milestone = node.get("milestone") or {}
    return {
        "handle": item_handle(repo, node["number"]),
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
        "comments_count": count(node.get("comments")),
        "reactions_count": count(node.get("reactions")),
        "url": node["url"],
        "created_at": node["createdAt"],
        "updated_at": node["updatedAt"],
        "closed_at": node.get("closedAt"),
        "fetched_at": now(),
    }


def _save_thread_children(
    con: duckdb.DuckDBPyConnection, repo: str, kind: str, nodes: Sequence[Node]
) -> None:
    """Comments and links of issues, pull requests or discussions read in full."""
    page = [(item_handle(repo, node["number"]), node) for node in nodes]
    read = [
        (h, n) for h, n in page if isinstance(n.get("comments"), dict) and "nodes" in n["comments"]
    ]
    rows = [
        row
        for handle, node in read
        for row in conversation.comment_rows(repo, handle, node["number"], kind, node["comments"])
    ]
    conversation.replace_children(con, "comments", [h for h, _n in read], rows)
    edges.replace_item_links(con, repo, page, kind)


def _read_whole(connection: object) -> bool:
    """Whether a node's connection came with its nodes (so they replace the stored)."""
    return isinstance(connection, dict) and "nodes" in connection


def _save_item_links(con: duckdb.DuckDBPyConnection, repo: str, nodes: Sequence[Node]) -> None:
    """Labels, assignees and milestones of a page: replaced, not merged, per item."""
    handles = [item_handle(repo, node["number"]) for node in nodes]
    if not handles:
        return
    labels, item_labels, assignees, milestones = {}, [], [], {}
    for handle, node in zip(handles, nodes, strict=True):
        for label in nodes_of(node.get("labels")):
            labels[label["name"]] = {
                "repo": repo,
                "name": label["name"],
                "color": label.get("color"),
                "description": label.get("description"),
            }
            item_labels.append({"handle": handle, "repo": repo, "label": label["name"]})
        for user in nodes_of(node.get("assignees")):
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
    listed = "list_contains(?, handle)"
    replace_where(con, "issue_labels", ("handle", "label"), item_labels, listed, [handles])
    replace_where(con, "assignees", ("handle", "login"), assignees, listed, [handles])
    upsert(con, "labels", ("repo", "name"), list(labels.values()))
    upsert(con, "milestones", ("repo", "number"), list(milestones.values()))
