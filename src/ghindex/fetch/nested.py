"""Reading nested connections to their end.

A list query brings each item with the first page of its comments, reviews,
review threads, commits and link events. `complete` asks for the remaining
pages of each, by the item's node id, and appends them in place, so that what
is stored is never a truncated listing.
"""

from __future__ import annotations

from typing import Any

from ghindex.errors import GitHubError
from ghindex.fetch.client import GraphQLClient

Node = dict[str, Any]

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


def complete(client: GraphQLClient, node: Node, typename: str) -> None:
    """Fetch every remaining page of `node`'s nested connections, recursively."""
    for field, query in _CONNECTIONS.get(typename, []):
        connection = node.get(field)
        if not connection:
            continue
        while connection["pageInfo"]["hasNextPage"]:
            after = connection["pageInfo"]["endCursor"]
            data = client.execute(query, {"id": node["id"], "after": after})
            fresh = (data.get("node") or {}).get(field)
            if fresh is None:
                raise GitHubError(
                    f"{typename} {node['id']} disappeared while reading its {field}: run again"
                )
            connection["nodes"].extend(n for n in fresh["nodes"] if n)
            connection["pageInfo"] = fresh["pageInfo"]
            connection["totalCount"] = fresh.get("totalCount", connection.get("totalCount"))
    for field, child_type in _CHILDREN.get(typename, []):
        for child in (node.get(field) or {}).get("nodes") or []:
            complete(client, child, child_type)
