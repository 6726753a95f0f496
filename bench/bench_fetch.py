"""What `ghindex fetch` costs: requests, rate-limit points and wall time per 1,000 items.

Runs the real fetch (client, paging, nested completion, DuckDB writes) against the
test suite's local server, which executes GitHub's published schema over a
synthetic repository. Three runs on one state database: a full fetch, a rerun with
nothing changed, and a rerun after 1% of the issues and pull requests changed.

The local server answers `rateLimit.cost` with 1, so points are estimated with
GitHub's published rule instead: every connection costs one request per parent
item it is asked for (the product of the `first` arguments above it); the sum over
a query, divided by 100 and rounded, is its cost, at least 1.

    python -m bench.bench_fetch [--issues 2000] [--pulls 1000]
"""

from __future__ import annotations

import argparse
import math
import platform
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

from graphql import FieldNode, FragmentSpreadNode, InlineFragmentNode, get_named_type

from ghindex.github.client import GraphQLClient
from ghindex.github.graphql import load_query
from ghindex.github.ingest import fetch
from testkit.github_server import (
    GitHubServer,
    comment_node,
    format_time,
    issue_node,
    load_schema,
    parse_time,
    pull_request_node,
    review_node,
)

REPO = "bench/project"
START = parse_time("2024-01-01T00:00:00Z")


def estimated_cost(name: str) -> int:
    """GitHub's documented cost rule applied to query `name`."""
    schema = load_schema()
    document = load_query(name)
    fragments = {d.name.value: d for d in document.definitions if hasattr(d, "type_condition")}
    operation = next(d for d in document.definitions if not hasattr(d, "type_condition"))
    defaults = {  # page sizes given as `$first`: their defaults are what the client sends
        v.variable.name.value: int(v.default_value.value)
        for v in operation.variable_definitions or ()
        if v.default_value is not None and hasattr(v.default_value, "value")
    }
    requests = 0

    def page_size(argument) -> int | None:
        if hasattr(argument.value, "value"):
            return int(argument.value.value)
        return defaults.get(getattr(getattr(argument.value, "name", None), "value", None))

    def walk(selection_set, parent_type, multiplier):
        nonlocal requests
        for selection in selection_set.selections:
            if isinstance(selection, FragmentSpreadNode):
                fragment = fragments[selection.name.value]
                walk(
                    fragment.selection_set,
                    schema.type_map[fragment.type_condition.name.value],
                    multiplier,
                )
                continue
            if isinstance(selection, InlineFragmentNode):
                inner = schema.type_map[selection.type_condition.name.value]
                walk(selection.selection_set, inner, multiplier)
                continue
            assert isinstance(selection, FieldNode)
            fields = getattr(parent_type, "fields", {})
            if selection.name.value not in fields or selection.selection_set is None:
                continue
            field_type = get_named_type(fields[selection.name.value].type)
            child = multiplier
            if field_type.name.endswith("Connection"):
                requests += multiplier
                size = next(
                    (
                        page_size(a)
                        for a in selection.arguments or ()
                        if a.name.value in ("first", "last") and page_size(a)
                    ),
                    1,
                )
                child = multiplier * size
            walk(selection.selection_set, field_type, child)

    walk(operation.selection_set, schema.query_type, 1)
    return max(1, round(requests / 100))


OPERATION_FILES = {
    "Repository": "repository",
    "Issues": "issues",
    "PullRequests": "pull_requests",
    "Discussions": "discussions",
    "Releases": "releases",
    "IssueComments": "issue_comments",
    "TimelineItems": "timeline_items",
    "PullRequestReviews": "pull_request_reviews",
    "ReviewThreads": "review_threads",
    "ReviewThreadComments": "review_thread_comments",
    "PullRequestCommits": "pull_request_commits",
    "ClosingReferences": "closing_references",
    "DiscussionComments": "discussion_comments",
    "DiscussionReplies": "discussion_replies",
    "Nodes": "nodes",
}


def stamp(minutes: float) -> str:
    return format_time(START + timedelta(minutes=minutes))


def synthetic_repo(server: GitHubServer, issues: int, pulls: int) -> None:
    """Items shaped like a busy project: a few comments each, one in 50 long threads."""
    issue_nodes = []
    for n in range(1, issues + 1):
        count = 45 if n % 50 == 0 else n % 4  # every 50th issue has a long thread
        body = f"Issue {n} body. Related to #{max(1, n - 1)}.\n\n" + "Some text. " * 40
        comments = [comment_node(n * 100 + c, body=f"comment {c} on #{n}") for c in range(count)]
        issue_nodes.append(
            issue_node(n, repo=REPO, body=body, comments=comments, updatedAt=stamp(n))
        )
    pull_nodes = []
    for n in range(issues + 1, issues + pulls + 1):
        reviews = [
            review_node(n * 10 + r, "APPROVED" if r == 1 else "COMMENTED") for r in range(n % 3)
        ]
        pull_nodes.append(
            pull_request_node(
                n,
                repo=REPO,
                body=f"Fixes #{n - issues}",
                reviews=reviews,
                comments=[comment_node(n * 100)],
                updatedAt=stamp(n),
            )
        )
    server.add_repo(REPO, issues=issue_nodes, pull_requests=pull_nodes)


def change(server: GitHubServer, share: float, minutes: float) -> int:
    """Touch `share` of the issues and pull requests, as edits on GitHub would."""
    entry = server.repos[REPO]
    touched = 0
    for key in ("issues", "pullRequests"):
        nodes = entry[key]
        step = max(1, round(1 / share))
        for node in nodes[::step]:
            node["updatedAt"] = stamp(minutes + touched)
            node["title"] = node["title"] + " (edited)"
            touched += 1
    return touched


def run(server: GitHubServer, state: Path, items: int) -> dict[str, float]:
    server.requests.clear()
    started = time.perf_counter()
    with GraphQLClient(server.url, server.token) as client:
        fetch(state, client, [REPO])
    seconds = time.perf_counter() - started
    operations = Counter(r["operation"] for r in server.requests)
    cost = sum(estimated_cost(OPERATION_FILES[op]) * n for op, n in operations.items())
    return {
        "items": items,
        "requests": sum(operations.values()),
        "cost": cost,
        "seconds": seconds,
        "operations": dict(operations),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=2000)
    parser.add_argument("--pulls", type=int, default=1000)
    args = parser.parse_args()
    total = args.issues + args.pulls
    # 1 repository lookup, 1 page per 100 issues / pull requests, 1 discussions, 1 releases
    floor = 1 + math.ceil(args.issues / 100) + math.ceil(args.pulls / 100) + 2

    with GitHubServer() as server, tempfile.TemporaryDirectory() as tmp:
        synthetic_repo(server, args.issues, args.pulls)
        state = Path(tmp) / "state.duckdb"
        full = run(server, state, total)
        unchanged = run(server, state, 0)
        touched = change(server, 0.01, minutes=total + 1000)
        one_percent = run(server, state, touched)

    print(f"# fetch cost, {platform.node()}, {time.strftime('%Y-%m-%d')}")
    print(f"synthetic repository: {args.issues} issues, {args.pulls} pull requests\n")
    print(
        "| run | items fetched | requests | lower bound | requests / bound | "
        "est. points | wall s | s per 1,000 items |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = [
        ("full", full, floor),
        ("nothing changed", unchanged, 5),
        ("1% changed", one_percent, 5),
    ]
    for name, result, bound in rows:
        per_thousand = (
            f"{result['seconds'] / result['items'] * 1000:.2f}" if result["items"] else "n/a"
        )
        print(
            f"| {name} | {result['items']} | {result['requests']} | {bound} | "
            f"{result['requests'] / bound:.2f} | {result['cost']} | {result['seconds']:.2f} | "
            f"{per_thousand} |"
        )
    print("\nrequests by operation (full run):", full["operations"])
    print(
        "estimated points per query:", {op: estimated_cost(f) for op, f in OPERATION_FILES.items()}
    )


if __name__ == "__main__":
    main()
