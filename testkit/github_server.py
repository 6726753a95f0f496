"""A local stand-in for GitHub's GraphQL API, for the test suite and the benchmarks.

Queries run against GitHub's real published schema (vendored in ``tests/github_schema/``),
so a query that GitHub would reject for its shape is rejected here too. Data comes from
fixture dicts on the server instance, shaped exactly like the GraphQL response nodes.

    with GitHubServer() as server:
        server.add_repo("octo/hello", issues=[issue_node(1), issue_node(2)])
        monkeypatch.setenv("GHINDEX_GRAPHQL_URL", server.url)
        ...
        assert [r["operation"] for r in server.requests] == ["Repository", "Issues"]

Only what ghindex asks for is implemented: ``rateLimit``, ``repository`` and its
``issues``/``pullRequests`` connections. Everything below a node is served straight from the
fixture dicts (nested connections such as ``labels`` are ``{"nodes": [...]}`` dicts).

Where GitHub's behaviour is known, the server copies it, unkind parts included; each case
is listed in docs/github-behaviour.md with its source: node ids that no longer resolve
(``NOT_FOUND`` in ``errors`` with null in ``data``), ids and surfaces the token may not read
(``FORBIDDEN``), partial answers, the 500,000-node limit checked before execution, the
execution timeout (``timeout_above_nodes``), ``RESOURCE_LIMITS_EXCEEDED``, rate limits, and
repositories that follow renames.
"""

from __future__ import annotations

import base64
import binascii
import functools
import inspect
import json
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLInt,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    TypeInfo,
    TypeInfoVisitor,
    VariableNode,
    Visitor,
    build_schema,
    default_field_resolver,
    execute_sync,
    get_named_type,
    parse,
    validate,
    value_from_ast,
    value_from_ast_untyped,
    visit,
)

# GitHub's schema stays in tests/ (examples/sample/convert_github3py.py reads it there too)
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "tests" / "github_schema" / "schema.graphql"
DOCS_URL = "https://docs.github.com/graphql"
PAGE_LIMIT = 100  # GitHub's maximum for `first`/`last`
NODE_LIMIT = 500_000  # GitHub's maximum of possible nodes per query
TIMEOUT_MESSAGE = (
    "Something went wrong while executing your query. This may be the result of a timeout, "
    "or it could be a GitHub bug. Please include `0400:3F2A:1B2C3D:4E5F60:65A1B2C3` when "
    "reporting this issue."
)
NOT_ACCESSIBLE = "Resource not accessible by integration"
DEFAULT_TOKEN = "ghp_test_token"

_JSON = "application/json; charset=utf-8"
_ISSUES = "__test_server_issues"
_PULLS = "__test_server_pull_requests"
_DISCUSSIONS = "__test_server_discussions"
_RELEASES = "__test_server_releases"
_OWNED = "__test_server_owned_repositories"
_STATUS = "__test_server_http_status"  # an answer's HTTP status, when not 200


# --------------------------------------------------------------------------- schema


@functools.cache
def load_schema() -> GraphQLSchema:
    """GitHub's schema with this server's resolvers attached (built once, ~0.6 s).

    The resolvers only act when executed with a ``GitHubServer`` as ``context_value``;
    validation and static checks need no context.
    """
    sdl = SCHEMA_PATH.read_text(encoding="utf-8")
    # The published SDL does not pass graphql-core's own SDL validation, hence assume_valid*.
    schema = build_schema(sdl, assume_valid_sdl=True, assume_valid=True)
    query = schema.query_type
    assert query is not None
    query.fields["rateLimit"].resolve = _resolve_rate_limit
    query.fields["repository"].resolve = _resolve_repository
    repository = schema.type_map["Repository"]
    assert isinstance(repository, GraphQLObjectType)
    repository.fields["issues"].resolve = _resolve_issues
    repository.fields["pullRequests"].resolve = _resolve_pull_requests
    repository.fields["discussions"].resolve = _resolve_discussions
    repository.fields["releases"].resolve = _resolve_releases
    query.fields["repositoryOwner"].resolve = _resolve_owner
    for owner_type in ("Organization", "User"):
        schema.type_map[owner_type].fields["repositories"].resolve = _resolve_owner_repositories
    query.fields["node"].resolve = _resolve_node
    query.fields["nodes"].resolve = _resolve_nodes
    return schema


def _strict(function: Callable[..., Any]) -> dict[str, Any]:
    # graphql-core 3.3 accepts `field { }` unless told otherwise; GitHub (and 3.2) do not.
    if "allow_empty_selection_sets" in inspect.signature(function).parameters:
        return {"allow_empty_selection_sets": False}
    return {}


def parse_document(source: str) -> DocumentNode:
    return parse(source, **_strict(parse))


def validate_document(schema: GraphQLSchema, document: DocumentNode) -> list[GraphQLError]:
    return validate(schema, document, **_strict(validate))


# --------------------------------------------------------------- pagination checks


@dataclass(frozen=True)
class _Problem:
    message: str
    type: str
    path: tuple[str, ...]
    locations: tuple[dict[str, int], ...]

    def as_error(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "path": list(self.path),
            "locations": list(self.locations),
            "message": self.message,
        }


_UNKNOWN = object()  # an argument given as a variable whose value is not known


class _PaginationVisitor(Visitor):
    """Applies GitHub's pagination rules, which are not part of GraphQL validation."""

    def __init__(
        self,
        type_info: TypeInfo,
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: Mapping[str, Any] | None,
    ) -> None:
        super().__init__()
        self.type_info = type_info
        self.fragments = fragments
        self.variables = variables
        self.path: list[str] = []
        self.problems: list[_Problem] = []

    def enter_operation_definition(self, *_: Any) -> None:
        self.path = []

    def enter_fragment_definition(self, *_: Any) -> None:
        self.path = []

    def enter_field(self, node: FieldNode, *_: Any) -> None:
        self.path.append(node.alias.value if node.alias else node.name.value)
        definition = self.type_info.get_field_def()
        if definition is None:
            return
        named = get_named_type(definition.type)
        if isinstance(named, GraphQLObjectType) and named.name.endswith("Connection"):
            self._check(node)

    def leave_field(self, *_: Any) -> None:
        self.path.pop()

    def _check(self, node: FieldNode) -> None:
        name = node.name.value
        loc = node.loc.source.get_location(node.loc.start) if node.loc else None
        locations = ({"line": loc.line, "column": loc.column},) if loc else ()

        def problem(message: str, kind: str) -> None:
            self.problems.append(_Problem(message, kind, tuple(self.path), locations))

        first = self._argument(node, "first")
        last = self._argument(node, "last")
        # GitHub lets `issues { totalCount }` through; asking for items needs a bound.
        if first is None and last is None and _selects_items(node.selection_set, self.fragments):
            problem(
                f"You must provide a `first` or `last` value to properly paginate "
                f"the `{name}` connection.",
                "MISSING_PAGINATION_BOUNDARIES",
            )
        for argument, value in (("first", first), ("last", last)):
            if isinstance(value, int) and value > PAGE_LIMIT:
                problem(
                    f"Requesting {value} records on the `{name}` connection exceeds the "
                    f"`{argument}` limit of {PAGE_LIMIT} records.",
                    "EXCESSIVE_PAGINATION",
                )

    def _argument(self, node: FieldNode, name: str) -> Any:
        for argument in node.arguments or ():
            if argument.name.value != name:
                continue
            if isinstance(argument.value, VariableNode):
                if self.variables is None:
                    return _UNKNOWN
                return self.variables.get(argument.value.name.value)
            value = value_from_ast(argument.value, GraphQLInt)
            return value if isinstance(value, int) else None
        return None


def _selects_items(
    selection_set: SelectionSetNode | None,
    fragments: Mapping[str, FragmentDefinitionNode],
    seen: frozenset[str] = frozenset(),
) -> bool:
    """Whether `nodes` or `edges` is selected, looking through fragments."""
    for selection in selection_set.selections if selection_set else ():
        if isinstance(selection, FieldNode):
            if selection.name.value in ("nodes", "edges"):
                return True
        elif isinstance(selection, InlineFragmentNode):
            if _selects_items(selection.selection_set, fragments, seen):
                return True
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            fragment = fragments.get(name)
            if (
                fragment
                and name not in seen
                and _selects_items(fragment.selection_set, fragments, seen | {name})
            ):
                return True
    return False


def _pagination_problems(
    schema: GraphQLSchema, document: DocumentNode, variables: Mapping[str, Any] | None
) -> list[_Problem]:
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    if variables is not None:
        # Defaults from the variable definitions, overridden by the request's values.
        merged: dict[str, Any] = {}
        for definition in document.definitions:
            if isinstance(definition, OperationDefinitionNode):
                for var in definition.variable_definitions or ():
                    if var.default_value is not None:
                        merged[var.variable.name.value] = value_from_ast_untyped(var.default_value)
        merged.update(variables)
        variables = merged
    type_info = TypeInfo(schema)
    visitor = _PaginationVisitor(type_info, fragments, variables)
    visit(document, TypeInfoVisitor(type_info, visitor))
    return visitor.problems


def node_count(document: DocumentNode | str, variables: Mapping[str, Any] | None = None) -> int:
    """The possible nodes of a query as GitHub counts them for its 500,000 limit: each
    connection's `first`/`last` times those of every connection around it, summed
    (docs.github.com, "Rate limits and query limits for the GraphQL API", node limit).
    Type branches (`... on Issue`, `... on PullRequest`) all count."""
    if isinstance(document, str):
        document = parse_document(document)
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    values: dict[str, Any] = {}
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    for operation in operations:
        for var in operation.variable_definitions or ():
            if var.default_value is not None:
                values[var.variable.name.value] = value_from_ast_untyped(var.default_value)
    values.update(variables or {})

    def size(node: FieldNode) -> int | None:
        for argument in node.arguments or ():
            if argument.name.value in ("first", "last"):
                if isinstance(argument.value, VariableNode):
                    value = values.get(argument.value.name.value)
                else:
                    value = value_from_ast(argument.value, GraphQLInt)
                return value if isinstance(value, int) else None
        return None

    def walk(selections: SelectionSetNode | None, multiplier: int) -> int:
        total = 0
        for selection in selections.selections if selections else ():
            if isinstance(selection, FieldNode):
                n = size(selection)
                if n is None:
                    total += walk(selection.selection_set, multiplier)
                else:
                    total += multiplier * n + walk(selection.selection_set, multiplier * n)
            elif isinstance(selection, InlineFragmentNode):
                total += walk(selection.selection_set, multiplier)
            elif isinstance(selection, FragmentSpreadNode):
                fragment = fragments.get(selection.name.value)
                total += walk(fragment.selection_set if fragment else None, multiplier)
        return total

    return sum(walk(operation.selection_set, 1) for operation in operations)


def connection_errors(
    schema: GraphQLSchema,
    document: DocumentNode | str,
    variables: Mapping[str, Any] | None = None,
) -> list[str]:
    """GitHub's pagination errors for a (schema-valid) document, as messages.

    Without ``variables`` the check is static: a `first`/`last` given as a variable counts as
    present and within limits. With ``variables`` their values (or defaults) are checked.
    """
    if isinstance(document, str):
        document = parse_document(document)
    return [p.message for p in _pagination_problems(schema, document, variables)]


# ------------------------------------------------------------------------ resolvers


class GitHubAPIError(Exception):
    """An error a resolver reports the way GitHub does: message plus a top-level `type`."""

    def __init__(self, message: str, type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.type = type


def parse_time(value: str) -> datetime:
    """Parse GitHub's ISO-8601 times ("2015-03-01T12:00:00Z"); naive means UTC."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise GitHubAPIError(f"Could not coerce value {value!r} to DateTime") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _server(info: Any) -> GitHubServer:
    server = info.context
    if not isinstance(server, GitHubServer):
        raise RuntimeError("execute with a GitHubServer as context_value")
    return server


def _resolve_rate_limit(_root: Any, info: Any, dryRun: bool = False) -> dict[str, Any]:
    return dict(_server(info).rate_limit)


def _resolve_repository(
    _root: Any, info: Any, owner: str, name: str, followRenames: bool = True
) -> dict[str, Any]:
    entry = _server(info).find_repo(owner, name, follow_renames=followRenames)
    if entry is None:
        raise GitHubAPIError(
            f"Could not resolve to a Repository with the name '{owner}/{name}'.", "NOT_FOUND"
        )
    return {
        **entry.get("repository", {}),
        _ISSUES: entry.get("issues", []),
        _PULLS: entry.get("pullRequests", []),
        _DISCUSSIONS: entry.get("discussions", []),
        _RELEASES: entry.get("releases", []),
    }


def _label_names(node: Mapping[str, Any]) -> set[str]:
    return {label["name"] for label in (node.get("labels") or {}).get("nodes") or ()}


def _resolve_issues(
    repository: Mapping[str, Any],
    _info: Any,
    first: int | None = None,
    after: str | None = None,
    last: int | None = None,
    before: str | None = None,
    orderBy: Mapping[str, str] | None = None,
    filterBy: Mapping[str, Any] | None = None,
    states: list[str] | None = None,
    labels: list[str] | None = None,
) -> dict[str, Any]:
    filters = dict(filterBy or {})
    since = filters.pop("since", None)
    filter_states = filters.pop("states", None)
    filter_labels = filters.pop("labels", None)
    if filters.pop("viewerSubscribed", False):
        raise GitHubAPIError("test server: filterBy.viewerSubscribed is not supported")
    unsupported = sorted(k for k, v in filters.items() if v is not None)
    if unsupported:
        raise GitHubAPIError(f"test server: filterBy.{unsupported[0]} is not supported")
    since_time = parse_time(since) if since is not None else None

    def keep(node: Mapping[str, Any]) -> bool:
        if since_time is not None and parse_time(node["updatedAt"]) < since_time:
            return False
        for wanted in (states, filter_states):
            if wanted is not None and node["state"] not in wanted:
                return False
        for wanted in (labels, filter_labels):
            if wanted is not None and not _label_names(node) & set(wanted):
                return False
        return True

    _refuse(_info, repository, "issues")
    trick = _trick(_info, repository)
    return _connection(repository[_ISSUES], keep, orderBy, first, after, last, before, trick)


def _refuse(info: Any, repository: Mapping[str, Any], field: str) -> None:
    """GitHub's answer to a token without the permission for a surface: FORBIDDEN there."""
    if (repository["nameWithOwner"], field) in _server(info).refused_fields:
        raise GitHubAPIError(NOT_ACCESSIBLE, "FORBIDDEN")


def _resolve_pull_requests(
    repository: Mapping[str, Any],
    _info: Any,
    first: int | None = None,
    after: str | None = None,
    last: int | None = None,
    before: str | None = None,
    orderBy: Mapping[str, str] | None = None,
    states: list[str] | None = None,
    labels: list[str] | None = None,
    baseRefName: str | None = None,
    headRefName: str | None = None,
) -> dict[str, Any]:
    def keep(node: Mapping[str, Any]) -> bool:
        if states is not None and node["state"] not in states:
            return False
        if labels is not None and not _label_names(node) & set(labels):
            return False
        if baseRefName is not None and node["baseRefName"] != baseRefName:
            return False
        return headRefName is None or node["headRefName"] == headRefName

    _refuse(_info, repository, "pullRequests")
    trick = _trick(_info, repository)
    return _connection(repository[_PULLS], keep, orderBy, first, after, last, before, trick)


def _resolve_discussions(
    repository: Mapping[str, Any],
    _info: Any,
    first: int | None = None,
    after: str | None = None,
    last: int | None = None,
    before: str | None = None,
    orderBy: Mapping[str, str] | None = None,
    categoryId: str | None = None,
    answered: bool | None = None,
    states: list[str] | None = None,
) -> dict[str, Any]:
    def keep(node: Mapping[str, Any]) -> bool:
        if states and ("CLOSED" if node["closed"] else "OPEN") not in states:
            return False
        return answered is None or (node.get("answer") is not None) == answered

    _refuse(_info, repository, "discussions")
    trick = _trick(_info, repository)
    return _connection(repository[_DISCUSSIONS], keep, orderBy, first, after, last, before, trick)


def _resolve_releases(
    repository: Mapping[str, Any],
    _info: Any,
    first: int | None = None,
    after: str | None = None,
    last: int | None = None,
    before: str | None = None,
    orderBy: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    _refuse(_info, repository, "releases")
    trick = _trick(_info, repository)
    return _connection(
        repository[_RELEASES], lambda _node: True, orderBy, first, after, last, before, trick
    )


def _resolve_owner(_root: Any, info: Any, login: str) -> dict[str, Any] | None:
    server = _server(info)
    with server.lock:
        owned = [
            entry["repository"]
            for name, entry in server.repos.items()
            if name.split("/", 1)[0].lower() == login.lower()
        ]
    if not owned:
        return None
    return {
        "__typename": "Organization",
        "login": login,
        "id": _node_id("O_", login),
        _OWNED: owned,
    }


def _resolve_owner_repositories(
    owner: Mapping[str, Any],
    _info: Any,
    first: int | None = None,
    after: str | None = None,
    last: int | None = None,
    before: str | None = None,
    orderBy: Mapping[str, str] | None = None,
    isArchived: bool | None = None,
    isFork: bool | None = None,
    **_ignored: Any,
) -> dict[str, Any]:
    def keep(node: Mapping[str, Any]) -> bool:
        if isArchived is not None and node["isArchived"] != isArchived:
            return False
        return isFork is None or node["isFork"] == isFork

    selected = sorted(
        (node for node in owner[_OWNED] if keep(node)),
        key=lambda node: node["nameWithOwner"].lower(),
        reverse=(orderBy or {}).get("direction") == "DESC",
    )
    return _slice(selected, first, after, last, before, _trick(_info, owner))


def _resolve_node(_root: Any, info: Any, id: str) -> dict[str, Any] | None:
    found = _lookup(_server(info), _server(info).node_index(), id)
    if isinstance(found, Exception):
        raise found
    return found


def _resolve_nodes(_root: Any, info: Any, ids: list[str]) -> list[Any]:
    # An exception in the list becomes null at that index plus an error at ["nodes", N],
    # which is what GitHub answers for each id it cannot resolve.
    server = _server(info)
    index = server.node_index()
    return [_lookup(server, index, node_id) for node_id in ids]


def _lookup(server: GitHubServer, index: Mapping[str, Any], node_id: str) -> Any:
    if node_id in server.forbidden_ids:
        return GitHubAPIError(NOT_ACCESSIBLE, "FORBIDDEN")
    if node_id not in index:
        return GitHubAPIError(
            f"Could not resolve to a node with the global id of '{node_id}'", "NOT_FOUND"
        )
    return index[node_id]


def _upper_snake(name: str) -> str:
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()


def _resolve_field(source: Any, info: Any, **args: Any) -> Any:
    """The default resolver, plus paging for nested connections held as plain lists.

    A fixture may give a nested connection (an issue's ``comments``, a thread's
    ``comments``, ``timelineItems``...) as a list of nodes or as ``{"nodes": [...]}``;
    ``first``/``after``/``last``/``before`` and ``itemTypes`` then apply as on GitHub.
    """
    if isinstance(source, Mapping) and source.get("id"):
        failure = _server(info).broken_fields.get((source["id"], info.field_name))
        if failure is not None:
            raise GitHubAPIError(*failure)
    value = default_field_resolver(source, info, **args)
    named = get_named_type(info.return_type)
    if not (isinstance(named, GraphQLObjectType) and named.name.endswith("Connection")):
        return value
    if isinstance(value, Mapping) and "pageInfo" in value:
        return value
    if value is None:
        items: list[Any] = []
    elif isinstance(value, Mapping):
        if "nodes" not in value:
            return {
                "totalCount": value.get("totalCount", 0),
                "nodes": [],
                "edges": [],
                "pageInfo": _page_info(False, False, None, None),
            }
        items = list(value["nodes"])
    else:
        items = list(value)
    kinds = args.get("itemTypes")
    if kinds:
        items = [item for item in items if _upper_snake(item["__typename"]) in kinds]
    trick = _trick(info, source)
    return _slice(
        items, args.get("first"), args.get("after"), args.get("last"), args.get("before"), trick
    )


def _walk_nodes(value: Any, type_: Any, schema: GraphQLSchema, found: dict[str, Any]) -> None:
    """Index every object with an ``id`` below ``value``, typed by the schema."""
    named = get_named_type(type_)
    if isinstance(value, list):
        for item in value:
            _walk_nodes(item, type_, schema, found)
        return
    if not isinstance(value, Mapping):
        return
    if not isinstance(named, GraphQLObjectType):
        typename = value.get("__typename")
        named = schema.type_map.get(typename) if typename else None
        if not isinstance(named, GraphQLObjectType):
            return
    if named.name.endswith("Connection"):
        items = value.get("nodes", []) if isinstance(value, Mapping) else value
        _walk_nodes(items, named.fields["nodes"].type, schema, found)
        return
    if isinstance(value.get("id"), str):
        found[value["id"]] = {"__typename": named.name, **value}
    for key, child in value.items():
        field = named.fields.get(key)
        if field is not None and isinstance(child, (Mapping, list)):
            child_type = get_named_type(field.type)
            if isinstance(child, list) and child_type.name.endswith("Connection"):
                _walk_nodes(child, child_type.fields["nodes"].type, schema, found)
            else:
                _walk_nodes(child, field.type, schema, found)


_ORDER_KEYS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "CREATED_AT": lambda node: parse_time(node["createdAt"]),
    "UPDATED_AT": lambda node: parse_time(node["updatedAt"]),
    "COMMENTS": lambda node: node["comments"]["totalCount"],
    "NAME": lambda node: node["name"] or "",
}


def encode_cursor(offset: int) -> str:
    return base64.b64encode(f"cursor:v2:{offset}".encode()).decode()


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.b64decode(cursor.encode(), validate=True).decode()
        prefix, _, offset = text.rpartition(":")
        if prefix == "cursor:v2" and offset.isdigit():
            return int(offset)
    except (binascii.Error, UnicodeError):
        pass
    raise GitHubAPIError(f"`{cursor}` does not appear to be a valid cursor.", "INVALID_CURSOR")


def _connection(
    items: Iterable[Mapping[str, Any]],
    keep: Callable[[Mapping[str, Any]], bool],
    order_by: Mapping[str, str] | None,
    first: int | None,
    after: str | None,
    last: int | None,
    before: str | None,
    trick: str | None = None,
) -> dict[str, Any]:
    order = order_by or {"field": "CREATED_AT", "direction": "ASC"}
    by = _ORDER_KEYS[order["field"]]
    selected = sorted(
        (node for node in items if keep(node)),
        key=lambda node: (by(node), node.get("number") or node.get("tagName") or ""),
        reverse=order["direction"] == "DESC",
    )
    return _slice(selected, first, after, last, before, trick)


# Pages that never end, as a server may answer them (docs/github-behaviour.md, "Pages"):
# each kind keeps `hasNextPage` true for ever.
PAGING_TRICKS = ("repeat", "cycle", "empty", "endless")
_TRICK_CURSORS = 10**9  # the offsets of a trick's cursors: apart from any real listing's


def _trick(info: Any, source: Any) -> str | None:
    """The paging trick set for this connection: for `(source id, field)` or `field`."""
    tricks = _server(info).paging_tricks
    if not tricks:
        return None
    key = source.get("id") if isinstance(source, Mapping) else None
    return tricks.get((key, info.field_name)) or tricks.get(info.field_name)


def _tricked(selected: list[Any], size: int, after: str | None, trick: str) -> dict[str, Any]:
    """A page of `selected` under `trick`: "repeat" answers the first page and its cursor
    again and again; "cycle" goes A→B→A; "empty" gives empty pages, each with a new
    cursor; "endless" gives new copies of the items (new ids and numbers) on every page.
    `totalCount` stays the real count."""
    index = decode_cursor(after) - _TRICK_CURSORS + 1 if after is not None else 0
    index = max(index, 0)
    end = {"repeat": 0, "cycle": index % 2}.get(trick, index)
    if trick == "cycle":  # page B: the items of page A as new ones
        nodes = [_copied(node, end) for node in selected[:size]]
    elif trick == "empty":
        nodes = []
    elif trick == "endless":
        nodes = [_copied(node, index) for node in selected[:size]]
    else:
        nodes = selected[:size]
    cursor = encode_cursor(_TRICK_CURSORS + end)
    return {
        "totalCount": len(selected),
        "nodes": nodes,
        "edges": [{"cursor": cursor, "node": node} for node in nodes],
        "pageInfo": _page_info(True, index > 0, cursor if nodes else None, cursor),
    }


def _copied(node: Any, index: int) -> Any:
    """An item as new: another id, number and databaseId for each page `index`."""
    if not isinstance(node, Mapping) or index == 0:
        return node
    copy = dict(node)
    if isinstance(copy.get("id"), str):
        copy["id"] = f"{copy['id']}-{index}"
    for key, step in (("number", 10_000), ("databaseId", 100_000)):
        if isinstance(copy.get(key), int):
            copy[key] = copy[key] + step * index
    return copy


def _page_info(has_next: bool, has_previous: bool, start: str | None, end: str | None) -> dict:
    return {
        "hasNextPage": has_next,
        "hasPreviousPage": has_previous,
        "startCursor": start,
        "endCursor": end,
    }


def _slice(
    selected: list[Any],
    first: int | None,
    after: str | None,
    last: int | None,
    before: str | None,
    trick: str | None = None,
) -> dict[str, Any]:
    for argument, value in (("first", first), ("last", last)):
        if value is not None and value < 0:
            raise GitHubAPIError(f"`{argument}` cannot be negative")
    if trick is not None:
        return _tricked(selected, first or last or PAGE_LIMIT, after, trick)
    start, end = 0, len(selected)
    if after is not None:
        start = min(decode_cursor(after) + 1, end)
    if before is not None:
        end = max(min(decode_cursor(before), end), start)
    if first is not None:
        end = min(end, start + first)
    if last is not None:
        start = max(start, end - last)
    edges = [
        {"cursor": encode_cursor(offset), "node": selected[offset]} for offset in range(start, end)
    ]
    return {
        "totalCount": len(selected),
        "nodes": [edge["node"] for edge in edges],
        "edges": edges,
        "pageInfo": _page_info(
            end < len(selected),
            start > 0,
            edges[0]["cursor"] if edges else None,
            edges[-1]["cursor"] if edges else None,
        ),
    }


# ------------------------------------------------------------------ fixture builders

_EPOCH = datetime(2015, 1, 1, tzinfo=UTC)


def _node_id(prefix: str, key: str) -> str:
    return prefix + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def repository_node(name_with_owner: str = "octo/hello", **fields: Any) -> dict[str, Any]:
    """A repository as repository.graphql selects it; keyword args override fields."""
    node = {
        "id": _node_id("R_", name_with_owner),
        "nameWithOwner": name_with_owner,
        "description": None,
        "url": f"https://github.com/{name_with_owner}",
        "isPrivate": False,
        "isArchived": False,
        "isFork": False,
        "hasIssuesEnabled": True,
        "hasDiscussionsEnabled": True,
        "createdAt": format_time(_EPOCH),
        "updatedAt": format_time(_EPOCH),
        "pushedAt": format_time(_EPOCH),
        "defaultBranchRef": {"name": "main"},
    }
    node.update(fields)
    return node


def _item_node(kind: str, number: int, repo: str) -> dict[str, Any]:
    created = format_time(_EPOCH + timedelta(hours=number))
    return {
        "id": _node_id("I_" if kind == "issues" else "PR_", f"{repo}#{number}"),
        "number": number,
        "title": f"{'Issue' if kind == 'issues' else 'Pull request'} {number}",
        "body": "",
        "url": f"https://github.com/{repo}/{kind}/{number}",
        "state": "OPEN",
        "locked": False,
        "author": {"__typename": "User", "login": "octocat"},
        "authorAssociation": "CONTRIBUTOR",
        "createdAt": created,
        "updatedAt": created,
        "closedAt": None,
        "milestone": None,
        "labels": {"nodes": []},
        "assignees": {"nodes": []},
        "comments": [],
        "timelineItems": [],
        "reactions": {"totalCount": 0},
    }


def issue_node(number: int, repo: str = "octo/hello", **fields: Any) -> dict[str, Any]:
    """An issue as issues.graphql selects it; keyword args (GraphQL names) override fields."""
    node = _item_node("issues", number, repo)
    node.update(stateReason=None, parent=None)
    node.update(fields)
    return node


def pull_request_node(number: int, repo: str = "octo/hello", **fields: Any) -> dict[str, Any]:
    """A pull request as pull_requests.graphql selects it; keyword args override fields."""
    node = _item_node("pull", number, repo)
    node.update(
        isDraft=False,
        merged=False,
        mergedAt=None,
        baseRefName="main",
        headRefName=f"feature-{number}",
        additions=1,
        deletions=0,
        changedFiles=1,
        mergeCommit=None,
        reviews=[],
        reviewThreads=[],
        closingIssuesReferences=[],
        commits=[],
    )
    node.update(fields)
    return node


_CONNECTION_KEYS = {
    "comments",
    "timelineItems",
    "reviews",
    "reviewThreads",
    "closingIssuesReferences",
    "commits",
    "replies",
}


def as_response(node: Any) -> Any:
    """A fixture node as the API returns it: nested connections held as plain lists
    become ``{"totalCount", "pageInfo", "nodes"}``, complete (no next page)."""
    if isinstance(node, list):
        return [as_response(item) for item in node]
    if not isinstance(node, dict):
        return node
    shaped = {}
    for key, value in node.items():
        if key in _CONNECTION_KEYS and isinstance(value, list):
            shaped[key] = {
                "totalCount": len(value),
                "pageInfo": {"hasNextPage": False, "endCursor": None},
                "nodes": as_response(value),
            }
        else:
            shaped[key] = as_response(value)
    return shaped


def _at(hours: float) -> str:
    return format_time(_EPOCH + timedelta(hours=hours))


def _person(login: str, typename: str = "User") -> dict[str, Any]:
    return {"__typename": typename, "login": login}


def _authored(
    prefix: str,
    database_id: int,
    url: str,
    body: str,
    author: str = "octocat",
    association: str = "CONTRIBUTOR",
) -> dict[str, Any]:
    """The fields every comment-like node has: identity, text, author and times."""
    return {
        "id": _node_id(prefix, str(database_id)),
        "databaseId": database_id,
        "url": url,
        "body": body,
        "author": _person(author),
        "authorAssociation": association,
        "createdAt": _at(database_id),
        "updatedAt": _at(database_id),
    }


def comment_node(database_id: int, body: str = "", **fields: Any) -> dict[str, Any]:
    """An issue or pull request comment (fragment CommentFields)."""
    url = f"https://github.com/octo/hello/issues/1#issuecomment-{database_id}"
    node = _authored("IC_", database_id, url, body)
    node.update(isMinimized=False, reactions={"totalCount": 0})
    node.update(fields)
    return node


def serve_tiny_repo(github: GitHubServer, repo: str = "octo/hello") -> None:
    """Three issues of `repo`, each with one comment: the repository the workflow tests index."""
    github.add_repo(
        repo,
        issues=[
            issue_node(
                n,
                repo=repo,
                title=f"Greeting {n} is rude",
                body=f"Greeting number {n} of {repo} sounds rude.",
                updatedAt=f"2024-01-0{n}T00:00:00Z",
                comments=[comment_node(n * 10, body=f"Confirmed: greeting {n} needs work.")],
            )
            for n in (1, 2, 3)
        ],
    )


def review_node(database_id: int, state: str = "COMMENTED", **fields: Any) -> dict[str, Any]:
    """A pull request review (fragment ReviewPage)."""
    url = f"https://github.com/octo/hello/pull/2#pullrequestreview-{database_id}"
    node = _authored("PRR_", database_id, url, "", "reviewer", "MEMBER")
    node.update(state=state, submittedAt=_at(database_id), commit={"oid": "a" * 40})
    node.update(fields)
    return node


def review_comment_node(database_id: int, body: str = "", **fields: Any) -> dict[str, Any]:
    """A comment on a line of a pull request's diff (fragment ReviewCommentPage)."""
    url = f"https://github.com/octo/hello/pull/2#discussion_r{database_id}"
    node = _authored("PRRC_", database_id, url, body, "reviewer", "MEMBER")
    node |= {
        "path": "src/app.py",
        "line": 10,
        "originalLine": 10,
        "startLine": None,
        "diffHunk": "@@ -1,3 +1,4 @@\n+import os",
        "commit": {"oid": "b" * 40},
        "originalCommit": {"oid": "b" * 40},
        "replyTo": None,
        "pullRequestReview": None,
        "reactions": {"totalCount": 0},
    }
    node.update(fields)
    return node


def thread_node(thread_id: str, comments: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A review thread (fragment ReviewThreadPage) holding `comments`."""
    node = {
        "id": _node_id("PRRT_", thread_id),
        "path": "src/app.py",
        "isResolved": False,
        "isOutdated": False,
        "resolvedBy": None,
        "comments": comments,
    }
    node.update(fields)
    return node


def discussion_node(number: int, repo: str = "octo/hello", **fields: Any) -> dict[str, Any]:
    """A discussion as discussions.graphql selects it."""
    created = _at(number)
    node = {
        "id": _node_id("D_", f"{repo}#{number}"),
        "number": number,
        "title": f"Discussion {number}",
        "body": "",
        "url": f"https://github.com/{repo}/discussions/{number}",
        "closed": False,
        "closedAt": None,
        "stateReason": None,
        "locked": False,
        "author": _person("octocat"),
        "authorAssociation": "CONTRIBUTOR",
        "createdAt": created,
        "updatedAt": created,
        "upvoteCount": 0,
        "category": {"name": "Q&A", "isAnswerable": True},
        "answer": None,
        "answerChosenAt": None,
        "answerChosenBy": None,
        "labels": {"nodes": []},
        "reactions": {"totalCount": 0},
        "comments": [],
    }
    node.update(fields)
    return node


def discussion_comment_node(database_id: int, body: str = "", **fields: Any) -> dict[str, Any]:
    """A discussion comment or reply (fragment DiscussionCommentFields)."""
    url = f"https://github.com/octo/hello/discussions/1#discussioncomment-{database_id}"
    node = _authored("DC_", database_id, url, body)
    node |= {
        "isAnswer": False,
        "isMinimized": False,
        "reactions": {"totalCount": 0},
        "replies": [],
        "replyTo": None,
    }
    node.update(fields)
    return node


def release_node(tag: str, repo: str = "octo/hello", **fields: Any) -> dict[str, Any]:
    """A release as releases.graphql selects it."""
    node = {
        "id": _node_id("RE_", f"{repo}@{tag}"),
        "databaseId": zlib.crc32(tag.encode()),
        "tagName": tag,
        "name": tag,
        "description": "",
        "url": f"https://github.com/{repo}/releases/tag/{tag}",
        "isDraft": False,
        "isPrerelease": False,
        "isLatest": False,
        "author": {"login": "octocat"},
        "tagCommit": {"oid": "c" * 40},
        "createdAt": _at(1),
        "publishedAt": _at(1),
        "updatedAt": _at(1),
    }
    node.update(fields)
    return node


def ref(repo: str, number: int, typename: str = "Issue") -> dict[str, Any]:
    """A reference to an issue or pull request, as timeline events and links carry it."""
    return {"__typename": typename, "number": number, "repository": {"nameWithOwner": repo}}


def event(typename: str, hours: float = 1, **fields: Any) -> dict[str, Any]:
    """A timeline event (CrossReferencedEvent, ClosedEvent, ...) with `fields`."""
    return {"__typename": typename, "createdAt": _at(hours), **fields}


def _rename_references(value: Any, old: str, new: str) -> None:
    """Every `{"nameWithOwner": old}` below `value` now says `new`, as GitHub answers."""
    if isinstance(value, dict):
        if value.get("nameWithOwner") == old:
            value["nameWithOwner"] = new
        for child in value.values():
            _rename_references(child, old, new)
    elif isinstance(value, list):
        for child in value:
            _rename_references(child, old, new)


# --------------------------------------------------------------------------- server


@dataclass
class _Fault:
    status: int | None  # None: answer as usual, then apply `edit` and `delay`
    body: bytes | Callable[[Mapping[str, str]], Any]  # a callable gets the request headers
    content_type: str
    headers: dict[str, str]
    remaining: int
    skip: int
    delay: float = 0.0
    edit: Callable[[dict[str, Any]], None] | None = None
    trickle: float = 0.0


@dataclass
class _Response:
    status: int
    body: bytes = b""
    content_type: str = _JSON
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to sit on the answer before sending it
    trickle: float = 0.0  # seconds between the body's bytes: a server that trickles


def _json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> _Response:
    return _Response(status, json.dumps(payload).encode(), _JSON, dict(headers or {}))


def _default_fault_body(status: int) -> tuple[bytes, str]:
    if status in (502, 503, 504):
        phrase = HTTPStatus(status).phrase
        html = (
            "<html><head><title>Unicorn! &middot; GitHub</title></head><body>"
            f"<h1>{status} {phrase}</h1><p>No server is currently available to service "
            "your request. Sorry about that.</p></body></html>"
        )
        return html.encode(), "text/html; charset=utf-8"
    if status in (403, 429):
        message = (
            "You have exceeded a secondary rate limit. Please wait a few minutes before "
            "you try again."
        )
    else:
        try:
            message = HTTPStatus(status).phrase
        except ValueError:
            message = "Error"
    return json.dumps({"message": message, "documentation_url": DOCS_URL}).encode(), _JSON


def _encode_body(status: int, body: Any) -> tuple[bytes, str]:
    if body is None:
        return _default_fault_body(status)
    if isinstance(body, (Mapping, list)):
        return json.dumps(body).encode(), _JSON
    raw = body.encode() if isinstance(body, str) else body
    return raw, _JSON if raw.lstrip()[:1] in (b"{", b"[") else "text/plain"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    app: GitHubServer


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def version_string(self) -> str:
        return "GitHub.com"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        response = self.server.app._handle(self.path, dict(self.headers), raw)
        if response.delay:
            time.sleep(response.delay)
        self._send(response)

    def do_GET(self) -> None:
        self._send(_json_response(404, {"message": "Not Found", "documentation_url": DOCS_URL}))

    def _send(self, response: _Response) -> None:
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if response.trickle:
                for i in range(len(response.body)):
                    self.wfile.write(response.body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(response.trickle)
            else:
                self.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (a slow_requests timeout test)


class GitHubServer:
    """GitHub's GraphQL endpoint on 127.0.0.1, serving ``repos``; use as a context manager.

    ``repos`` maps "owner/name" to ``{"repository": {...}, "issues": [...],
    "pullRequests": [...]}``. ``requests`` logs every POST as
    ``{"operation", "variables", "status"}``. ``rate_limit`` is what ``rateLimit``
    returns (and feeds the x-ratelimit-* headers). Like GitHub, the server answers
    ``RATE_LIMITED`` (HTTP ``rate_limited_status``) while ``remaining`` is below
    ``cost``, and refills ``remaining`` once ``resetAt`` has passed; with
    ``spend_rate_limit`` every executed query spends ``cost`` points. ``path`` is where
    it listens (GitHub Enterprise Server uses ``/api/graphql``). Requests are handled
    one at a time under ``lock``; hold it to change ``repos`` while a client may be
    running.
    """

    def __init__(self, token: str = DEFAULT_TOKEN, *, path: str = "/graphql") -> None:
        self.token = token
        self.path = path
        self.spend_rate_limit = False
        self.rate_limited_status = 200
        self.repos: dict[str, dict[str, Any]] = {}
        # GitHub's behaviours, switched on per test (docs/github-behaviour.md):
        self.renames: dict[str, str] = {}  # old "owner/name" -> current, followed on lookup
        self.forbidden_ids: set[str] = set()  # node ids this token may not read
        self.refused_fields: set[tuple[str, str]] = set()  # (repo, "discussions"): FORBIDDEN
        self.broken_fields: dict[tuple[str, str], tuple[str, str | None]] = {}
        # ^ (node id, field) -> (message, type): that field fails, the rest of the answer stands
        self.timeout_above_nodes: int | None = None  # heavier queries time out...
        self.timeout_status = 502  # ...answered with this status (older GitHub: 200)
        self.resource_limit_above_nodes: int | None = None  # RESOURCE_LIMITS_EXCEEDED
        self.request_limit: int | None = None  # past it, HTTP 400: a fetch that never ends
        self.paging_tricks: dict[Any, str] = {}
        # ^ field ("comments"), or (id of the node holding it, field) -> one of
        # PAGING_TRICKS: that connection's pages never end (`_tricked` says how)
        self.requests: list[dict[str, Any]] = []
        reset = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
        self.rate_limit: dict[str, Any] = {
            "cost": 1,
            "limit": 5000,
            "remaining": 4999,
            "used": 1,
            "resetAt": format_time(reset),
            "nodeCount": 1,
        }
        self.lock = threading.RLock()
        self._faults: deque[_Fault] = deque()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.schema = load_schema()

    # -- lifecycle

    def start(self) -> GitHubServer:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.app = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="github-graphql-test-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> GitHubServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{self.path}"

    # -- fixtures

    def add_repo(
        self,
        name_with_owner: str,
        *,
        issues: Iterable[dict[str, Any]] = (),
        pull_requests: Iterable[dict[str, Any]] = (),
        discussions: Iterable[dict[str, Any]] = (),
        releases: Iterable[dict[str, Any]] = (),
        **repository_fields: Any,
    ) -> dict[str, Any]:
        """Register a repository (defaults from ``repository_node``) and return its entry."""
        entry = {
            "repository": repository_node(name_with_owner, **repository_fields),
            "issues": list(issues),
            "pullRequests": list(pull_requests),
            "discussions": list(discussions),
            "releases": list(releases),
        }
        with self.lock:
            self.repos[name_with_owner] = entry
        return entry

    def node_index(self) -> dict[str, dict[str, Any]]:
        """Every object with an id in ``repos``, by id, with its ``__typename``."""
        found: dict[str, Any] = {}
        types = self.schema.type_map
        with self.lock:
            for entry in self.repos.values():
                _walk_nodes(entry.get("repository"), types["Repository"], self.schema, found)
                for key, typename in (
                    ("issues", "Issue"),
                    ("pullRequests", "PullRequest"),
                    ("discussions", "Discussion"),
                    ("releases", "Release"),
                ):
                    # an item knows its repository, as on GitHub
                    owned = [
                        {"repository": entry.get("repository"), **item}
                        for item in entry.get(key, [])
                    ]
                    _walk_nodes(owned, types[typename], self.schema, found)
        return found

    def find_repo(
        self, owner: str, name: str, follow_renames: bool = True
    ) -> dict[str, Any] | None:
        wanted = f"{owner}/{name}".lower()
        for key, entry in self.repos.items():
            if key.lower() == wanted:
                return entry
        renamed = {old.lower(): new for old, new in self.renames.items()}
        if follow_renames and wanted in renamed:
            return self.find_repo(*renamed[wanted].split("/", 1), follow_renames=False)
        return None

    def rename_repo(self, old: str, new: str) -> None:
        """Rename (or transfer) a repository as GitHub does: same node id, new name and
        URLs, and the old name still answers with the repository under its new name."""
        with self.lock:
            entry = self.repos.pop(old)
            entry["repository"].update(nameWithOwner=new, url=f"https://github.com/{new}")
            for kind in ("issues", "pullRequests"):
                for item in entry[kind]:
                    item["url"] = item["url"].replace(f"/{old}/", f"/{new}/")
            self.repos[new] = entry
            self.renames[old] = new
            _rename_references(self.repos, old, new)

    # -- fault injection (faults fire in the order they were queued)

    def fail_requests(
        self,
        n: int = 1,
        status: int = 502,
        body: str | bytes | Mapping[str, Any] | list[Any] | Callable[..., Any] | None = None,
        after: int = 0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer the next ``n`` requests, after letting ``after`` through, with ``status``.

        ``body`` defaults to GitHub-like text for the status (an HTML page for 502-504, a
        JSON ``message`` otherwise); a dict/list is sent as JSON, str/bytes as-is. A
        callable is called with the request's headers and its result sent the same way
        (a server that echoes what it was sent).
        """
        if callable(body):
            raw: bytes | Callable[..., Any] = body
            content_type = _JSON
        else:
            raw, content_type = _encode_body(status, body)
        with self.lock:
            self._faults.append(_Fault(status, raw, content_type, dict(headers or {}), n, after))

    def clear_faults(self) -> None:
        """Forget every queued fault: answer normally from now on."""
        with self.lock:
            self._faults.clear()

    def slow_requests(self, n: int = 1, seconds: float = 1.0, after: int = 0) -> None:
        """Answer the next ``n`` requests (after ``after``) as usual, but ``seconds`` late."""
        with self.lock:
            self._faults.append(_Fault(None, b"", _JSON, {}, n, after, delay=seconds))

    def trickle_requests(self, n: int = 1, seconds: float = 1.0, after: int = 0) -> None:
        """Answer the next ``n`` requests (after ``after``) as usual, one byte of the body
        every ``seconds``: a server (or proxy) that never times a read out."""
        with self.lock:
            self._faults.append(_Fault(None, b"", _JSON, {}, n, after, trickle=seconds))

    def partial_errors_next(
        self,
        message: str,
        path: list[str | int],
        type: str | None = None,
        after: int = 0,
    ) -> None:
        """Answer the next request (after ``after``) as usual, except that the value at
        ``path`` in ``data`` is null and ``errors`` says why: GitHub's partial result."""

        def edit(body: dict[str, Any]) -> None:
            parent = body.get("data")
            for key in path[:-1]:
                parent = parent[key] if parent is not None else None
            if parent is not None:
                parent[path[-1]] = None
            error: dict[str, Any] = {"message": message, "path": list(path), "locations": []}
            if type is not None:
                error["type"] = type
            body.setdefault("errors", []).append(error)

        with self.lock:
            self._faults.append(_Fault(None, b"", _JSON, {}, 1, after, edit=edit))

    def edit_next(self, edit: Callable[[dict[str, Any]], None], after: int = 0, n: int = 1) -> None:
        """Answer the next ``n`` requests (after ``after``) as usual, then let ``edit``
        change each JSON body in place: an answer of any shape GitHub might give."""
        with self.lock:
            self._faults.append(_Fault(None, b"", _JSON, {}, n, after, edit=edit))

    def graphql_error_next(self, message: str, type: str | None = None, after: int = 0) -> None:
        """Answer the next request (after letting ``after`` through) with HTTP 200 and
        ``{"data": null, "errors": [...]}``."""
        error: dict[str, Any] = {"message": message}
        if type is not None:
            error["type"] = type
        body = json.dumps({"data": None, "errors": [error]}).encode()
        with self.lock:
            self._faults.append(_Fault(200, body, _JSON, self._rate_limit_headers(), 1, after))

    # -- request handling

    def _take_fault(self) -> _Fault | None:
        if not self._faults:
            return None
        fault = self._faults[0]
        if fault.skip > 0:
            fault.skip -= 1
            return None
        fault.remaining -= 1
        if fault.remaining <= 0:
            self._faults.popleft()
        return fault

    def _authorized(self, header: str | None) -> bool:
        scheme, _, credential = (header or "").strip().partition(" ")
        return scheme.lower() in ("bearer", "token") and credential.strip() == self.token

    def _rate_limit_headers(self) -> dict[str, str]:
        limit = self.rate_limit
        return {
            "X-RateLimit-Limit": str(limit["limit"]),
            "X-RateLimit-Remaining": str(limit["remaining"]),
            "X-RateLimit-Used": str(limit["used"]),
            "X-RateLimit-Reset": str(int(parse_time(limit["resetAt"]).timestamp())),
            "X-RateLimit-Resource": "graphql",
        }

    def _fault_response(self, fault: _Fault, headers: Mapping[str, str]) -> _Response:
        assert fault.status is not None
        if callable(fault.body):
            raw, content_type = _encode_body(fault.status, fault.body(headers))
        else:
            raw, content_type = fault.body, fault.content_type
        return _Response(fault.status, raw, content_type, fault.headers)

    def _spend_rate_limit(self) -> bool:
        """Refill after the reset, then spend one query's cost; False when out of points."""
        limit = self.rate_limit
        now = datetime.now(UTC)
        if parse_time(limit["resetAt"]) <= now:
            limit["remaining"] = limit["limit"]
            limit["used"] = 0
            limit["resetAt"] = format_time(now.replace(microsecond=0) + timedelta(hours=1))
        if limit["remaining"] < limit["cost"]:
            return False
        if self.spend_rate_limit:
            limit["remaining"] -= limit["cost"]
            limit["used"] += limit["cost"]
        return True

    def _handle(self, path: str, headers: Mapping[str, str], raw: bytes) -> _Response:
        authorization = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            payload = None
        query = payload.get("query") if payload else None
        variables = payload.get("variables") if payload else None
        operation = payload.get("operationName") if payload else None
        document: DocumentNode | GraphQLError | None = None
        if isinstance(query, str):
            try:
                document = parse_document(query)
            except GraphQLError as error:
                document = error
        if operation is None and isinstance(document, DocumentNode):
            names = [
                d.name.value if d.name else None
                for d in document.definitions
                if isinstance(d, OperationDefinitionNode)
            ]
            operation = names[0] if len(names) == 1 else None

        with self.lock:
            fault = self._take_fault()
            if self.request_limit is not None and len(self.requests) >= self.request_limit:
                message = f"test server: more than {self.request_limit} requests"
                response = _json_response(400, {"message": message})
            elif fault is not None and fault.status is not None:
                response = self._fault_response(fault, headers)
            elif path.split("?", 1)[0].rstrip("/") != self.path.rstrip("/"):
                response = _json_response(
                    404, {"message": "Not Found", "documentation_url": DOCS_URL}
                )
            elif not self._authorized(authorization):
                response = _json_response(
                    401,
                    {"message": "Bad credentials", "documentation_url": DOCS_URL, "status": "401"},
                )
            elif payload is None:
                response = _json_response(
                    400, {"message": "Problems parsing JSON", "documentation_url": DOCS_URL}
                )
            elif not self._spend_rate_limit():
                response = _json_response(
                    self.rate_limited_status,
                    {
                        "errors": [
                            {
                                "type": "RATE_LIMITED",
                                "code": "graphql_rate_limit",
                                "message": "API rate limit exceeded for user ID 1.",
                            }
                        ]
                    },
                    self._rate_limit_headers(),
                )
            else:
                body = self._execute(document, variables, operation)
                status = body.pop(_STATUS, 200)
                if fault is not None and fault.edit is not None:
                    fault.edit(body)
                response = _json_response(status, body, self._rate_limit_headers())
            if fault is not None:
                response.delay = fault.delay
                response.trickle = fault.trickle
            self.requests.append(
                {
                    "operation": operation,
                    "variables": dict(variables) if isinstance(variables, dict) else {},
                    "status": response.status,
                }
            )
        return response

    def _execute(
        self,
        document: DocumentNode | GraphQLError | None,
        variables: Any,
        operation: str | None,
    ) -> dict[str, Any]:
        if document is None:
            message = "A query attribute must be specified and must be a string."
            return {"errors": [{"message": message}]}
        if isinstance(document, GraphQLError):
            return {"errors": [document.formatted]}
        if variables is None:
            variables = {}
        if not isinstance(variables, dict):
            return {"errors": [{"message": "Variables are invalid JSON."}]}
        errors = validate_document(self.schema, document)
        if errors:
            return {"errors": [error.formatted for error in errors]}
        problems = _pagination_problems(self.schema, document, variables)
        if problems:
            return {"errors": [problem.as_error() for problem in problems]}
        nodes = node_count(document, variables)
        if nodes > NODE_LIMIT:
            message = (
                f"This query requests up to {nodes:,} possible nodes which exceeds the "
                f"maximum limit of {NODE_LIMIT:,}."
            )
            return {"errors": [{"type": "MAX_NODE_LIMIT_EXCEEDED", "message": message}]}
        if self.timeout_above_nodes is not None and nodes > self.timeout_above_nodes:
            return {
                "data": None,
                "errors": [{"message": TIMEOUT_MESSAGE}],
                _STATUS: self.timeout_status,
            }
        if self.resource_limit_above_nodes is not None and nodes > self.resource_limit_above_nodes:
            message = "Resource limits for this query exceeded. Please reduce the query's scope."
            return {
                "data": None,
                "errors": [{"type": "RESOURCE_LIMITS_EXCEEDED", "message": message}],
            }
        result = execute_sync(
            self.schema,
            document,
            context_value=self,
            variable_values=variables,
            operation_name=operation,
            field_resolver=_resolve_field,
        )
        body: dict[str, Any] = {}
        ran = result.data is not None or any(e.path for e in result.errors or ())
        if ran:
            body["data"] = result.data
        if result.errors:
            body["errors"] = [_format_error(error) for error in result.errors]
        return body


def _format_error(error: GraphQLError) -> dict[str, Any]:
    formatted = dict(error.formatted)
    original = error.original_error
    if isinstance(original, GitHubAPIError):
        if original.type:
            formatted["type"] = original.type
        if original.type == "FORBIDDEN":
            formatted["extensions"] = {"saml_failure": False}
    elif isinstance(original, KeyError):
        # A resolver read a fixture node that lacks a key the query needs.
        formatted["message"] = f"test server: fixture node has no key {original}"
    elif original is not None:
        # Most likely a fixture problem (e.g. null in a non-null field): flag it as ours.
        formatted["message"] = f"test server: {original}"
    return formatted
