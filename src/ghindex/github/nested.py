"""Reading nested connections to their end.

A list query brings each item with the first page of its comments, reviews,
review threads, commits and link events. `complete` asks for the remaining
pages of each, by the item's node id, and appends them in place, so that what
is stored is never a truncated listing.

An item deleted meanwhile (GitHub answers `node` null with NOT_FOUND) raises
`ItemGone`. Parts the token may not see (FORBIDDEN below the item, say a cross-
reference from a repository behind SAML) are left out, as GitHub leaves them null,
and `complete` returns True. Any other error raises `ItemUnreadable`, so that the
caller can leave that one item out of the page and read it again later.
"""

from __future__ import annotations

from typing import Any

from ghindex.errors import AnswerError
from ghindex.github.answers import describe_error, error_path, error_type
from ghindex.github.client import GraphQLClient
from ghindex.github.paging import Pager, Unpageable

Node = dict[str, Any]


class ItemGone(Exception):
    """GitHub no longer has the item being completed."""


class ItemUnreadable(Exception):
    """GitHub answered part of the item's nested pages with an error (the reason)."""


# node type -> [(connection field, query that pages it)]
_CONNECTIONS: dict[str, list[tuple[str, str]]] = {
    "Issue": [("comments", "issue_comments"), ("timelineItems", "timeline_items")],
    "PullRequest": [
        ("comments", "issue_comments"),
        ("timelineItems", "timeline_items"),
        ("reviews", "pull_request_reviews"),
        ("reviewThreads", "review_threads"),
        ("commits", "pull_request_commits"),
        ("closingIssuesReferences", "closing_references"),
    ],
    "PullRequestReviewThread": [("comments", "review_thread_comments")],
    "Discussion": [("comments", "discussion_comments")],
    "DiscussionComment": [("replies", "discussion_replies")],
}

# node type -> [(connection field whose nodes have connections of their own, their type)]
_CHILDREN: dict[str, list[tuple[str, str]]] = {
    "PullRequest": [("reviewThreads", "PullRequestReviewThread")],
    "Discussion": [("comments", "DiscussionComment")],
}


def hidden_only(errors: list[dict[str, Any]]) -> bool:
    """Whether every error is a part the token may not read (and nothing else failed)."""
    return all(error_type(e) == "FORBIDDEN" for e in errors)


def complete(
    client: GraphQLClient, node: Node, typename: str, *, top: bool = True, explained: bool = False
) -> bool:
    """Fetch every remaining page of `node`'s nested connections, recursively; True
    when GitHub left out parts this token may not read. `top` is False for a child
    (a review thread, a discussion comment): one deleted meanwhile makes the item
    unreadable for now, never gone. `explained`: GitHub's errors below the item (parts
    the token may not see, judged by the caller) explain a null connection; without
    them a null connection, like one without pageInfo, makes the item unreadable."""
    hidden = False
    for field, query in _CONNECTIONS.get(typename, []):
        connection = node.get(field)
        if connection is None and explained:
            continue  # nulled where the token may not see, as GitHub's errors said
        if connection is None and field in node:
            raise ItemUnreadable(f"GitHub answered its {field} as null without saying why")
        if connection is None:
            continue
        pager = Pager(field)
        try:
            after = pager.follow(connection)
            while after is not None:
                answer = _next_page(client, query, node["id"], after, field, top)
                hidden = hidden or bool(answer.errors)
                fresh = (answer.data.get("node") or {}).get(field)
                if not isinstance(fresh, dict):
                    raise ItemUnreadable(f"GitHub answered no {field} for it")
                after = pager.follow(fresh)
                connection["nodes"].extend(n for n in fresh["nodes"] if n)
                connection["pageInfo"] = fresh["pageInfo"]
                connection["totalCount"] = fresh.get("totalCount", connection.get("totalCount"))
        except Unpageable as stuck:
            raise ItemUnreadable(stuck.reason) from None
    for field, child_type in _CHILDREN.get(typename, []):
        for child in (node.get(field) or {}).get("nodes") or []:
            if child:
                hidden = (
                    complete(client, child, child_type, top=False, explained=explained) or hidden
                )
    return hidden


def _next_page(client: GraphQLClient, query: str, node_id: str, after: str, field: str, top: bool):
    """The page of `field` after `after`, its errors judged: the item gone, unreadable, or
    a page (with parts the token may not see left out)."""
    try:
        answer = client.execute_partial(query, {"id": node_id, "after": after})
    except AnswerError as exc:
        raise ItemUnreadable(f"{exc} (reading its {field})") from None
    if answer.data.get("node") is None and any(
        error_type(e) == "NOT_FOUND" and error_path(e) == ["node"] for e in answer.errors
    ):
        if not top:
            raise ItemUnreadable(f"a part of it was deleted while its {field} were read")
        raise ItemGone(node_id)
    if answer.errors and (answer.data.get("node") is None or not hidden_only(answer.errors)):
        raise ItemUnreadable(f"{describe_error(answer.errors[0])} (reading its {field})")
    return answer
