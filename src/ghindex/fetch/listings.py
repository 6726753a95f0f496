"""A repository's items, page by page (network only).

Each generator yields `Page`s: the nodes of one page with every nested connection
read to its end (see `nested.py`), so they can be stored as complete, plus what the
page could not give. GitHub answers part of a page with an error now and then (a
nested connection it could not resolve, an item deleted while its comments were
being read): such an item is left out of `nodes` and named in `gaps` (to be read
again by id, `items_by_id`) or in `gone` (GitHub said it no longer exists). A
whole surface the token may not read raises `SurfaceRefused`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ghindex.errors import GitHubError, RepoNotFound
from ghindex.fetch.client import (
    Answer,
    GraphQLClient,
    describe_error,
    error_type,
    permission_hint,
)
from ghindex.fetch.nested import ItemGone, ItemUnreadable, complete, hidden_only

Node = dict[str, Any]

# query name -> (surface, the field of `repository` it lists, its node type)
SURFACES = {
    "issues": ("issues", "issues", "Issue"),
    "pull_requests": ("pull_requests", "pullRequests", "PullRequest"),
    "discussions": ("discussions", "discussions", "Discussion"),
    "releases": ("releases", "releases", "Release"),
}

TYPENAMES = {surface: typename for surface, _field, typename in SURFACES.values()}


@dataclass(frozen=True)
class Gap:
    """Something a run could not read, and why: one item (`node_id`), or a whole surface."""

    surface: str
    reason: str
    node_id: str = ""
    number: int | None = None


@dataclass
class Page:
    """One listing page: `listed` is every item it named (what cursors follow), `nodes`
    those read whole, `gaps` those GitHub answered with an error, `gone` those it
    deleted while their nested pages were being read."""

    listed: list[Node] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    gone: list[Node] = field(default_factory=list)
    hidden: list[Node] = field(default_factory=list)  # in `nodes`, minus what the token may not see


class SurfaceRefused(Exception):
    """GitHub refused a whole surface (FORBIDDEN at `repository.<field>`): `gap` says why."""

    def __init__(self, gap: Gap) -> None:
        super().__init__(gap.reason)
        self.gap = gap


@dataclass
class Located:
    """Where items are now, by node id: the answer to "was this deleted?"."""

    found: dict[str, Node] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # NOT_FOUND: GitHub has no such node
    unreadable: dict[str, str] = field(default_factory=dict)  # id -> why (FORBIDDEN, ...)


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


def issue_pages(client: GraphQLClient, repo: str, since: datetime | None) -> Iterator[Page]:
    """Issues updated at or after `since` (all when None), oldest update first."""
    yield from _pages(client, "issues", repo, {"since": since.isoformat() if since else None})


def pull_request_pages(client: GraphQLClient, repo: str) -> Iterator[Page]:
    """Pull requests, newest update first; the caller stops when pages get old."""
    yield from _pages(client, "pull_requests", repo, {})


def discussion_pages(client: GraphQLClient, repo: str) -> Iterator[Page]:
    """Discussions, newest update first; the caller stops when pages get old."""
    yield from _pages(client, "discussions", repo, {})


def release_pages(client: GraphQLClient, repo: str) -> Iterator[Page]:
    """Every release, newest first."""
    yield from _pages(client, "releases", repo, {})


def locate(client: GraphQLClient, node_ids: list[str]) -> Located:
    """Where items are now, by node id, as GitHub says it: an item it cannot resolve
    (NOT_FOUND) is gone; one this token may not read (FORBIDDEN) is unreadable. Any
    other error, or a null without a reason, raises: nothing is confirmed from it."""
    located = Located()
    for start in range(0, len(node_ids), 100):
        batch = node_ids[start : start + 100]
        answer = client.execute_partial("nodes", {"ids": batch})
        nodes = answer.data.get("nodes") or [None] * len(batch)
        if len(nodes) != len(batch):
            raise GitHubError(f"GitHub answered {len(nodes)} nodes for {len(batch)} ids: run again")
        problems = _by_index(answer, "nodes")
        for index, (node_id, node) in enumerate(zip(batch, nodes, strict=True)):
            error = (problems.get(index) or [None])[0]
            kind = error_type(error) if error else None
            if node is not None and error is None:
                located.found[node_id] = node
            elif kind == "NOT_FOUND" and node is None:
                located.gone.add(node_id)
            elif kind == "FORBIDDEN" or (error and node is not None):
                located.unreadable[node_id] = describe_error(error)
            elif error is None:
                raise GitHubError(
                    f"GitHub answered Nodes with null at nodes.{index} and no error saying "
                    "why: nothing was removed; run again"
                )
            else:
                raise answer.failure([error])
    return located


def items_by_id(client: GraphQLClient, ids: dict[str, list[str]]) -> dict[str, Located]:
    """Issues, pull requests and discussions read again whole, by node id; `ids` and the
    answer are keyed by surface. Each found node has its nested connections completed
    (an item deleted meanwhile counts as gone, one that fails again as unreadable)."""
    fields = {"issues": "issues", "pull_requests": "pullRequests", "discussions": "discussions"}
    located = {surface: Located() for surface in fields}
    pending = {surface: list(ids.get(surface, ())) for surface in fields}
    while any(pending.values()):
        batch = {s: pending[s][:25] for s in fields}
        pending = {s: pending[s][25:] for s in fields}
        variables = {fields[s]: batch[s] for s in fields}
        answer = client.execute_partial("items", variables)
        for surface, name in fields.items():
            nodes = answer.data.get(name) or [None] * len(batch[surface])
            problems = _by_index(answer, name, among=list(fields.values()))
            typename = SURFACES[surface][2]
            for index, (node_id, node) in enumerate(zip(batch[surface], nodes, strict=True)):
                errors = problems.get(index, [])
                if node is None:
                    if errors and error_type(errors[0]) == "NOT_FOUND":
                        located[surface].gone.add(node_id)
                    else:
                        located[surface].unreadable[node_id] = describe_error(
                            errors[0] if errors else None
                        )
                    continue
                outcome, reason = _settle(client, node, errors, typename)
                if outcome == "gone":
                    located[surface].gone.add(node_id)
                elif outcome == "unreadable":
                    located[surface].unreadable[node_id] = reason
                else:
                    located[surface].found[node_id] = node
    return located


def _pages(
    client: GraphQLClient, query: str, repo: str, variables: dict[str, Any]
) -> Iterator[Page]:
    surface, field, _typename = SURFACES[query]
    owner, name = repo.split("/", 1)
    after: str | None = None
    while True:
        answer = client.execute_partial(
            query, {"owner": owner, "name": name, **variables, "after": after}
        )
        # A failing non-null field nulls its parent: a refused `discussions` nulls `repository`.
        connection = (answer.data.get("repository") or {}).get(field)
        if connection is None:
            refusal = next(
                (e for e in answer.errors if e["path"][:2] == ["repository", field]), None
            )
            if refusal is not None and error_type(refusal) == "FORBIDDEN":
                hint = permission_hint(query, str(refusal.get("message", "")))
                raise SurfaceRefused(Gap(surface, f"{describe_error(refusal)}: {hint}"))
            if answer.errors:
                raise answer.failure()
            raise RepoNotFound(f"repository {repo} disappeared during the fetch: run again")
        yield _page(client, answer, query)
        info = connection["pageInfo"]
        if not info["hasNextPage"]:
            return
        if not info["endCursor"] or info["endCursor"] == after:
            raise GitHubError(f"{repo} {field}: the server returned no new page cursor")
        after = info["endCursor"]


def _page(client: GraphQLClient, answer: Answer, query: str) -> Page:
    """One listing page: its whole items completed, the rest sorted into gaps and gone."""
    surface, field, typename = SURFACES[query]
    page = Page()
    problems = _by_index(answer, "repository", field, "nodes")
    nodes = answer.data["repository"][field]["nodes"]
    unnamed = [i for i, node in enumerate(nodes) if not (node or {}).get("id") and i in problems]
    names = _page_ids(client, answer, query) if unnamed else {}
    for index, node in enumerate(nodes):
        errors = problems.get(index, [])
        if index in unnamed:
            # A failing non-null part nulled the whole item: named by a light query of the
            # same page, it waits in the gaps to be read again by id.
            named = names.get(index)
            if named is None:
                raise answer.failure(errors)
            page.listed.append(named)
            page.gaps.append(Gap(surface, describe_error(errors[0]), named["id"], named["number"]))
            continue
        if not (node or {}).get("id"):
            continue  # GitHub leaves out what the token may not see
        page.listed.append(node)
        outcome, reason = _settle(client, node, errors, typename)
        if outcome == "gone":
            page.gone.append(node)
        elif outcome == "unreadable":
            page.gaps.append(Gap(surface, reason, node["id"], node.get("number")))
        else:
            page.nodes.append(node)
            if outcome == "hidden":
                page.hidden.append(node)
    return page


def _page_ids(client: GraphQLClient, answer: Answer, query: str) -> dict[int, Node]:
    """The items of the page `answer` holds, by position: id, number, updatedAt."""
    light = f"{query.removesuffix('s')}_ids"
    if light not in _ID_QUERIES:
        return {}
    field = SURFACES[query][1]
    data = client.execute(light, answer.variables)
    nodes = ((data.get("repository") or {}).get(field) or {}).get("nodes") or []
    return {i: node for i, node in enumerate(nodes) if node and node.get("id")}


_ID_QUERIES = {"issue_ids", "pull_request_ids", "discussion_ids"}


def _settle(
    client: GraphQLClient, node: Node, errors: list[dict[str, Any]], typename: str
) -> tuple[str, str]:
    """What became of one item GitHub answered (with `errors` below it): "read",
    "hidden" (read, minus parts the token may not see), "gone" or "unreadable"."""
    if errors and not hidden_only(errors):
        return "unreadable", describe_error(errors[0])
    try:
        hidden = complete(client, node, typename)
    except ItemGone:
        return "gone", "deleted while being read"
    except ItemUnreadable as exc:
        return "unreadable", str(exc)
    return ("hidden" if hidden or errors else "read"), ""


def _by_index(
    answer: Answer, *prefix: str, among: Sequence[str] = ()
) -> dict[int, list[dict[str, Any]]]:
    """The errors below each item of the list at `prefix`, by the item's index; an
    error anywhere else makes the whole answer unusable, except below the other
    top-level fields named in `among` (each read on its own)."""
    found: dict[int, list[dict[str, Any]]] = {}
    width = len(prefix)
    for error in answer.errors:
        if error["path"][0] != prefix[0] and error["path"][0] in among:
            continue
        path = error["path"]
        index = path[width] if len(path) > width else None
        if list(path[:width]) != list(prefix) or not isinstance(index, int):
            raise answer.failure([error])
        found.setdefault(index, []).append(error)
    return found
