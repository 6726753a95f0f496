"""The raw reference graph: links GitHub records and links written in text.

Every edge is stored with where it was seen (`source_handle`, `source_field`).
Edges seen on an item, its comments, reviews and review comments are replaced
whenever the item is saved, because the item was just read in full. The other
end of an edge may be in a repository that is not indexed: it is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import duckdb

from ghindex.state.conversation import handle_key
from ghindex.state.mentions import closing_handles, mentioned_handles
from ghindex.state.rows import Node, Row, insert, nodes_of, now, replace_where
from ghindex.vocabulary.edges import check_kind
from ghindex.vocabulary.handles import (
    SUB_ITEM,
    comment_handle,
    commit_handle,
    item_handle,
    review_comment_handle,
    review_handle,
)

_KEY = ("src", "dst", "kind", "source_handle", "source_field")

# timeline event -> (edge kind, field of the event that is the source, field that is the target)
# A None target means the item whose timeline holds the event.
_EVENTS = {
    "CrossReferencedEvent": ("cross_references", "source", None),
    "ConnectedEvent": ("connected", "source", "subject"),
    "DisconnectedEvent": ("disconnected", "source", "subject"),
    "MarkedAsDuplicateEvent": ("duplicate_of", "duplicate", "canonical"),
    "UnmarkedAsDuplicateEvent": ("unmarked_duplicate_of", "duplicate", "canonical"),
    "ReferencedEvent": ("references", "commit", None),
    "ClosedEvent": ("closes", "closer", None),
}


def ref_handle(ref: Node | None) -> str | None:
    """Handle of an issue, pull request, discussion or commit reference, if any."""
    if not ref:
        return None
    if "oid" in ref:
        repo = (ref.get("repository") or {}).get("nameWithOwner")
        return commit_handle(repo, ref["oid"]) if repo else None
    repo = (ref.get("repository") or {}).get("nameWithOwner")
    if repo and ref.get("number") is not None:
        return item_handle(repo, ref["number"])
    return None


def item_links(repo: str, handle: str, node: Node, kind: str | None = None) -> list[Row]:
    """Every link an issue, pull request or discussion node holds. A pull request's
    body that says "fixes #N" closes N, whichever branch it was opened against."""
    links: list[Row] = []

    def add(src, dst, kind, source_handle, field, created_at=None):
        if src and dst and src != dst:
            links.append(_edge(src, dst, kind, source_handle, field, repo, created_at))

    for target in mentioned_handles(node.get("body"), repo):
        add(handle, target, "mentions", handle, "body")
    if kind == "pull_request":
        for target in closing_handles(node.get("body"), repo):
            add(handle, target, "closes", handle, "body")
    for event in nodes_of(node.get("timelineItems")):
        kind, source, target = _EVENTS.get(event.get("__typename"), (None, None, None))
        if kind is None:
            continue
        field = f"timeline:{event['__typename']}"
        if event["__typename"] == "ReferencedEvent":
            commit = {**(event.get("commit") or {}), "repository": event.get("commitRepository")}
            add(ref_handle(commit), handle, kind, handle, field, event.get("createdAt"))
            continue
        src = ref_handle(event.get(source))
        dst = ref_handle(event.get(target)) if target else handle
        add(src, dst, kind, handle, field, event.get("createdAt"))
        if event.get("willCloseTarget"):
            add(src, dst, "closes", handle, field, event.get("createdAt"))
    add(handle, ref_handle(node.get("parent")), "sub_issue_of", handle, "parent")
    for issue in nodes_of(node.get("closingIssuesReferences")):
        add(handle, ref_handle(issue), "closes", handle, "closingIssuesReferences")
    for item in nodes_of(node.get("commits")):
        commit = {**(item.get("commit") or {}), "repository": {"nameWithOwner": repo}}
        add(ref_handle(commit), handle, "commit_in_pr", handle, "commits")
    merge = node.get("mergeCommit")
    if merge:
        commit = {**merge, "repository": {"nameWithOwner": repo}}
        add(ref_handle(commit), handle, "commit_in_pr", handle, "mergeCommit")
    for child_handle, child, field in _children(handle, node):
        for target in mentioned_handles(child.get("body"), repo):
            add(handle, target, "mentions", child_handle, field)
    return links


def replace_item_links(
    con: duckdb.DuckDBPyConnection,
    repo: str,
    items: Sequence[tuple[str, Node]],
    kind: str | None = None,
) -> None:
    """The links of a page of items of one kind, (handle, node) each, replacing those
    seen on them before."""
    links = [link for handle, node in items for link in item_links(repo, handle, node, kind)]
    _replace_sources(con, [handle for handle, _node in items], links)


def replace_commit_links(con: duckdb.DuckDBPyConnection, repo: str, commits: Sequence[Row]) -> None:
    """Items a commit message names (`references`) or says it closes ("Fixes #12",
    `closes`), for a batch of `commits` rows; a commit's earlier links are replaced."""
    links = []
    for commit in commits:
        message, handle, when = commit.get("message"), commit["handle"], commit.get("committed_at")
        for target in mentioned_handles(message, repo):
            links.append(_edge(handle, target, "references", handle, "message", repo, when))
        for target in closing_handles(message, repo):
            links.append(_edge(handle, target, "closes", handle, "message", repo, when))
    _replace_sources(con, [c["handle"] for c in commits], links)


def replace_release_links(
    con: duckdb.DuckDBPyConnection, repo: str, releases: Sequence[Row]
) -> None:
    """Issues and pull requests mentioned in release notes (`#123` in a changelog)."""
    con.execute("DELETE FROM edges WHERE repo = ? AND source_field = 'release'", [repo])
    links = [
        _edge(r["handle"], target, "mentions", r["handle"], "release", repo, r["published_at"])
        for r in releases
        for target in mentioned_handles(r.get("body"), repo)
    ]
    insert(con, "edges", _earliest(links), key=_KEY)


# edges seen on the items a list names, or on anything below them (comments, reviews...)
_SEEN_ON = "list_contains(?, regexp_replace(source_handle, ?, '\\1'))"


def delete_from_sources(con: duckdb.DuckDBPyConnection, handles: Iterable[str]) -> None:
    """Edges seen on these items or on anything below them (comments, reviews...)."""
    handles = list(handles)
    if handles:
        con.execute(f"DELETE FROM edges WHERE {_SEEN_ON}", [handles, SUB_ITEM])


def _replace_sources(con: duckdb.DuckDBPyConnection, handles: list[str], links: list[Row]) -> None:
    """Make the edges seen on `handles` (and below them) exactly `links`."""
    if handles:
        replace_where(con, "edges", _KEY, _earliest(links), _SEEN_ON, [handles, SUB_ITEM])


def _children(handle: str, node: Node) -> list[tuple[str, Node, str]]:
    """(handle, node, kind) of comments, replies, reviews and review comments."""
    found = []
    for comment in nodes_of(node.get("comments")):
        found.append((comment_handle(handle, handle_key(comment)), comment, "comment"))
        for reply in nodes_of(comment.get("replies")):
            found.append((comment_handle(handle, handle_key(reply)), reply, "comment"))
    for review in nodes_of(node.get("reviews")):
        found.append((review_handle(handle, handle_key(review)), review, "review"))
    for thread in nodes_of(node.get("reviewThreads")):
        for note in nodes_of(thread.get("comments")):
            found.append((review_comment_handle(handle, handle_key(note)), note, "review_comment"))
    return found


def _edge(src, dst, kind, source_handle, field, repo, created_at) -> Row:
    return {
        "src": src,
        "dst": dst,
        "kind": check_kind(kind),
        "source_handle": source_handle,
        "source_field": field,
        "repo": repo,
        "created_at": created_at,
        "fetched_at": now(),
    }


def _earliest(links: list[Row]) -> list[Row]:
    """One row per edge key: the earliest time GitHub gives for it."""
    first: dict[tuple, Row] = {}
    for link in sorted(links, key=lambda r: (r["created_at"] is None, str(r["created_at"] or ""))):
        first.setdefault(tuple(link[k] for k in _KEY), link)
    return list(first.values())
