"""A repository's items, page by page (network only).

Each generator yields the nodes of one page with every nested connection read
to its end (see `nested.py`), so a page can be stored as complete.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ghindex.errors import GitHubError, RepoNotFound
from ghindex.fetch.client import GraphQLClient
from ghindex.fetch.nested import complete

Node = dict[str, Any]


def repository(client: GraphQLClient, repo: str) -> Node:
    """The repository's metadata; RepoNotFound when it does not exist or is hidden."""
    owner, name = repo.split("/", 1)
    data = client.execute("repository", {"owner": owner, "name": name})
    node = data.get("repository")
    if not node:
        raise RepoNotFound(
            f"repository {repo} not found, or the token cannot read it: "
            "check the name and the token's access"
        )
    return node


def owner_repositories(client: GraphQLClient, login: str) -> list[Node]:
    """Every repository `login` (an organisation or a user) owns."""
    found: list[Node] = []
    after: str | None = None
    while True:
        data = client.execute("owner_repositories", {"login": login, "after": after})
        owner = data.get("repositoryOwner")
        if not owner:
            raise RepoNotFound(
                f"organisation or user {login!r} not found, or the token cannot see it: "
                "check the name and the token's access"
            )
        connection = owner["repositories"]
        found.extend(node for node in connection["nodes"] if node)
        if not connection["pageInfo"]["hasNextPage"]:
            return found
        after = connection["pageInfo"]["endCursor"]


def issue_pages(client: GraphQLClient, repo: str, since: datetime | None) -> Iterator[list[Node]]:
    """Issues updated at or after `since` (all when None), oldest update first."""
    variables = {"since": since.isoformat() if since else None}
    yield from _pages(client, "issues", "issues", "Issue", repo, variables)


def pull_request_pages(client: GraphQLClient, repo: str) -> Iterator[list[Node]]:
    """Pull requests, newest update first; the caller stops when pages get old."""
    yield from _pages(client, "pull_requests", "pullRequests", "PullRequest", repo, {})


def discussion_pages(client: GraphQLClient, repo: str) -> Iterator[list[Node]]:
    """Discussions, newest update first; the caller stops when pages get old."""
    yield from _pages(client, "discussions", "discussions", "Discussion", repo, {})


def release_pages(client: GraphQLClient, repo: str) -> Iterator[list[Node]]:
    """Every release, newest first."""
    yield from _pages(client, "releases", "releases", "Release", repo, {})


def locate(client: GraphQLClient, node_ids: list[str]) -> dict[str, Node | None]:
    """Where items are now, by node id: None for an item that no longer exists."""
    found: dict[str, Node | None] = {}
    for start in range(0, len(node_ids), 100):
        batch = node_ids[start : start + 100]
        data = client.execute("nodes", {"ids": batch})
        for node_id, node in zip(batch, data.get("nodes") or [None] * len(batch), strict=True):
            found[node_id] = node
    return found


def _pages(
    client: GraphQLClient,
    query: str,
    field: str,
    typename: str,
    repo: str,
    variables: dict[str, Any],
) -> Iterator[list[Node]]:
    owner, name = repo.split("/", 1)
    after: str | None = None
    while True:
        data = client.execute(query, {"owner": owner, "name": name, **variables, "after": after})
        if not data.get("repository"):
            raise RepoNotFound(f"repository {repo} disappeared during the fetch: run again")
        connection = data["repository"][field]
        nodes = [node for node in connection["nodes"] if node]
        for node in nodes:
            complete(client, node, typename)
        yield nodes
        info = connection["pageInfo"]
        if not info["hasNextPage"]:
            return
        if not info["endCursor"] or info["endCursor"] == after:
            raise GitHubError(f"{repo} {field}: the server returned no new page cursor")
        after = info["endCursor"]
