"""Issues and pull requests of one repository, page by page (network only)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ghindex.errors import GitHubError, RepoNotFound
from ghindex.fetch.client import GraphQLClient

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


def issue_pages(client: GraphQLClient, repo: str, since: datetime | None) -> Iterator[list[Node]]:
    """Issues updated at or after `since` (all when None), oldest update first."""
    variables = {"since": since.isoformat() if since else None}
    yield from _pages(client, "issues", "issues", repo, variables)


def pull_request_pages(client: GraphQLClient, repo: str) -> Iterator[list[Node]]:
    """Pull requests, newest update first; the caller stops when pages get old."""
    yield from _pages(client, "pull_requests", "pullRequests", repo, {})


def _pages(
    client: GraphQLClient, query: str, field: str, repo: str, variables: dict[str, Any]
) -> Iterator[list[Node]]:
    owner, name = repo.split("/", 1)
    after: str | None = None
    while True:
        data = client.execute(query, {"owner": owner, "name": name, **variables, "after": after})
        if not data.get("repository"):
            raise RepoNotFound(f"repository {repo} disappeared during the fetch: run again")
        connection = data["repository"][field]
        yield [node for node in connection["nodes"] if node]
        info = connection["pageInfo"]
        if not info["hasNextPage"]:
            return
        if not info["endCursor"] or info["endCursor"] == after:
            raise GitHubError(f"{repo} {field}: the server returned no new page cursor")
        after = info["endCursor"]
