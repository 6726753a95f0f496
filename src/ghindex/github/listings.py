"""A repository's items, page by page (network only).

Each generator yields `Page`s: the nodes of one page with every nested connection
read to its end (see `nested.py`), so they can be stored as complete, plus what the
page could not give. GitHub answers part of a page with an error now and then (a
nested connection it could not resolve, an item deleted while its comments were
being read): such an item is left out of `nodes` and named in `gaps` (to be read
again by id, `items_by_id`) or in `gone` (GitHub said it no longer exists). A
whole surface the token may not read raises `SurfaceSkipped`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ghindex.errors import AnswerError, GitHubError, RepoNotFound
from ghindex.github.answers import (
    Answer,
    describe_error,
    error_path,
    error_type,
    permission_hint,
)
from ghindex.github.client import GraphQLClient
from ghindex.github.graphql import LIGHT
from ghindex.github.nested import ItemGone, ItemUnreadable, complete, hidden_only
from ghindex.github.paging import Pager, Unpageable, item_key, page_info

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


class SurfaceSkipped(Exception):
    """A whole surface could not be read this run (FORBIDDEN at `repository.<field>`, or
    pages that cannot be followed to their end): `gap` says why."""

    def __init__(self, gap: Gap) -> None:
        super().__init__(gap.reason)
        self.gap = gap


@dataclass
class Located:
    """Where items are now, by node id: the answer to "was this deleted?"."""

    found: dict[str, Node] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # NOT_FOUND: GitHub has no such node
    unreadable: dict[str, str] = field(default_factory=dict)  # id -> why (FORBIDDEN, ...)


class RepositoryRefused(AnswerError):
    """GitHub answered a repository lookup with a repository it does not confirm."""


def repository(client: GraphQLClient, repo: str) -> Node:
    """The repository's metadata; RepoNotFound when it does not exist or is hidden.

    GitHub answers an old name with the renamed repository: an answer under another
    name is taken only when that name answers with the same repository (same node id),
    else it is refused (`RepositoryRefused`), so no row is ever written for a name GitHub
    does not stand by."""
    owner, name = repo.split("/", 1)
    data = client.execute("repository", {"owner": owner, "name": name})
    node = data.get("repository")
    if not node:
        raise RepoNotFound(
            f"repository {repo} not found, or the token cannot read it: "
            "check the name and the token's access"
        )
    if not _repository_name(node) or not isinstance(node.get("id"), str) or not node["id"]:
        raise RepositoryRefused(
            f"GitHub answered {repo} with a repository without a name OWNER/NAME or an id: "
            "nothing was stored for it"
        )
    named = node["nameWithOwner"]
    if named.lower() != repo.lower():
        owner, name = named.split("/", 1)
        try:
            again = client.execute("repository", {"owner": owner, "name": name}).get("repository")
        except RepoNotFound:
            again = None
        if not isinstance(again, dict) or (again.get("id"), again.get("nameWithOwner")) != (
            node["id"],
            named,
        ):
            raise RepositoryRefused(
                f"GitHub answered {repo} with another repository ({named[:100]}) that it does "
                "not confirm under that name: nothing was stored for it"
            )
    return node


def owner_repositories(client: GraphQLClient, login: str) -> tuple[list[Node], str | None]:
    """Every repository `login` (an organisation or a user) owns, and why the list is
    short, when its pages could not be followed to their end (None when it is whole)."""
    found: dict[str, Node] = {}
    after: str | None = None
    pager = Pager(f"{login}'s repositories")
    while True:
        data = client.execute("owner_repositories", {"login": login, "after": after})
        owner = data.get("repositoryOwner")
        if not owner:
            raise RepoNotFound(
                f"organisation or user {login!r} not found, or the token cannot see it: "
                "check the name and the token's access"
            )
        connection = owner.get("repositories")
        try:
            page_info(connection, pager.what)
            named = [n for n in connection["nodes"] if _repository_name(n)]
            found.update((n["nameWithOwner"].lower(), n) for n in named)
            after = pager.follow(connection, [n["nameWithOwner"].lower() for n in named])
        except Unpageable as stuck:
            return list(found.values()), stuck.reason
        if after is None:
            return list(found.values()), None


def _repository_name(node: Any) -> bool:
    """Whether a listed repository has a name of the form OWNER/NAME."""
    name = node.get("nameWithOwner") if isinstance(node, dict) else None
    return isinstance(name, str) and 0 < name.find("/") == name.rfind("/") < len(name) - 1


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
        nodes = _listed(answer, "nodes", len(batch))
        problems = _by_index(answer, "nodes")
        for index, (node_id, node) in enumerate(zip(batch, nodes, strict=True)):
            outcome, reason = _located(node, problems.get(index, []), ["nodes", index])
            if outcome == "failed":
                raise answer.failure(problems.get(index))
            if outcome == "unexplained":
                raise GitHubError(
                    f"GitHub answered Nodes with null at nodes.{index} and no error saying "
                    "why: nothing was removed; run again"
                )
            if outcome == "found":
                located.found[node_id] = node
            elif outcome == "gone":
                located.gone.add(node_id)
            else:
                located.unreadable[node_id] = reason
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
            nodes = _listed(answer, name, len(batch[surface]))
            problems = _by_index(answer, name, among=list(fields.values()))
            typename = SURFACES[surface][2]
            for index, (node_id, node) in enumerate(zip(batch[surface], nodes, strict=True)):
                errors = problems.get(index, [])
                outcome, reason = _located(node, errors, [name, index])
                if outcome == "found":
                    outcome, reason = _settle(client, node, errors, typename)
                if outcome == "gone":
                    located[surface].gone.add(node_id)
                elif outcome in ("read", "hidden"):
                    located[surface].found[node_id] = node
                else:
                    located[surface].unreadable[node_id] = reason or describe_error(None)
    return located


def _located(
    node: Node | None, errors: list[dict[str, Any]], at: list[str | int]
) -> tuple[str, str]:
    """What GitHub said about one id it was asked for: "found" (with `errors` below
    it, if any), "gone" (NOT_FOUND for that very id), "unreadable" (FORBIDDEN, or a
    deeper error that nulled it), "unexplained" (null, no error) or "failed"."""
    if node is not None:
        return "found", ""
    if not errors:
        return "unexplained", ""
    if any(error_type(e) == "NOT_FOUND" and error_path(e) == at for e in errors):
        return "gone", ""
    if all(error_type(e) in ("FORBIDDEN", "NOT_FOUND") for e in errors):
        return "unreadable", describe_error(errors[0])
    return "failed", ""


def _listed(answer: Answer, name: str, expected: int) -> list[Any]:
    """The list GitHub answered at `name` for `expected` ids, checked for its shape."""
    nodes = answer.data.get(name)
    if nodes is None and answer.errors:
        raise answer.failure()
    if not isinstance(nodes, list) or len(nodes) != expected:
        count = len(nodes) if isinstance(nodes, list) else "no"
        raise GitHubError(
            f"GitHub answered {answer.operation} with {count} {name} for {expected} ids: "
            "nothing was changed; run again"
        )
    return [n if isinstance(n, dict) else None for n in nodes]


def _pages(
    client: GraphQLClient, query: str, repo: str, variables: dict[str, Any]
) -> Iterator[Page]:
    surface, field, _typename = SURFACES[query]
    owner, name = repo.split("/", 1)
    after: str | None = None
    pager = Pager(surface.replace("_", " "))
    while True:
        answer = client.execute_partial(
            query, {"owner": owner, "name": name, **variables, "after": after}
        )
        # A failing non-null field nulls its parent: a refused `discussions` nulls `repository`.
        connection = (answer.data.get("repository") or {}).get(field)
        if connection is None:
            refusal = next(
                (e for e in answer.errors if error_path(e)[:2] == ["repository", field]), None
            )
            if refusal is not None and error_type(refusal) == "FORBIDDEN":
                hint = permission_hint(query, str(refusal.get("message", "")))
                raise SurfaceSkipped(Gap(surface, f"{describe_error(refusal)}: {hint}"))
            if answer.errors:
                raise answer.failure()
            raise RepoNotFound(f"repository {repo} disappeared during the fetch: run again")
        try:
            page_info(connection, field)
        except Unpageable as stuck:
            raise SurfaceSkipped(Gap(surface, stuck.reason)) from None
        page = _page(client, answer, query)
        yield page
        try:
            after = pager.follow(connection, [item_key(n) for n in page.listed])
        except Unpageable as stuck:
            raise SurfaceSkipped(Gap(surface, stuck.reason)) from None
        if after is None:
            return


def _page(client: GraphQLClient, answer: Answer, query: str) -> Page:
    """One listing page: its whole items completed, the rest sorted into gaps and gone."""
    surface, field, typename = SURFACES[query]
    page = Page()
    problems = _by_index(answer, "repository", field, "nodes")
    nodes = answer.data["repository"][field].get("nodes") or []
    nodes = [n if isinstance(n, dict) and n.get("id") else None for n in nodes]
    names = _page_ids(client, answer, query, nodes) if None in nodes else {}
    for index, node in enumerate(nodes):
        errors = problems.get(index, [])
        if node is None:
            # Nulled whole (a failing non-null part): named by a light query of the same
            # page, it waits in the gaps to be read again by id.
            named = names[index]
            page.listed.append(named)
            reason = describe_error(errors[0] if errors else None)
            page.gaps.append(Gap(surface, reason, named["id"], named.get("number")))
            continue
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


def _page_ids(
    client: GraphQLClient, answer: Answer, query: str, nodes: list[Node | None]
) -> dict[int, Node]:
    """The items GitHub nulled in a page, named by a light query of the same page (same
    cursor, same size). Trusted only when it lists the same items in the same places:
    otherwise the page changed in between, and the page fails (a rerun reads it again)."""
    light = f"{query.removesuffix('s')}_ids"
    field = SURFACES[query][1]
    data = client.execute(light, answer.variables) if light in LIGHT else {}
    named = ((data.get("repository") or {}).get(field) or {}).get("nodes")
    same = (
        isinstance(named, list)
        and len(named) == len(nodes)
        and all(isinstance(n, dict) and isinstance(n.get("id"), str) for n in named)
        and all(node is None or node["id"] == n["id"] for node, n in zip(nodes, named, strict=True))
    )
    if not same:
        raise AnswerError(
            f"GitHub answered {answer.operation} with items it could not give, and the page "
            "changed before they could be named: nothing from it was stored"
        )
    return {i: n for i, n in enumerate(named) if nodes[i] is None}


def _settle(
    client: GraphQLClient, node: Node, errors: list[dict[str, Any]], typename: str
) -> tuple[str, str]:
    """What became of one item GitHub answered (with `errors` below it): "read",
    "hidden" (read, minus parts the token may not see), "gone" or "unreadable"."""
    if errors and not hidden_only(errors):
        return "unreadable", describe_error(errors[0])
    try:
        hidden = complete(client, node, typename, explained=bool(errors))
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
        if (
            error_path(error)[:1] != [prefix[0]]
            and error_path(error)[:1][0:1]
            and (error_path(error)[0] in among)
        ):
            continue
        path = error_path(error)
        index = path[width] if len(path) > width else None
        if list(path[:width]) != list(prefix) or not isinstance(index, int):
            raise answer.failure([error])
        found.setdefault(index, []).append(error)
    return found
