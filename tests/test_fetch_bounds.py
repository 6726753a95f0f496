"""A fetch GitHub's answers cannot stretch or break (#49): pages that never end, at every
level, stop as a gap; marks stay between a floor and the run's start, whatever dates
GitHub sends; one failing answer is one repository's surface or one item's; numbers and
headers of any size are clamped. Each family is generated (hypothesis), with the test
server (testkit/github_server.py) copying the hostile answer."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.github_server import (
    PAGING_TRICKS,
    comment_node,
    event,
    issue_node,
    pull_request_node,
    ref,
)
from testkit.state import rows

EXAMPLES = int(os.environ.get("GHINDEX_EXAMPLES", "15"))
# What a mark can be (docs/fetching.md): from FLOOR to the run's start plus SKEW.
FLOOR = datetime(2000, 1, 1, tzinfo=UTC)
SKEW = timedelta(minutes=1)
# What a fetch of the fixtures below needs, with room: a server that keeps a fetch
# going past it answers HTTP 400, so old code fails instead of hanging.
REQUESTS = 400

generated = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def fresh_workdir(isolated, monkeypatch):
    work = isolated / f"work-{uuid.uuid4().hex}"
    monkeypatch.setenv("GHINDEX_WORKDIR", str(work))
    return work


def no_surprise(result):
    assert "unexpected" not in result.output, result.output
    assert "Traceback" not in result.output, result.output


def fixtures(github, repo="octo/hello"):
    """Three issues (#2 with two comments and a timeline event) and a pull request."""
    busy = issue_node(
        2,
        repo=repo,
        comments=[comment_node(71, "one"), comment_node(72, "two")],
        timelineItems=[event("ClosedEvent", 5, closer=ref(repo, 4, "PullRequest"))],
    )
    github.add_repo(
        repo,
        issues=[issue_node(1, repo=repo), busy, issue_node(3, repo=repo)],
        pull_requests=[pull_request_node(4, repo=repo)],
    )
    return busy


# ------------------------------------------------------------- 1. a fetch always ends

# where the pages never end -> what becomes the gap
_LEVELS = {
    "issues": "octo/hello issues",
    "pullRequests": "octo/hello pull requests",
    "comments": "octo/hello#2",
    "timelineItems": "octo/hello#2",
}


@pytest.mark.slow  # a fetch or two per generated case
@generated
@given(level=st.sampled_from(sorted(_LEVELS)), trick=st.sampled_from(PAGING_TRICKS))
def test_pages_that_never_end_become_one_gap(github, run, isolated, monkeypatch, level, trick):
    work = fresh_workdir(isolated, monkeypatch)
    busy = fixtures(github)
    key = (busy["id"], level) if level in ("comments", "timelineItems") else level
    github.paging_tricks = {key: trick}
    github.requests.clear()
    github.request_limit = REQUESTS

    result = run("fetch", "--repo", "octo/hello", "--json")

    no_surprise(result)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "partial"
    gap = _LEVELS[level]
    named = [w for w in report["warnings"] if w.startswith(f"skipped {gap}:")]
    assert len(named) == 1, report["warnings"]
    # the rest is stored: the other items, the other surface
    issues = {n for (n,) in rows(work, "SELECT number FROM issues WHERE number < 10")}
    pulls = {n for (n,) in rows(work, "SELECT number FROM pull_requests WHERE number < 10")}
    if level != "issues":
        assert issues == ({1, 2, 3} if level == "pullRequests" else {1, 3})
    if level != "pullRequests":
        assert pulls == {4}
    # and the next run, GitHub answering well again, reads the gap
    github.paging_tricks = {}
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    assert rows(work, "SELECT count(*) FROM fetch_gaps") == [(0,)]
    assert rows(work, "SELECT count(*) FROM comments WHERE number = 2") == [(2,)]


@pytest.mark.slow  # a fetch or two per generated case
@generated
@given(trick=st.sampled_from(PAGING_TRICKS))
def test_an_organisation_list_that_never_ends_takes_what_it_listed(
    github, run, isolated, monkeypatch, trick
):
    fresh_workdir(isolated, monkeypatch)
    fixtures(github, "octo/a")
    fixtures(github, "octo/b")
    github.paging_tricks = {"repositories": trick}
    github.request_limit = REQUESTS

    result = run("fetch", "--org", "octo", "--json")

    no_surprise(result)
    if trick == "empty":  # nothing listed at all: nothing to take, one line
        assert result.exit_code == 1
        assert result.stderr == (
            "Error: octo: GitHub's list of its repositories stopped at once: page 1 of "
            "octo's repositories brought nothing new (an empty page)\n"
        )
        return
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    short = [w for w in report["warnings"] if w.startswith("octo: took the ")]
    assert len(short) == 1, report["warnings"]
    fetched = {r["repo"] for r in report["repos"]}
    assert fetched == {"octo/a", "octo/b"}


# ------------------------------------------------------- 2. marks GitHub cannot freeze

_ODD_DATES = st.one_of(
    st.sampled_from(
        [
            datetime(1, 1, 1, tzinfo=UTC),
            datetime(2999, 1, 1, tzinfo=UTC),
            datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
        ]
    ),
    st.datetimes(
        min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
    ),
)


def github_time(moment):
    """A time as GitHub writes it, the year always four digits."""
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def marks(work):
    return dict(
        rows(
            work,
            "SELECT surface, high_water_mark FROM sync_state "
            "WHERE surface IN ('issues', 'pull_requests', 'releases')",
        )
    )


@pytest.mark.slow  # a fetch or two per generated case
@generated
@given(dates=st.lists(_ODD_DATES, min_size=1, max_size=3), pulls=st.booleans())
def test_no_date_github_sends_freezes_or_breaks_a_mark(
    github, run, isolated, monkeypatch, dates, pulls
):
    work = fresh_workdir(isolated, monkeypatch)
    odd = [
        (pull_request_node if pulls else issue_node)(n, updatedAt=github_time(moment))
        for n, moment in enumerate(dates, 1)
    ]
    entry = github.add_repo("octo/hello", **{"pull_requests" if pulls else "issues": odd})
    started = datetime.now(UTC)

    first = run("fetch", "--repo", "octo/hello", "--json")

    no_surprise(first)
    assert first.exit_code == 0, first.output
    for surface, mark in marks(work).items():
        assert mark is None or FLOOR <= mark <= datetime.now(UTC) + SKEW, (surface, mark)
    far = [m for m in dates if not FLOOR <= m <= started + SKEW]
    warned = [w for w in json.loads(first.stdout)["warnings"] if "outside what a mark can be" in w]
    assert len(warned) == (1 if far else 0), warned
    # a real edit after the run is read by the next one, on every run
    for number in (50, 51):
        edited = (pull_request_node if pulls else issue_node)(
            number, updatedAt=github_time(datetime.now(UTC))
        )
        with github.lock:
            entry["pullRequests" if pulls else "issues"].append(edited)

        again = run("fetch", "--repo", "octo/hello")

        no_surprise(again)
        assert again.exit_code == 0, again.output
        table = "pull_requests" if pulls else "issues"
        assert rows(work, f"SELECT count(*) FROM {table} WHERE number = {number}") == [(1,)]


def test_a_stored_mark_no_run_could_set_is_not_trusted(github, run, isolated):
    # a version without the bounds stored 2999 from one item: every later fetch read nothing
    work = isolated / "work"
    entry = github.add_repo("octo/hello", issues=[issue_node(1), issue_node(2)])
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    with duckdb.connect(str(work / "state.duckdb")) as con:
        con.execute(
            "UPDATE sync_state SET high_water_mark = TIMESTAMPTZ '2999-01-01 00:00:00+00' "
            "WHERE surface = 'issues'"
        )
    with github.lock:
        entry["issues"][0] = issue_node(1, title="Edited", updatedAt="2024-06-01T00:00:00Z")

    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 0, result.output
    assert (
        "warning: octo/hello issues: the stored mark 2999-01-01T00:00:00Z is not one a run "
        "could have set: listed from the start again\n"
    ) in result.stderr
    assert rows(work, "SELECT title FROM issues WHERE number = 1") == [("Edited",)]
    assert marks(work)["issues"] == datetime(2024, 6, 1, tzinfo=UTC)


# -------------------------------------------- 5. one failure is one repository's, or one item's

# requests in order for octo/a and octo/b (fixtures): Repository a, Repository b, then a's
# Issues, PullRequests, Discussions, Releases, then b's
_SURFACES = [("issues", "issues"), ("pullRequests", "pull requests")]
_SURFACES += [("discussions", "discussions"), ("releases", "releases")]
_ERROR_TYPES = st.one_of(
    st.none(),
    st.sampled_from(["INTERNAL", "NOT_FOUND", "SERVICE_UNAVAILABLE"]),
    st.text(max_size=12),
)


@pytest.mark.slow  # a fetch or two per generated case
@generated
@given(which=st.integers(0, 7), whole=st.booleans(), kind=_ERROR_TYPES)
def test_an_error_on_one_surface_is_that_surfaces_gap(
    github, run, isolated, monkeypatch, which, whole, kind
):
    work = fresh_workdir(isolated, monkeypatch)
    fixtures(github, "octo/a")
    fixtures(github, "octo/b")
    repo = "octo/a" if which < 4 else "octo/b"
    field, shown = _SURFACES[which % 4]
    error = {"message": "Something broke", **({"type": kind} if kind is not None else {})}

    def failing(body):
        if whole:
            body["data"] = None
            body["errors"] = [error]
        else:
            body["data"]["repository"] = None
            body["errors"] = [{**error, "path": ["repository", field]}]

    github.edit_next(failing, after=2 + which)

    result = run("fetch", "--repo", "octo/a", "--repo", "octo/b", "--json")

    no_surprise(result)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "partial"
    named = [w for w in report["warnings"] if w.startswith(f"skipped {repo} {shown}: ")]
    assert len(named) == 1 and len(report["warnings"]) == 1, report["warnings"]
    for other in ("octo/a", "octo/b"):
        issues = rows(work, f"SELECT count(*) FROM issues WHERE repo = '{other}'")
        pulls = rows(work, f"SELECT count(*) FROM pull_requests WHERE repo = '{other}'")
        assert issues == [(0 if (other, field) == (repo, "issues") else 3,)]
        assert pulls == [(0 if (other, field) == (repo, "pullRequests") else 1,)]
    assert rows(work, "SELECT repo, surface, node_id FROM fetch_gaps") == [
        (repo, {"pullRequests": "pull_requests"}.get(field, field), "")
    ]
    assert run("fetch", "--repo", "octo/a", "--repo", "octo/b").exit_code == 0
    assert rows(work, "SELECT count(*) FROM fetch_gaps") == [(0,)]
    assert rows(work, "SELECT count(*) FROM issues") == [(6,)]


_BROKEN_CONNECTIONS = st.sampled_from(
    [
        lambda c: c.pop("pageInfo"),
        lambda c: c.update(pageInfo=None),
        lambda c: c.update(pageInfo={}),
        lambda c: c.update(pageInfo={"hasNextPage": "yes", "endCursor": 5}),
        lambda c: c.update(nodes=None),
        lambda c: c.pop("nodes"),
        None,  # the connection itself null, with no error saying why
        [],  # not an object at all
    ]
)


@pytest.mark.slow  # a fetch or two per generated case
@generated
@given(field=st.sampled_from(["comments", "timelineItems"]), broken=_BROKEN_CONNECTIONS)
def test_a_nested_connection_without_its_page_is_that_items_gap(
    github, run, isolated, monkeypatch, field, broken
):
    work = fresh_workdir(isolated, monkeypatch)
    fixtures(github)

    def damaged(body):
        item = body["data"]["repository"]["issues"]["nodes"][1]  # issue #2
        if callable(broken):
            broken(item[field])
        else:
            item[field] = broken

    github.edit_next(damaged, after=1)  # Repository, then Issues

    result = run("fetch", "--repo", "octo/hello", "--json")

    no_surprise(result)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    # met on the page, the item is read again by id in the same run: stored whole
    assert rows(work, "SELECT number FROM issues ORDER BY number") == [(1,), (2,), (3,)]
    assert rows(work, "SELECT count(*) FROM comments WHERE number = 2") == [(2,)]
    assert rows(work, "SELECT count(*) FROM fetch_gaps") == [(0,)]
    assert report["repos"][0]["issues"] == 3


_OTHER_NAMES = st.one_of(
    st.sampled_from(["ghost/phantom", "octo/b", "", "a/b/c", "/x", "octo/", 7, None]),
    st.text(max_size=30),
)


@pytest.mark.slow  # a fetch or two per generated case
@generated
@given(named=_OTHER_NAMES)
def test_a_repository_answer_naming_another_repository_is_refused_for_it(
    github, run, isolated, monkeypatch, named
):
    work = fresh_workdir(isolated, monkeypatch)
    fixtures(github, "octo/a")
    fixtures(github, "octo/b")

    def renamed(body):
        body["data"]["repository"]["nameWithOwner"] = named

    github.edit_next(renamed)  # the lookup of octo/a

    result = run("fetch", "--repo", "octo/a", "--repo", "octo/b", "--json")

    no_surprise(result)
    assert result.exit_code == 0, result.output
    stored = {r for (r,) in rows(work, "SELECT repo FROM repos")}
    if isinstance(named, str) and named.lower() == "octo/a":
        assert stored == {named, "octo/b"}  # GitHub's own spelling of the same name
        return
    assert stored == {"octo/b"}  # no row for a name GitHub does not stand by
    report = json.loads(result.stdout)
    (line,) = report["warnings"]
    assert line.startswith("skipped octo/a repository: GitHub answered octo/a with ")
    assert rows(work, "SELECT count(*) FROM issues WHERE repo <> 'octo/b'") == [(0,)]
    assert run("fetch", "--repo", "octo/a", "--repo", "octo/b").exit_code == 0
    assert {r for (r,) in rows(work, "SELECT repo FROM repos")} == {"octo/a", "octo/b"}


# ------------------------------------------------ 6. numbers and headers in any range

_NUMBERS = st.one_of(
    st.sampled_from(["inf", "-inf", "nan", "1e400", "1e308", str(10**20), str(-(10**20))]),
    st.sampled_from(["Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT"]),
    st.integers(-(10**30), 10**30).map(str),
    st.floats().map(repr),
)


@pytest.mark.slow  # a fetch or two per generated case
@generated
@given(
    header=st.sampled_from(["Retry-After", "X-RateLimit-Reset"]),
    value=_NUMBERS,
    cost=st.one_of(st.none(), st.integers(-(10**30), 10**30)),
    remaining=st.one_of(st.none(), st.integers(-(10**30), 10**30)),
)
def test_numbers_of_any_size_are_clamped_and_the_run_is_recorded(
    github, run, isolated, monkeypatch, header, value, cost, remaining
):
    work = fresh_workdir(isolated, monkeypatch)
    fixtures(github)

    def priced(body):
        limit = (body.get("data") or {}).get("rateLimit")
        if isinstance(limit, dict):
            limit.update({k: v for k, v in (("cost", cost), ("remaining", remaining)) if v})

    limited = {header: value, "X-RateLimit-Remaining": "0"}
    github.fail_requests(
        n=1, status=403, body={"message": "API rate limit exceeded"}, after=1, headers=limited
    )
    github.edit_next(priced, n=50)  # every answer after that one

    result = run("fetch", "--repo", "octo/hello", "--max-wait", "0", "--json")

    no_surprise(result)
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        (line,) = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
        assert "rate limit" in line
    ((status, spent),) = rows(work, "SELECT status, cost FROM runs")
    assert status == ("failed" if result.exit_code else "ok")
    assert 0 <= spent <= 50 * 5_000
