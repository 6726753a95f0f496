"""The bundled sample (src/ghindex/sample/github3py.jsonl) is exactly what ghindex's
queries return for its repositories.

Every repository of the sample is served by the local GitHub API (testkit/github_server.py)
and read back with the real query documents, every connection paged to its end (the
nested ones through the node queries, as the fetcher does). The result must equal the
sample, apart from where the pages were cut. GraphQL returns exactly the fields a query
selects, with the schema's types, so equality also proves that every sample node has the
selected fields, no more and no fewer, and that every totalCount matches its nodes.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from importlib import resources
from typing import Any

import pytest
from graphql import (
    REMOVE,
    ArgumentNode,
    DocumentNode,
    FieldNode,
    GraphQLObjectType,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    VariableDefinitionNode,
    Visitor,
    get_named_type,
    print_ast,
    visit,
)

from ghindex.github.graphql import load_query, query_names
from testkit.github_server import GitHubServer

# Line key -> (query document, connection field of `repository` it pages).
LISTS = {
    "issues": ("issues", "issues"),
    "pullRequests": ("pull_requests", "pullRequests"),
    "discussions": ("discussions", "discussions"),
    "releases": ("releases", "releases"),
}
COMPLETE = {"hasNextPage": False, "endCursor": None}
# Nested connections whose nodes hold connections of their own.
CHILD_TYPES = {
    ("PullRequest", "reviewThreads"): "PullRequestReviewThread",
    ("Discussion", "comments"): "DiscussionComment",
}


def sample() -> list[dict[str, Any]]:
    text = (resources.files("ghindex") / "sample" / "github3py.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def node_queries() -> dict[tuple[str, str], str]:
    """(type, connection field) -> the query that pages it from `node(id:)`."""
    found = {}
    for name in query_names():
        operation = next(
            d for d in load_query(name).definitions if isinstance(d, OperationDefinitionNode)
        )
        for root in operation.selection_set.selections:
            if not (isinstance(root, FieldNode) and root.name.value == "node"):
                continue
            for fragment in root.selection_set.selections:
                assert isinstance(fragment, InlineFragmentNode)
                for field in fragment.selection_set.selections:
                    found[(fragment.type_condition.name.value, field.name.value)] = name
    return found


def with_page_sizes(document: DocumentNode, sizes: dict[str, int]) -> DocumentNode:
    """`document` with `first: sizes[name]` on every connection field `name` in `sizes`."""

    class Shrink(Visitor):
        def enter_variable_definition(self, node: VariableDefinitionNode, *_: Any) -> Any:
            # `$first` is replaced by the literal sizes below
            return REMOVE if node.variable.name.value == "first" else None

        def enter_field(self, node: FieldNode, *_: Any) -> FieldNode | None:
            size = sizes.get(node.name.value)
            if size is None:
                return None
            arguments = tuple(
                ArgumentNode(name=a.name, value=IntValueNode(value=str(size)))
                if a.name.value == "first"
                else a
                for a in node.arguments or ()
            )
            return FieldNode(
                alias=node.alias,
                name=node.name,
                arguments=arguments,
                directives=node.directives,
                selection_set=node.selection_set,
            )

    return visit(document, Shrink())


def served(value: Any) -> Any:
    """A sample value as a test-server fixture: nested connections become plain
    {"nodes": [...]}, which the server pages by `first`/`after` like GitHub."""
    if isinstance(value, dict):
        if set(value) == {"totalCount", "pageInfo", "nodes"}:
            return {"nodes": [served(n) for n in value["nodes"]]}
        return {k: served(v) for k, v in value.items()}
    if isinstance(value, list):
        return [served(v) for v in value]
    return value


class Reader:
    """Reads whole repositories from the test server, following every page.

    With `page_size`, every connection that has a query to page it asks for pages of that
    size (the top-level lists for pages of ten), so that paging runs everywhere.
    """

    def __init__(self, server: GitHubServer, page_size: int | None = None) -> None:
        self.server = server
        self.schema = server.schema
        self.paging = node_queries()
        sizes = {field: page_size for _, field in self.paging}
        sizes.update({field: 10 for _, field in LISTS.values()})
        self.sources = {}
        for name in query_names():
            document = load_query(name)
            if page_size is not None:
                document = with_page_sizes(document, sizes)
            self.sources[name] = print_ast(document)
        self.requests: Counter[str] = Counter()

    def post(self, name: str, variables: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps({"query": self.sources[name], "variables": variables}).encode()
        request = urllib.request.Request(
            self.server.url,
            body,
            headers={
                "Authorization": f"bearer {self.server.token}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            payload = json.load(response)
        self.requests[name] += 1
        assert "errors" not in payload, (name, variables, payload["errors"])
        return payload["data"]

    def repository(self, name_with_owner: str) -> dict[str, Any]:
        owner, name = name_with_owner.split("/")
        record = {"repository": self.post("repository", {"owner": owner, "name": name})}
        record["repository"] = record["repository"]["repository"]
        repository_type = self.schema.type_map["Repository"]
        for key, (query, field) in LISTS.items():
            nodes: list[dict[str, Any]] = []
            after = None
            while True:
                variables = {"owner": owner, "name": name, "after": after}
                page = self.post(query, variables)["repository"][field]
                nodes += page["nodes"]
                if not page["pageInfo"]["hasNextPage"]:
                    break
                after = page["pageInfo"]["endCursor"]
            connection = get_named_type(repository_type.fields[field].type)
            item_type = get_named_type(connection.fields["nodes"].type)
            for node in nodes:
                self.complete(node, item_type)
            record[key] = nodes
        return record

    def complete(self, value: dict[str, Any], type_: GraphQLObjectType) -> None:
        """Fetch the remaining pages of every connection inside `value`, in place."""
        for key, child in value.items():
            field = type_.fields[key]
            named = get_named_type(field.type)
            if not isinstance(named, GraphQLObjectType) or not isinstance(child, dict):
                continue
            if "pageInfo" not in child:
                self.complete(child, named)
                continue
            while child["pageInfo"]["hasNextPage"]:
                query = self.paging[(type_.name, key)]
                variables = {"id": value["id"], "after": child["pageInfo"]["endCursor"]}
                page = self.post(query, variables)["node"][key]
                assert page["totalCount"] == child["totalCount"]
                child["nodes"] += page["nodes"]
                child["pageInfo"] = page["pageInfo"]
            assert child["totalCount"] == len(child["nodes"])
            child["pageInfo"] = dict(COMPLETE)
            item_type = get_named_type(named.fields["nodes"].type)
            if isinstance(item_type, GraphQLObjectType):
                for node in child["nodes"]:
                    self.complete(node, item_type)


def longest(records: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """(type, connection field) -> the most nodes any such connection in `records` has."""
    found: Counter[tuple[str, str]] = Counter()
    paged = node_queries()

    def walk(value: Any, typename: str) -> None:
        for key, child in value.items():
            if (typename, key) in paged:
                found[(typename, key)] = max(found[(typename, key)], child["totalCount"])
                item_type = CHILD_TYPES.get((typename, key))
                for node in child["nodes"] if item_type else ():
                    walk(node, item_type)

    for record in records:
        for key, typename in (("issues", "Issue"), ("pullRequests", "PullRequest")):
            for node in record[key]:
                walk(node, typename)
    return found


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: only in {'sample' if key in b else 'response'}"
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items in the response, {len(b)} in the sample"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b and type(a) is type(b) else f"{path}: {a!r} != {b!r}"


@pytest.fixture(scope="module")
def records():
    return sample()


@pytest.fixture(scope="module")
def server(records):
    with GitHubServer() as running:
        for record in records:
            running.repos[record["repository"]["nameWithOwner"]] = served(record)
        yield running


def test_the_sample_has_every_surface(records):
    assert len(records) >= 10
    for record in records:
        assert set(record) == {"repository", *LISTS}
    items = [i for r in records for i in r["issues"] + r["pullRequests"]]
    pulls = [p for r in records for p in r["pullRequests"]]
    assert sum(i["comments"]["totalCount"] for i in items) > 100
    assert sum(p["reviews"]["totalCount"] for p in pulls) > 0
    assert sum(p["reviewThreads"]["totalCount"] for p in pulls) > 0
    assert sum(i["timelineItems"]["totalCount"] for i in items) > 0
    assert sum(len(r["releases"]) for r in records) > 0


def test_ids_are_unique(records):
    ids: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("id"), str):
                ids.append(value["id"])
            for child in value.values():
                collect(child)
        elif isinstance(value, list):
            for child in value:
                collect(child)

    collect(records)
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("page_size", [None, 2], ids=["query-page-sizes", "pages-of-2"])
@pytest.mark.slow
def test_reading_the_sample_back_through_the_queries_gives_the_sample(server, records, page_size):
    reader = Reader(server, page_size)
    for record in records:
        name = record["repository"]["nameWithOwner"]
        read = reader.repository(name)
        for key in LISTS:
            by_id = {node["id"]: node for node in read[key]}
            assert len(by_id) == len(read[key]) == len(record[key]), (name, key)
            read[key] = [by_id[node["id"]] for node in record[key]]
        difference = first_difference(read, record, name)
        assert difference is None, difference
    if page_size is not None:  # the paging ran wherever a connection is longer than a page
        most = longest(records)
        longer = {reader.paging[key] for key, n in most.items() if n > page_size}
        assert longer and longer <= set(reader.requests), (longer, reader.requests)


def test_every_issue_and_pull_request_resolves_by_id(server, records):
    reader = Reader(server)
    expected = {}
    for record in records:
        repo = record["repository"]["nameWithOwner"]
        for key, typename in (("issues", "Issue"), ("pullRequests", "PullRequest")):
            for node in record[key]:
                expected[node["id"]] = {
                    "__typename": typename,
                    "id": node["id"],
                    "number": node["number"],
                    "repository": {"nameWithOwner": repo},
                }
    ids = sorted(expected)
    for start in range(0, len(ids), 100):
        batch = ids[start : start + 100]
        assert reader.post("nodes", {"ids": batch})["nodes"] == [expected[i] for i in batch]
