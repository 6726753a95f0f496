"""Fetching survives GitHub's failures: retries, rate limits, partial and malformed answers.

Everything runs against the local GitHub server (testkit/github_server.py) over HTTP; faults
are injected there, never by patching the client. Waits are real but short: rate-limit
resets a second or two away, backoff bases of 10 ms. Only the client's own decisions
(backoff bounds, wait messages) are checked with an injected sleep and clock.
"""

from __future__ import annotations

import logging
import re
import socket
import traceback
from datetime import UTC, datetime, timedelta

import pytest

from ghindex.errors import GitHubError, RateLimited
from ghindex.github.client import GraphQLClient
from testkit.github_server import GitHubServer, format_time, issue_node, parse_time
from testkit.state import rows

HELLO = {"owner": "octo", "name": "hello"}
HELLO_ISSUES = {**HELLO, "since": None, "after": None}


# ------------------------------------------------------------------------ helpers


def statuses(server):
    return [r["status"] for r in server.requests]


def reset_in(seconds):
    """A resetAt `seconds` from now, on a whole second (as GitHub sends it)."""
    return format_time(datetime.now(UTC) + timedelta(seconds=seconds))


def clock_time(reset_at):
    return parse_time(reset_at).strftime("%H:%M:%S")


def warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name.startswith("ghindex")]


def error_line(result):
    """The CLI's one-line error: exit 1, no traceback, exactly one `Error:` line."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def many_issues(count, repo="octo/big"):
    return [
        issue_node(n, repo=repo, updatedAt=f"2024-01-01T{n // 60:02d}:{n % 60:02d}:00Z")
        for n in range(1, count + 1)
    ]


@pytest.fixture
def workdir(isolated):
    return isolated / "work"


# ------------------------------------------------------------- transient failures


def test_502s_are_retried_and_the_answer_is_complete(hello, client):
    hello.fail_requests(n=2, status=502)
    github = client(retries=3)

    data = github.execute("issues", HELLO_ISSUES)

    assert [n["number"] for n in data["repository"]["issues"]["nodes"]] == [1, 2]
    assert statuses(hello) == [502, 502, 200]
    assert (github.requests, github.retries, github.cost) == (3, 2, 1)
    assert 0 <= github.waited_seconds <= 0.01 + 0.02  # full jitter: at most base * 2**n


@pytest.mark.parametrize("status", [500, 503, 504])
def test_other_server_errors_are_retried(hello, client, status):
    hello.fail_requests(n=1, status=status)

    assert client(retries=1).execute("repository", HELLO)["repository"]["nameWithOwner"] == (
        "octo/hello"
    )
    assert statuses(hello) == [status, 200]


def test_502_forever_gives_up_after_the_retries_with_one_line(hello, client):
    hello.fail_requests(n=100, status=502)
    github = client(retries=2)

    with pytest.raises(GitHubError) as raised:
        github.execute("repository", HELLO)

    assert str(raised.value) == (
        f"{hello.url} answered HTTP 502 after retries: GitHub may be degraded; run again later"
    )
    assert statuses(hello) == [502, 502, 502]
    assert (github.requests, github.retries) == (3, 2)


def test_backoff_is_exponential_with_full_jitter(hello, monkeypatch):
    monkeypatch.setenv("GHINDEX_HTTP_RETRIES", "3")
    monkeypatch.setenv("GHINDEX_RETRY_BASE_SECONDS", "1.0")
    slept = []
    hello.fail_requests(n=3, status=503)

    with GraphQLClient(hello.url, hello.token, sleep=slept.append) as github:
        github.execute("repository", HELLO)

    assert len(slept) == 3
    assert [0 <= delay <= 2**n for n, delay in enumerate(slept)] == [True] * 3
    assert github.waited_seconds == pytest.approx(sum(slept))
    assert github.stats() == {
        "requests": 4,
        "retries": 3,
        "repaired_texts": 0,
        "smaller_pages": 0,
        "page_sizes": {},
        "cost": 1,
        "waited_seconds": round(sum(slept), 3),
    }


def test_a_graphql_something_went_wrong_is_retried(hello, client):
    hello.graphql_error_next("Something went wrong while executing your query. Timeout.")

    github = client(retries=1)

    assert github.execute("repository", HELLO)["repository"]["nameWithOwner"] == "octo/hello"
    assert github.retries == 1


def test_a_slow_answer_times_out_and_is_retried(hello, client):
    hello.slow_requests(n=1, seconds=2.0)
    github = client(retries=1, timeout=0.3)

    assert github.execute("repository", HELLO)["repository"]["nameWithOwner"] == "octo/hello"
    assert (github.requests, github.retries) == (2, 1)


def test_a_server_that_never_answers_in_time_gives_one_line(hello, client):
    hello.slow_requests(n=2, seconds=2.0)
    github = client(retries=1, timeout=0.3)

    with pytest.raises(GitHubError) as raised:
        github.execute("repository", HELLO)

    assert str(raised.value) == (
        f"{hello.url} did not answer within 0.3s after retries: GitHub may be slow; run again later"
    )


def test_an_unreachable_server_is_retried_then_named(monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("GHINDEX_HTTP_RETRIES", "2")
    url = f"http://127.0.0.1:{port}/graphql"

    github = GraphQLClient(url, "ghp_secret", sleep=lambda _s: None)
    with github, pytest.raises(GitHubError) as raised:
        github.execute("repository", HELLO)

    assert str(raised.value) == f"cannot reach {url}: [Errno 111] Connection refused"
    assert (github.requests, github.retries) == (3, 2)


# ----------------------------------------------------------- secondary rate limits


@pytest.mark.parametrize("status", [403, 429])
@pytest.mark.slow
def test_secondary_rate_limit_waits_retry_after_then_succeeds(hello, client, caplog, status):
    hello.fail_requests(n=1, status=status, headers={"Retry-After": "1"})
    github = client(retries=0)  # rate-limit waits are not failures: no retry budget needed

    data = github.execute("repository", HELLO)

    assert data["repository"]["nameWithOwner"] == "octo/hello"
    assert statuses(hello) == [status, 200]
    assert (github.waited_seconds, github.retries) == (1.0, 1)
    assert warnings(caplog) == ["secondary rate limit: waiting 1s before retrying"]


def test_secondary_rate_limit_without_retry_after_needs_a_minute(hello, client):
    hello.fail_requests(n=1, status=403)  # GitHub's "exceeded a secondary rate limit" body
    github = client(max_wait=10)

    with pytest.raises(RateLimited) as raised:
        github.execute("repository", HELLO)

    assert str(raised.value) == (
        "GitHub's secondary rate limit asks for a pause of 1m (more than --max-wait 10s): "
        "progress is saved; run again in a few minutes"
    )
    assert (statuses(hello), github.waited_seconds) == ([403], 0.0)


def test_a_403_that_is_no_rate_limit_is_not_retried(hello, client):
    hello.fail_requests(
        n=1, status=403, body={"message": "Resource not accessible by personal access token"}
    )
    github = client(retries=3)

    with pytest.raises(GitHubError) as raised:
        github.execute("repository", HELLO)

    assert str(raised.value) == (
        "GitHub refused Repository (HTTP 403: Resource not accessible by personal access "
        "token): give the fine-grained token the repository permission Metadata: Read-only"
    )
    assert statuses(hello) == [403]


# -------------------------------------------------------------- primary rate limit


@pytest.mark.slow
def test_primary_rate_limit_is_waited_out_until_the_reset(hello, client, caplog):
    hello.rate_limit.update(remaining=0, resetAt=reset_in(2))
    until = clock_time(hello.rate_limit["resetAt"])
    github = client()

    data = github.execute("repository", HELLO)

    assert data["repository"]["nameWithOwner"] == "octo/hello"
    assert statuses(hello) == [200, 200]  # RATE_LIMITED, then the answer after the reset
    assert 1.0 < github.waited_seconds <= 3.0
    assert github.remaining == 5000  # the window refilled
    [message] = warnings(caplog)
    assert re.fullmatch(rf"rate limit: 0 points left, waiting \ds until {until} UTC", message)


def test_primary_rate_limit_beyond_max_wait_raises_rate_limited(hello, client):
    hello.rate_limit.update(remaining=0, resetAt=reset_in(3600))
    until = clock_time(hello.rate_limit["resetAt"])
    github = client(max_wait=600)

    with pytest.raises(RateLimited) as raised:
        github.execute("repository", HELLO)

    assert str(raised.value) == (
        f"GitHub's rate limit is exhausted until {until} UTC (waiting would exceed "
        "--max-wait 600s): progress is saved; run again after the reset"
    )
    assert (statuses(hello), github.waited_seconds) == ([200], 0.0)


# ---------------------------------------------------------------------- budget


@pytest.mark.slow
def test_the_client_waits_for_the_reset_before_a_query_it_cannot_afford(hello, client):
    hello.spend_rate_limit = True
    hello.rate_limited_status = 403  # a query sent without the points would show as 403
    hello.rate_limit.update(remaining=1, resetAt=reset_in(2))
    github = client()

    github.execute("repository", HELLO)
    assert github.remaining == 0
    github.execute("issues", HELLO_ISSUES)

    assert statuses(hello) == [200, 200]
    assert 1.0 < github.waited_seconds <= 3.0
    assert github.remaining == 4999
    assert github.cost == 2


def test_with_max_wait_zero_the_client_stops_instead_of_waiting(hello, client):
    hello.spend_rate_limit = True
    hello.rate_limit.update(remaining=1, resetAt=reset_in(2))
    until = clock_time(hello.rate_limit["resetAt"])
    github = client(max_wait=0)

    github.execute("repository", HELLO)
    with pytest.raises(RateLimited) as raised:
        github.execute("issues", HELLO_ISSUES)

    assert str(raised.value) == (
        f"GitHub's rate limit is exhausted until {until} UTC (waiting would exceed "
        "--max-wait 0s): progress is saved; run again after the reset"
    )
    assert statuses(hello) == [200]


def test_the_budget_estimate_is_the_last_cost_of_the_same_query(hello, client):
    hello.spend_rate_limit = True
    hello.rate_limit.update(cost=3, remaining=7, resetAt=reset_in(3600))
    github = client(max_wait=0)

    github.execute("issues", HELLO_ISSUES)  # first time: assumed to cost 1; 7 -> 4
    github.execute("issues", HELLO_ISSUES)  # it cost 3, 4 points cover it; 4 -> 1
    with pytest.raises(RateLimited):
        github.execute("issues", HELLO_ISSUES)  # 1 point cannot cover 3: not sent

    assert statuses(hello) == [200, 200]
    assert (github.cost, github.remaining) == (6, 1)


def test_wait_message_and_length_come_from_reset_at(hello, monkeypatch, caplog):
    monkeypatch.setenv("GHINDEX_HTTP_RETRIES", "0")
    hello.spend_rate_limit = True
    hello.rate_limit.update(remaining=1, resetAt="2030-01-01T14:05:00Z")
    reset = parse_time("2030-01-01T14:05:00Z").timestamp()
    slept = []

    def sleep(seconds):  # time passes at GitHub too: its window resets
        slept.append(seconds)
        hello.rate_limit["resetAt"] = reset_in(-1)

    with GraphQLClient(hello.url, hello.token, sleep=sleep, clock=lambda: reset - 750) as github:
        github.execute("repository", HELLO)
        github.execute("repository", HELLO)

    assert slept == [751.0]  # until the reset, plus a second's margin
    assert warnings(caplog) == ["rate limit: 0 points left, waiting 12m 31s until 14:05:00 UTC"]
    assert github.waited_seconds == 751.0


# ------------------------------------------------------- incomplete or broken answers


def test_partial_data_with_errors_is_an_error(hello, client):
    hello.partial_errors_next(
        "Something failed", path=["repository", "issues", "nodes", 1], type="FORBIDDEN"
    )

    with pytest.raises(GitHubError) as raised:
        client(retries=3).execute("issues", HELLO_ISSUES)

    assert str(raised.value) == (
        "GitHub answered Issues with partial data and an error at "
        "repository.issues.nodes.1: Something failed"
    )
    assert statuses(hello) == [200]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<html><body>Oops</body></html>", "(not JSON): <html><body>Oops</body></html>"),
        ('{"data": {"repository"', '(not JSON): {"data": {"repository"'),
        ("[1, 2]", "(not JSON): [1, 2]"),
        ({"message": "hello"}, '(JSON without data or errors): {"message": "hello"}'),
    ],
)
def test_a_malformed_body_is_a_one_line_error(hello, client, body, expected):
    hello.fail_requests(n=1, status=200, body=body)

    with pytest.raises(GitHubError) as raised:
        client().execute("repository", HELLO)

    assert str(raised.value) == f"{hello.url} answered with a malformed body {expected}"


# ------------------------------------------------------------ GitHub Enterprise


def test_the_client_posts_to_the_configured_path():
    with GitHubServer(path="/api/graphql") as server:
        server.add_repo("octo/hello")
        base = server.url.removesuffix("/api/graphql")

        with GraphQLClient(f"{base}/api/graphql", server.token) as github:
            assert github.execute("repository", HELLO)["repository"]["id"]
        github = GraphQLClient(f"{base}/graphql", server.token)
        with github, pytest.raises(GitHubError) as raised:
            github.execute("repository", HELLO)

    assert str(raised.value) == (
        f"{base}/graphql answered HTTP 404 Not Found: check GHINDEX_GRAPHQL_URL "
        "(GitHub Enterprise Server uses https://HOST/api/graphql)"
    )
    assert statuses(server) == [200, 404]


# ----------------------------------------------------------------- the token


def echo(headers):
    return f"you sent {headers.get('Authorization')}"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (403, lambda headers: {"message": echo(headers)}),
        (200, echo),  # malformed body
        (200, lambda headers: {"data": None, "errors": [{"message": echo(headers)}]}),
        (502, echo),
    ],
)
def test_the_token_never_reaches_messages_or_logs(hello, client, caplog, status, body):
    caplog.set_level(logging.DEBUG)
    hello.fail_requests(n=10, status=status, body=body)

    with pytest.raises(GitHubError) as raised:
        client(retries=1).execute("repository", HELLO)

    printed = "".join(traceback.format_exception(raised.value))
    assert hello.token not in printed
    assert hello.token not in caplog.text
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    if status != 502:
        assert "you sent bearer [token]" in str(raised.value)


# ---------------------------------------------------------- through `ghindex fetch`


@pytest.mark.slow
def test_rate_limit_mid_run_stops_with_progress_saved_and_resumes(github, workdir, run):
    github.add_repo("octo/big", issues=many_issues(250))
    github.spend_rate_limit = True
    # Repository and two issue pages fit; the third page would wait two hours.
    github.rate_limit.update(remaining=3, resetAt=reset_in(7200))
    until = clock_time(github.rate_limit["resetAt"])

    failed = run("fetch", "--repo", "octo/big")

    assert error_line(failed) == (
        f"Error: GitHub's rate limit is exhausted until {until} UTC (waiting would exceed "
        "--max-wait 3600s): progress is saved; run again after the reset"
    )
    assert rows(workdir, "SELECT count(*), max(number) FROM issues") == [(200, 200)]
    assert rows(workdir, "SELECT high_water_mark FROM sync_state WHERE surface = 'issues'") == [
        (parse_time("2024-01-01T03:20:00Z"),)  # updatedAt of issue 200
    ]
    assert rows(workdir, "SELECT status FROM runs") == [("failed",)]

    github.rate_limit["resetAt"] = reset_in(-1)  # the hour is over
    resumed = run("fetch", "--repo", "octo/big")

    assert resumed.exit_code == 0, resumed.output
    assert rows(workdir, "SELECT count(*), count(DISTINCT number) FROM issues") == [(250, 250)]


@pytest.mark.slow
def test_primary_rate_limit_403_is_waited_out_by_fetch(github, workdir, run):
    github.add_repo("octo/hello", issues=[issue_node(1)])
    github.rate_limited_status = 403
    github.rate_limit.update(remaining=0, resetAt=reset_in(2))

    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 0, result.output
    assert statuses(github)[:2] == [403, 200]
    assert rows(workdir, "SELECT number FROM issues") == [(1,)]


@pytest.mark.slow
def test_a_null_item_in_a_page_is_named_and_read_again_by_id(github, workdir, run):
    github.add_repo("octo/big", issues=many_issues(250))
    # Repository and the first issue page are whole; the second has a null node.
    github.partial_errors_next(
        "Resource not accessible", path=["repository", "issues", "nodes", 5], after=2
    )

    result = run("fetch", "--repo", "octo/big")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("octo/big: 250 issues,")
    assert rows(workdir, "SELECT count(*), count(DISTINCT number) FROM issues") == [(250, 250)]
    assert rows(workdir, "SELECT count(*) FROM fetch_gaps") == [(0,)]
    operations = [r["operation"] for r in github.requests]
    assert operations[:5] == ["Repository", "Issues", "Issues", "IssueIds", "Issues"]
    assert "Items" in operations


def test_502_forever_leaves_the_state_as_it_was(hello, workdir, run, monkeypatch):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    before = rows(workdir, "SELECT * FROM issues ORDER BY number")
    monkeypatch.setenv("GHINDEX_HTTP_RETRIES", "2")
    monkeypatch.setenv("GHINDEX_RETRY_BASE_SECONDS", "0.01")
    hello.requests.clear()
    hello.fail_requests(n=100, status=502)

    failed = run("fetch", "--repo", "octo/hello", "--full")

    assert error_line(failed) == (
        f"Error: {hello.url} answered HTTP 502 after retries: "
        "GitHub may be degraded; run again later"
    )
    assert statuses(hello) == [502, 502, 502]
    assert rows(workdir, "SELECT * FROM issues ORDER BY number") == before


def test_malformed_body_fails_fetch_with_one_line(hello, run):
    hello.fail_requests(n=1, status=200, body="<html>Service Unavailable</html>", after=1)

    failed = run("fetch", "--repo", "octo/hello")

    assert error_line(failed) == (
        f"Error: {hello.url} answered with a malformed body (not JSON): "
        "<html>Service Unavailable</html>"
    )


@pytest.mark.parametrize("debug", [False, True])
def test_fetch_never_prints_the_token(hello, run, caplog, debug):
    caplog.set_level(logging.DEBUG)
    hello.fail_requests(n=1, status=403, body=lambda headers: {"message": echo(headers)})
    args = ["--debug"] if debug else []

    if debug:  # --debug lets the exception through, traceback and all
        with pytest.raises(GitHubError) as raised:
            run(*args, "fetch", "--repo", "octo/hello")
        printed = "".join(traceback.format_exception(raised.value))
    else:
        result = run(*args, "fetch", "--repo", "octo/hello")
        assert error_line(result).startswith("Error: GitHub refused the request (HTTP 403: ")
        printed = result.stdout + result.stderr

    assert "you sent bearer [token]" in printed
    assert hello.token not in printed
    assert hello.token not in caplog.text
