"""`ghindex fetch` against a local server that executes GitHub's published schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit.github_server import issue_node, pull_request_node
from testkit.state import operations, rows, utc

EVERY_SURFACE = ["Repository", "Issues", "PullRequests", "Discussions", "Releases"]


@pytest.fixture
def workdir(isolated):
    return isolated / "work"


@pytest.fixture
def hello(github):
    """octo/hello with one rich issue and one merged pull request."""
    github.add_repo(
        "octo/hello",
        description="Hello world",
        issues=[
            issue_node(
                1,
                title="Flaky test on Windows",
                body="The test `test_io` fails on windows about one run in ten.",
                state="CLOSED",
                stateReason="COMPLETED",
                closedAt="2024-01-03T00:00:00Z",
                createdAt="2024-01-01T00:00:00Z",
                updatedAt="2024-01-03T00:00:00Z",
                author={"__typename": "User", "login": "alice"},
                authorAssociation="MEMBER",
                labels={
                    "nodes": [
                        {"name": "bug", "color": "d73a4a", "description": "Something broke"},
                        {"name": "ci", "color": "000000", "description": None},
                    ]
                },
                assignees={"nodes": [{"login": "bob"}, {"login": "carol"}]},
                milestone={
                    "number": 3,
                    "title": "v1.0",
                    "state": "OPEN",
                    "dueOn": "2024-02-01T00:00:00Z",
                    "url": "https://github.com/octo/hello/milestone/3",
                },
                comments={"totalCount": 4},
                reactions={"totalCount": 2},
            )
        ],
        pull_requests=[
            pull_request_node(
                2,
                title="Retry the flaky IO test",
                body="Fixes #1",
                state="MERGED",
                merged=True,
                mergedAt="2024-01-03T00:00:00Z",
                closedAt="2024-01-03T00:00:00Z",
                isDraft=False,
                createdAt="2024-01-02T00:00:00Z",
                updatedAt="2024-01-04T00:00:00Z",
                author={"__typename": "Bot", "login": "helper[bot]"},
                additions=10,
                deletions=2,
                changedFiles=1,
                labels={"nodes": [{"name": "bug", "color": "d73a4a", "description": None}]},
            )
        ],
    )
    return github


def test_fetch_stores_issues_and_pull_requests_with_their_metadata(hello, workdir, run):
    result = run("fetch", "--repo", "octo/hello", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["repos"] == [
        {
            "repo": "octo/hello",
            "issues": 1,
            "pull_requests": 1,
            "discussions": 0,
            "releases": 0,
            "deleted": [],
            "transferred": [],
            "inaccessible": [],
            "hidden": [],
            "held_back": [],
            "skipped": [],
            "renamed_from": None,
            "partial": False,
        }
    ]
    assert report["requests"] == 5
    assert operations(hello) == EVERY_SURFACE

    assert rows(
        workdir,
        "SELECT handle, repo, number, title, state, state_reason, author, author_type, "
        "author_association, milestone_number, milestone, comments_count, reactions_count, "
        "url, created_at, updated_at, closed_at FROM issues",
    ) == [
        (
            "octo/hello#1",
            "octo/hello",
            1,
            "Flaky test on Windows",
            "CLOSED",
            "COMPLETED",
            "alice",
            "User",
            "MEMBER",
            3,
            "v1.0",
            4,
            2,
            "https://github.com/octo/hello/issues/1",
            utc("2024-01-01T00:00:00Z"),
            utc("2024-01-03T00:00:00Z"),
            utc("2024-01-03T00:00:00Z"),
        )
    ]
    assert rows(
        workdir,
        "SELECT handle, number, state, merged, merged_at, is_draft, author, author_type, "
        "additions, deletions, changed_files, base_ref, head_ref, url FROM pull_requests",
    ) == [
        (
            "octo/hello#2",
            2,
            "MERGED",
            True,
            utc("2024-01-03T00:00:00Z"),
            False,
            "helper[bot]",
            "Bot",
            10,
            2,
            1,
            "main",
            "feature-2",
            "https://github.com/octo/hello/pull/2",
        )
    ]
    assert rows(workdir, "SELECT handle, label FROM issue_labels ORDER BY ALL") == [
        ("octo/hello#1", "bug"),
        ("octo/hello#1", "ci"),
        ("octo/hello#2", "bug"),
    ]
    assert rows(workdir, "SELECT repo, name, color, description FROM labels ORDER BY name") == [
        ("octo/hello", "bug", "d73a4a", None),
        ("octo/hello", "ci", "000000", None),
    ]
    assert rows(workdir, "SELECT handle, login FROM assignees ORDER BY ALL") == [
        ("octo/hello#1", "bob"),
        ("octo/hello#1", "carol"),
    ]
    assert rows(workdir, "SELECT repo, number, title, state, due_on FROM milestones") == [
        ("octo/hello", 3, "v1.0", "OPEN", utc("2024-02-01T00:00:00Z"))
    ]
    assert rows(workdir, "SELECT repo, description, default_branch FROM repos") == [
        ("octo/hello", "Hello world", "main")
    ]
    assert rows(
        workdir, "SELECT repo, surface, high_water_mark, items_seen FROM sync_state ORDER BY 2"
    ) == [
        ("octo/hello", "discussions", None, 0),
        ("octo/hello", "issues", utc("2024-01-03T00:00:00Z"), 1),
        ("octo/hello", "pull_requests", utc("2024-01-04T00:00:00Z"), 1),
        ("octo/hello", "releases", None, 0),
    ]
    assert rows(workdir, "SELECT command, status, repos, error, requests, cost FROM runs") == [
        ("fetch", "ok", ["octo/hello"], None, 5, 5)
    ]


def test_second_fetch_with_nothing_changed_asks_only_for_the_first_pages(hello, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    before = rows(workdir, "SELECT * EXCLUDE (fetched_at) FROM issues ORDER BY handle")
    hello.requests.clear()

    result = run("fetch", "--repo", "octo/hello", "--json")

    assert result.exit_code == 0, result.output
    assert operations(hello) == EVERY_SURFACE
    # the issues query starts from the high-water mark minus the overlap window
    assert hello.requests[1]["variables"]["since"] == "2024-01-02T23:55:00+00:00"
    assert rows(workdir, "SELECT * EXCLUDE (fetched_at) FROM issues ORDER BY handle") == before
    assert rows(workdir, "SELECT count(*) FROM issues")[0][0] == 1
    assert rows(workdir, "SELECT count(*) FROM issue_labels")[0][0] == 3


@pytest.mark.slow
def test_incremental_fetch_picks_up_changes_and_replaces_labels(hello, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    issue = hello.repos["octo/hello"]["issues"][0]
    issue.update(
        title="Flaky test on Windows and macOS",
        state="OPEN",
        stateReason="REOPENED",
        updatedAt="2024-02-01T00:00:00Z",
        labels={"nodes": [{"name": "flaky", "color": "fbca04", "description": None}]},
        assignees={"nodes": []},
    )
    hello.repos["octo/hello"]["issues"].append(
        issue_node(5, title="New issue", updatedAt="2024-02-02T00:00:00Z")
    )

    result = run("fetch", "--repo", "octo/hello", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["repos"][0]["issues"] == 2
    assert rows(workdir, "SELECT handle, title, state, state_reason FROM issues ORDER BY 1") == [
        ("octo/hello#1", "Flaky test on Windows and macOS", "OPEN", "REOPENED"),
        ("octo/hello#5", "New issue", "OPEN", None),
    ]
    assert rows(workdir, "SELECT handle, label FROM issue_labels ORDER BY ALL") == [
        ("octo/hello#1", "flaky"),
        ("octo/hello#2", "bug"),
    ]
    assert rows(workdir, "SELECT count(*) FROM assignees")[0][0] == 0
    assert rows(workdir, "SELECT high_water_mark FROM sync_state WHERE surface = 'issues'") == [
        (utc("2024-02-02T00:00:00Z"),)
    ]


def many_issues(count, repo="octo/big"):
    return [
        issue_node(n, repo=repo, updatedAt=f"2024-01-01T{n // 60:02d}:{n % 60:02d}:00Z")
        for n in range(1, count + 1)
    ]


@pytest.mark.slow
def test_fetch_pages_through_more_than_one_hundred_items(github, workdir, run):
    pulls = [
        pull_request_node(
            n, repo="octo/big", updatedAt=f"2024-03-01T{n // 60:02d}:{n % 60:02d}:00Z"
        )
        for n in range(1, 151)
    ]
    github.add_repo("octo/big", issues=many_issues(250), pull_requests=pulls)

    result = run("fetch", "--repo", "octo/big")

    assert result.exit_code == 0, result.output
    assert operations(github) == (
        ["Repository"] + ["Issues"] * 3 + ["PullRequests"] * 2 + ["Discussions", "Releases"]
    )
    assert rows(workdir, "SELECT count(*), count(DISTINCT number) FROM issues") == [(250, 250)]
    assert rows(workdir, "SELECT count(*) FROM pull_requests") == [(150,)]


@pytest.mark.slow
def test_pull_requests_stop_at_the_high_water_mark(github, workdir, run):
    pulls = [
        pull_request_node(
            n, repo="octo/big", updatedAt=f"2024-03-01T{n // 60:02d}:{n % 60:02d}:00Z"
        )
        for n in range(1, 251)
    ]
    github.add_repo("octo/big", pull_requests=pulls)
    assert run("fetch", "--repo", "octo/big").exit_code == 0
    pulls[9]["updatedAt"] = "2024-04-01T00:00:00Z"
    pulls[9]["title"] = "Edited"
    github.requests.clear()

    assert run("fetch", "--repo", "octo/big").exit_code == 0

    assert operations(github).count("PullRequests") == 1
    assert rows(workdir, "SELECT title FROM pull_requests WHERE number = 10") == [("Edited",)]
    assert rows(
        workdir, "SELECT high_water_mark FROM sync_state WHERE surface = 'pull_requests'"
    ) == [(utc("2024-04-01T00:00:00Z"),)]


@pytest.mark.slow
def test_error_mid_run_keeps_committed_pages_and_resumes_from_them(github, workdir, run):
    github.add_repo("octo/big", issues=many_issues(250))
    # Repository, Issues page 1 succeed; page 2 answers with a GraphQL error: that
    # surface's gap (#49), the other surfaces and repositories go on
    github.graphql_error_next("Internal error while loading issues.", after=2)

    partial = run("fetch", "--repo", "octo/big")

    assert partial.exit_code == 0, partial.output
    assert (
        "warning: skipped octo/big issues: GitHub answered with a GraphQL error: Internal "
        "error while loading issues. (read again on the next run)"
    ) in partial.stderr
    assert rows(workdir, "SELECT count(*), max(number) FROM issues") == [(100, 100)]
    mark = rows(workdir, "SELECT high_water_mark FROM sync_state WHERE surface = 'issues'")
    assert mark == [(utc("2024-01-01T01:40:00Z"),)]  # updatedAt of issue 100
    assert rows(workdir, "SELECT status, error FROM runs") == [("partial", None)]
    assert rows(workdir, "SELECT surface, node_id FROM fetch_gaps") == [("issues", "")]
    github.requests.clear()

    resumed = run("fetch", "--repo", "octo/big")

    assert resumed.exit_code == 0, resumed.output
    assert github.requests[1]["variables"]["since"] == "2024-01-01T01:35:00+00:00"
    assert rows(workdir, "SELECT count(*), count(DISTINCT number) FROM issues") == [(250, 250)]
    assert rows(workdir, "SELECT count(*) FROM fetch_gaps") == [(0,)]


def test_missing_token_fails_before_touching_anything(github, workdir, run, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")

    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 1
    assert result.stderr == (
        "Error: GITHUB_TOKEN is not set: export a token with read access to the "
        "repositories (GH_TOKEN works too)\n"
    )
    assert github.requests == []
    assert not (workdir / "state.duckdb").exists()


def test_gh_token_is_accepted(hello, run, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("GH_TOKEN", hello.token)

    assert run("fetch", "--repo", "octo/hello").exit_code == 0


def test_bad_token_leaves_the_state_as_it_was(hello, workdir, run, monkeypatch):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    before = rows(workdir, "SELECT * FROM issues")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_revoked")

    result = run("fetch", "--repo", "octo/hello", "--full")

    assert result.exit_code == 1
    assert result.stderr == (
        "Error: GitHub rejected the token (HTTP 401 Bad credentials): "
        "check that GITHUB_TOKEN holds a valid, unexpired token\n"
    )
    assert rows(workdir, "SELECT * FROM issues") == before
    assert rows(workdir, "SELECT count(*) FROM runs") == [(1,)]


def test_unknown_repo_fails_before_any_repo_is_written(hello, workdir, run):
    result = run("fetch", "--repo", "octo/hello", "--repo", "octo/nope")

    assert result.exit_code == 1
    assert result.stderr == (
        "Error: repository octo/nope not found, or the token cannot read it: "
        "check the name and the token's access\n"
    )
    assert operations(hello) == ["Repository", "Repository"]
    assert not (workdir / "state.duckdb").exists()


def test_server_errors_after_retries_give_one_line(hello, workdir, run):
    hello.fail_requests(n=1, status=502)

    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert "answered HTTP 502 after retries" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.slow
def test_transient_server_errors_are_retried(hello, workdir, run, monkeypatch):
    monkeypatch.setenv("GHINDEX_HTTP_RETRIES", "2")
    hello.fail_requests(n=1, status=502, after=1)

    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 0, result.output
    assert [r["status"] for r in hello.requests] == [200, 502, 200, 200, 200, 200]
    assert rows(workdir, "SELECT count(*) FROM issues") == [(1,)]


@pytest.mark.slow
def test_full_fetch_ignores_the_high_water_mark(hello, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    hello.requests.clear()

    assert run("fetch", "--repo", "octo/hello", "--full").exit_code == 0

    assert hello.requests[1]["variables"]["since"] is None


def test_repo_argument_is_validated_and_canonicalised(hello, workdir, run):
    for command in ("fetch", "update", "build"):  # a usage error: exit 2, before any work
        bad = run(command, "--repo", "not a repo")
        assert bad.exit_code == 2, command
        assert bad.stderr.splitlines()[-1] == (
            "Error: Invalid value for '--repo': not a repository: 'not a repo': use the form "
            "owner/name"
        )

    good = run("fetch", "--repo", "https://github.com/OCTO/Hello.git")
    assert good.exit_code == 0, good.output
    assert rows(workdir, "SELECT repo FROM repos") == [("octo/hello",)]


def test_fetch_without_repo_is_a_usage_error(github, run):
    result = run("fetch")
    assert result.exit_code == 2
    assert "give at least one --repo OWNER/NAME" in result.stderr


def test_repos_can_come_from_ghindex_toml(hello, workdir, run, isolated):
    (isolated / "ghindex.toml").write_text('repos = ["octo/hello"]\n')

    result = run("fetch", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["repos"][0]["repo"] == "octo/hello"


def test_org_fetches_the_repositories_the_settings_select(github, workdir, run, isolated):
    for name, fields in [
        ("encode/httpx", {}),
        ("encode/httpcore", {}),
        ("encode/old-thing", {"isArchived": True}),
        ("encode/forked", {"isFork": True}),
        ("encode/httpx-docs", {}),
        ("other/httpx", {}),
    ]:
        github.add_repo(name, issues=[issue_node(1, repo=name)], **fields)
    (isolated / "ghindex.toml").write_text('include = ["http*"]\nexclude = ["*-docs"]\n')

    result = run("fetch", "--org", "encode", "--json")

    assert result.exit_code == 0, result.output
    assert [r["repo"] for r in json.loads(result.stdout)["repos"]] == [
        "encode/httpcore",
        "encode/httpx",
    ]
    assert rows(workdir, "SELECT repo FROM issues ORDER BY 1") == [
        ("encode/httpcore",),
        ("encode/httpx",),
    ]


def test_org_switches_take_archived_repos_and_forks(github, run, isolated):
    github.add_repo("encode/old-thing", isArchived=True)
    github.add_repo("encode/forked", isFork=True)
    (isolated / "ghindex.toml").write_text("archived = true\nforks = true\n")

    result = run("fetch", "--org", "encode", "--json")

    assert result.exit_code == 0, result.output
    assert [r["repo"] for r in json.loads(result.stdout)["repos"]] == [
        "encode/forked",
        "encode/old-thing",
    ]


def test_an_org_with_nothing_selected_or_unknown_says_so(github, run):
    github.add_repo("encode/old-thing", isArchived=True)

    nothing = run("fetch", "--org", "encode")
    assert nothing.exit_code == 1
    assert nothing.stderr == (
        "Error: encode has no repositories that the include/exclude/archived/forks settings "
        "select: check them in ghindex.toml\n"
    )
    store = Path("store")
    published = run("update", "--org", "encode", "--store", str(store))  # the same for update
    assert (published.exit_code, published.stderr) == (1, nothing.stderr)
    assert not store.exists() or not any(store.rglob("*.json"))  # nothing published
    unknown = run("fetch", "--org", "nobody")
    assert unknown.exit_code == 1
    assert unknown.stderr == (
        "Error: organisation or user 'nobody' not found, or the token cannot see it: "
        "check the name and the token's access\n"
    )
