"""The local GitHub GraphQL server is test infrastructure: check it behaves like GitHub."""

import random
from datetime import timedelta

import requests
from graphql import print_ast

from ghindex.github.graphql import load_query
from testkit.github_server import (
    connection_errors,
    format_time,
    issue_node,
    load_schema,
    parse_time,
    pull_request_node,
)


def post(server, query, variables=None, token="ghp_test_token", operation=None):
    headers = {"Authorization": f"bearer {token}"} if token else {}
    payload = {"query": query, "variables": variables or {}}
    if operation:
        payload["operationName"] = operation
    return requests.post(server.url, json=payload, headers=headers, timeout=10)


def shuffled_issues(count):
    """Issues whose update order differs from their number order."""
    numbers = list(range(1, count + 1))
    random.Random(7).shuffle(numbers)
    start = parse_time("2015-03-01T12:00:00Z")
    return [
        issue_node(number, updatedAt=format_time(start + timedelta(minutes=rank)))
        for rank, number in enumerate(numbers)
    ]


def fetch_all_issues(server, since=None):
    query = print_ast(load_query("issues"))
    nodes, after = [], None
    while True:
        variables = {"owner": "octo", "name": "hello", "since": since, "after": after}
        body = post(server, query, variables).json()
        assert "errors" not in body, body
        page = body["data"]["repository"]["issues"]
        nodes += page["nodes"]
        if not page["pageInfo"]["hasNextPage"]:
            return nodes
        after = page["pageInfo"]["endCursor"]


def test_bad_credentials(github_server):
    github_server.add_repo("octo/hello")
    query = "{ rateLimit { remaining } }"
    for token in (None, "wrong"):
        response = post(github_server, query, token=token)
        assert response.status_code == 401
        assert response.json() == {
            "message": "Bad credentials",
            "documentation_url": "https://docs.github.com/graphql",
            "status": "401",
        }
    response = requests.post(
        github_server.url,
        json={"query": query},
        headers={"Authorization": "Token ghp_test_token"},
        timeout=10,
    )
    assert response.json() == {"data": {"rateLimit": {"remaining": 4999}}}
    assert [r["status"] for r in github_server.requests] == [401, 401, 200]


def test_issues_query_pages_everything_in_updated_order(github_server):
    github_server.add_repo("octo/hello", issues=shuffled_issues(250))
    nodes = fetch_all_issues(github_server)
    assert sorted(node["number"] for node in nodes) == list(range(1, 251))
    times = [parse_time(node["updatedAt"]) for node in nodes]
    assert times == sorted(times)
    assert nodes[0]["author"] == {"__typename": "User", "login": "octocat"}
    log = github_server.requests
    assert len(log) == 3
    assert log[0] == {
        "operation": "Issues",
        "variables": {"owner": "octo", "name": "hello", "since": None, "after": None},
        "status": 200,
    }
    assert log[2]["variables"]["after"] is not None


def test_since_filter_keeps_issues_updated_at_or_after(github_server):
    github_server.add_repo("octo/hello", issues=shuffled_issues(250))
    since = "2015-03-01T14:00:00+00:00"  # rank 120 and later; compared as times, not text
    nodes = fetch_all_issues(github_server, since=since)
    assert len(nodes) == 130
    assert all(parse_time(node["updatedAt"]) >= parse_time(since) for node in nodes)


def test_pull_requests_newest_first(github_server):
    pulls = [
        pull_request_node(n, updatedAt=f"2016-01-0{n}T00:00:00Z", state="MERGED")
        for n in range(1, 6)
    ]
    github_server.add_repo("octo/hello", pull_requests=pulls)
    query = print_ast(load_query("pull_requests"))
    body = post(github_server, query, {"owner": "Octo", "name": "HELLO"}).json()
    page = body["data"]["repository"]["pullRequests"]
    assert [node["number"] for node in page["nodes"]] == [5, 4, 3, 2, 1]
    assert page["pageInfo"]["hasNextPage"] is False


def test_unknown_repository(github_server):
    query = print_ast(load_query("repository"))
    body = post(github_server, query, {"owner": "octo", "name": "missing"}).json()
    assert body["data"]["repository"] is None
    [error] = body["errors"]
    assert error["type"] == "NOT_FOUND"
    assert error["message"] == "Could not resolve to a Repository with the name 'octo/missing'."
    assert error["path"] == ["repository"]


def test_pagination_rules(github_server):
    github_server.add_repo("octo/hello", issues=shuffled_issues(3))
    missing = '{ repository(owner: "octo", name: "hello") { issues { nodes { number } } } }'
    body = post(github_server, missing).json()
    assert body["errors"][0]["message"] == (
        "You must provide a `first` or `last` value to properly paginate the `issues` connection."
    )
    assert "data" not in body
    too_many = (
        'query($n: Int) { repository(owner: "octo", name: "hello") { issues(first: $n)'
        " { nodes { number } } } }"
    )
    body = post(github_server, too_many, {"n": 101}).json()
    assert body["errors"][0]["message"] == (
        "Requesting 101 records on the `issues` connection exceeds the `first` limit of 100 "
        "records."
    )
    count_only = '{ repository(owner: "octo", name: "hello") { issues { totalCount } } }'
    assert post(github_server, count_only).json() == {
        "data": {"repository": {"issues": {"totalCount": 3}}}
    }
    assert len(connection_errors(load_schema(), missing)) == 1
    assert connection_errors(load_schema(), too_many) == []  # static: $n is unknown
    assert len(connection_errors(load_schema(), too_many, {"n": 101})) == 1


def test_invalid_query_answers_200_with_errors(github_server):
    response = post(github_server, "{ rateLimit { nope } }")
    assert response.status_code == 200
    assert "nope" in response.json()["errors"][0]["message"]


def test_fault_injection(github_server):
    query = "query Limits { rateLimit { remaining } }"
    github_server.fail_requests(n=2, status=502, after=1)
    github_server.graphql_error_next("Something went wrong", type="INTERNAL")
    statuses = [post(github_server, query).status_code for _ in range(3)]
    assert statuses == [200, 502, 502]
    assert post(github_server, query).json() == {
        "data": None,
        "errors": [{"message": "Something went wrong", "type": "INTERNAL"}],
    }
    assert post(github_server, query).status_code == 200
    assert [r["operation"] for r in github_server.requests] == ["Limits"] * 5
    assert [r["status"] for r in github_server.requests] == [200, 502, 502, 200, 200]
