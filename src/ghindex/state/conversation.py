"""Saving what people wrote on an item: comments, PR reviews and review comments.

Children are replaced per parent: the caller read the parent's connections to
their end, so a comment missing from them was deleted on GitHub.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from ghindex.state.rows import (
    Node,
    Row,
    author_of,
    count,
    login,
    nodes_of,
    now,
    replace_where,
)
from ghindex.vocabulary.handles import comment_handle, review_comment_handle, review_handle


def replace_children(
    con: duckdb.DuckDBPyConnection, table: str, parents: Sequence[str], rows: list[Row]
) -> None:
    """Make the rows of `table` (comments, reviews, review comments) under `parents`
    exactly `rows`: one statement for a page of items, not one per item."""
    if parents:
        scope = "list_contains(?, parent_handle)"
        replace_where(con, table, ("handle",), rows, scope, [list(parents)])


def comment_rows(repo: str, parent: str, number: int, kind: str, comments: Node) -> list[Row]:
    """Comments of an issue or pull request, or of a discussion with their replies."""
    rows: list[Row] = []
    for node in nodes_of(comments):
        rows.append(_comment_row(repo, parent, number, kind, node, reply_to=None))
        for reply in nodes_of(node.get("replies")):
            rows.append(_comment_row(repo, parent, number, kind, reply, reply_to=rows[-1]))
    return rows


def review_rows(repo: str, parent: str, number: int, reviews: Node) -> list[Row]:
    rows = []
    for node in nodes_of(reviews):
        author = author_of(node)
        rows.append(
            {
                "handle": review_handle(parent, handle_key(node)),
                "repo": repo,
                "number": number,
                "parent_handle": parent,
                "node_id": node.get("id"),
                "database_id": node.get("databaseId"),
                "state": node["state"],
                "author": author.get("login"),
                "author_type": author.get("__typename"),
                "author_association": node.get("authorAssociation"),
                "body": node.get("body"),
                "url": node.get("url"),
                "commit_oid": (node.get("commit") or {}).get("oid"),
                "submitted_at": node.get("submittedAt"),
                "created_at": node["createdAt"],
                "updated_at": node["updatedAt"],
                "fetched_at": now(),
            }
        )
    return rows


def review_comment_rows(repo: str, parent: str, number: int, threads: Sequence[Node]) -> list[Row]:
    """Every comment of every review thread, with its thread's resolved/outdated state."""
    rows = []
    for thread in threads:
        for node in nodes_of(thread.get("comments")):
            author = author_of(node)
            review = (node.get("pullRequestReview") or {}).get("databaseId")
            reply = (node.get("replyTo") or {}).get("databaseId")
            rows.append(
                {
                    "handle": review_comment_handle(parent, handle_key(node)),
                    "repo": repo,
                    "number": number,
                    "parent_handle": parent,
                    "review_handle": review_handle(parent, review) if review else None,
                    "thread_id": thread.get("id"),
                    "reply_to": review_comment_handle(parent, reply) if reply else None,
                    "node_id": node.get("id"),
                    "database_id": node.get("databaseId"),
                    "author": author.get("login"),
                    "author_type": author.get("__typename"),
                    "author_association": node.get("authorAssociation"),
                    "body": node.get("body"),
                    "path": node.get("path") or thread.get("path"),
                    "line": node.get("line"),
                    "original_line": node.get("originalLine"),
                    "start_line": node.get("startLine"),
                    "diff_hunk": node.get("diffHunk"),
                    "commit_oid": (node.get("commit") or {}).get("oid"),
                    "original_commit_oid": (node.get("originalCommit") or {}).get("oid"),
                    "is_resolved": thread.get("isResolved"),
                    "is_outdated": thread.get("isOutdated"),
                    "resolved_by": login(thread.get("resolvedBy")),
                    "url": node.get("url"),
                    "reactions_count": count(node.get("reactions")),
                    "created_at": node["createdAt"],
                    "updated_at": node["updatedAt"],
                    "fetched_at": now(),
                }
            )
    return rows


def _comment_row(
    repo: str, parent: str, number: int, kind: str, node: Node, reply_to: Row | None
) -> Row:
    author = author_of(node)
    return {
        "handle": comment_handle(parent, handle_key(node)),
        "repo": repo,
        "number": number,
        "parent_handle": parent,
        "parent_type": kind,
        "node_id": node.get("id"),
        "database_id": node.get("databaseId"),
        "reply_to": reply_to["handle"] if reply_to else None,
        "is_answer": node.get("isAnswer"),
        "author": author.get("login"),
        "author_type": author.get("__typename"),
        "author_association": node.get("authorAssociation"),
        "body": node.get("body"),
        "url": node.get("url"),
        "reactions_count": count(node.get("reactions")),
        "is_minimized": node.get("isMinimized"),
        "created_at": node["createdAt"],
        "updated_at": node["updatedAt"],
        "fetched_at": now(),
    }


def handle_key(node: Node) -> int | str:
    """databaseId names a comment in URLs and handles; the node id is the fallback."""
    return node.get("databaseId") or node["id"]
