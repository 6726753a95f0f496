"""Every GitHub surface lands in its contract table, nested connections are read
to their end, links land in `edges`, and items confirmed gone leave the state."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from testkit.github_server import (
    comment_node,
    discussion_comment_node,
    discussion_node,
    event,
    issue_node,
    pull_request_node,
    ref,
    release_node,
    review_comment_node,
    review_node,
    thread_node,
)
from testkit.state import operations, rows


@pytest.fixture
def workdir(isolated):
    return isolated / "work"


def long_issue():
    """An issue with 150 comments and 115 link events: more than one page of each."""
    comments = [comment_node(i, body=f"comment {i}") for i in range(1, 151)]
    comments[4]["body"] = "Same as #9 and octo/other#3, see https://github.com/octo/hello/pull/2"
    events = [
        event("CrossReferencedEvent", i, source=ref("octo/hello", 100 + i), willCloseTarget=False)
        for i in range(1, 111)
    ]
    events += [
        event(
            "MarkedAsDuplicateEvent",
            40,
            duplicate=ref("octo/hello", 1),
            canonical=ref("octo/hello", 7),
        ),
        event(
            "ConnectedEvent",
            41,
            source=ref("octo/hello", 2, "PullRequest"),
            subject=ref("octo/hello", 1),
        ),
        event(
            "ReferencedEvent",
            42,
            commit={"oid": "d" * 40},
            commitRepository={"nameWithOwner": "octo/hello"},
        ),
        event("ClosedEvent", 43, closer=ref("octo/hello", 2, "PullRequest")),
        event(
            "CrossReferencedEvent",
            44,
            source=ref("elsewhere/app", 5, "PullRequest"),
            willCloseTarget=True,
        ),
    ]
    return issue_node(
        1,
        body="Broken since #4.\n\n```\nnot a ref #99\n```",
        comments=comments,
        timelineItems=events,
        parent=ref("octo/hello", 50),
        updatedAt="2024-01-01T00:00:00Z",
    )


def big_pull():
    """A pull request with more reviews, threads, thread comments and commits than
    the list query's first page holds."""
    threads = [
        thread_node(
            f"t{t}",
            [
                review_comment_node(
                    t * 100 + c, body=f"note {t}.{c}", pullRequestReview={"databaseId": 1}
                )
                for c in range(1, 3)
            ],
        )
        for t in range(1, 13)
    ]
    threads[0]["comments"] = [
        review_comment_node(
            5000 + c,
            body=f"long thread {c}: the retry loop needs a limit",
            replyTo={"databaseId": 5001} if c > 1 else None,
        )
        for c in range(1, 16)
    ]
    threads[0].update(isResolved=True, isOutdated=True, resolvedBy={"login": "maintainer"})
    return pull_request_node(
        2,
        body="Fixes #1",
        state="MERGED",
        merged=True,
        mergedAt="2024-01-05T00:00:00Z",
        updatedAt="2024-01-05T00:00:00Z",
        mergeCommit={"oid": "e" * 40},
        reviews=[
            review_node(
                i,
                "APPROVED" if i == 60 else "COMMENTED",
                body="Approved once the regression test is in." if i == 60 else "",
            )
            for i in range(1, 61)
        ],
        reviewThreads=threads,
        closingIssuesReferences=[ref("octo/hello", 1)],
        commits=[{"commit": {"oid": f"{i:040x}"}} for i in range(1, 61)],
        comments=[comment_node(9000, body="LGTM, thanks")],
    )


def discussion():
    replies = [discussion_comment_node(300 + i, body=f"reply {i}") for i in range(1, 13)]
    answer = discussion_comment_node(
        201, body="Use the --full flag to rebuild it all.", isAnswer=True, replies=replies
    )
    others = [discussion_comment_node(201 + i, body=f"idea {i}") for i in range(1, 25)]
    return discussion_node(
        9,
        title="How do I rebuild?",
        body="Asking for #1",
        comments=[answer, *others],
        answer={"databaseId": 201},
        answerChosenAt="2024-01-06T00:00:00Z",
        answerChosenBy={"__typename": "User", "login": "maintainer"},
        labels={"nodes": [{"name": "question", "color": "fff", "description": None}]},
        updatedAt="2024-01-06T00:00:00Z",
    )


@pytest.fixture
def rich(github):
    github.add_repo(
        "octo/hello",
        issues=[long_issue()],
        pull_requests=[big_pull()],
        discussions=[discussion()],
        releases=[
            release_node("v1.0", description="Fixed #1 (#2)", publishedAt="2024-01-07T00:00:00Z"),
            release_node("v0.9", createdAt="2023-12-01T00:00:00Z"),
        ],
    )
    return github


@pytest.mark.slow
def test_every_surface_lands_in_its_table(rich, workdir, run):
    result = run("fetch", "--repo", "octo/hello", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["repos"][0] == {
        "repo": "octo/hello",
        "issues": 1,
        "pull_requests": 1,
        "discussions": 1,
        "releases": 2,
        "deleted": [],
        "transferred": [],
        "inaccessible": [],
        "hidden": [],
        "held_back": [],
        "skipped": [],
        "renamed_from": None,
        "partial": False,
    }
    counts = rows(
        workdir,
        "SELECT (SELECT count(*) FROM comments WHERE parent_type = 'issue'), "
        "(SELECT count(*) FROM comments WHERE parent_type = 'pull_request'), "
        "(SELECT count(*) FROM comments WHERE parent_type = 'discussion'), "
        "(SELECT count(*) FROM reviews), (SELECT count(*) FROM review_comments), "
        "(SELECT count(*) FROM releases), (SELECT count(*) FROM discussions)",
    )
    assert counts == [(150, 1, 37, 60, 37, 2, 1)]


def test_nested_connections_are_paged_not_truncated(rich, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0

    assert sorted(set(operations(rich))) == sorted(
        [
            "Repository",
            "Issues",
            "IssueComments",
            "TimelineItems",
            "PullRequests",
            "PullRequestReviews",
            "ReviewThreads",
            "ReviewThreadComments",
            "PullRequestCommits",
            "Discussions",
            "DiscussionComments",
            "DiscussionReplies",
            "Releases",
        ]
    )
    # 150 comments: the first 100 inline, then one page of up to 100
    assert operations(rich).count("IssueComments") == 1
    assert operations(rich).count("ReviewThreadComments") == 1


def test_comment_rows_are_exact(rich, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0

    first = rows(
        workdir,
        "SELECT handle, parent_handle, number, author, author_association, body "
        "FROM comments WHERE parent_type = 'issue' ORDER BY database_id LIMIT 2",
    )
    assert first == [
        ("octo/hello#1/comment/1", "octo/hello#1", 1, "octocat", "CONTRIBUTOR", "comment 1"),
        ("octo/hello#1/comment/2", "octo/hello#1", 1, "octocat", "CONTRIBUTOR", "comment 2"),
    ]
    discussion_rows = rows(
        workdir,
        "SELECT handle, reply_to, is_answer FROM comments WHERE parent_type = 'discussion' "
        "AND database_id IN (201, 301) ORDER BY database_id",
    )
    assert discussion_rows == [
        ("octo/hello#9/comment/201", None, True),
        ("octo/hello#9/comment/301", "octo/hello#9/comment/201", False),
    ]
    assert rows(
        workdir,
        "SELECT handle, category, answer_handle, answer_chosen_by, state FROM discussions",
    ) == [("octo/hello#9", "Q&A", "octo/hello#9/comment/201", "maintainer", "OPEN")]
    assert rows(workdir, "SELECT label FROM issue_labels WHERE handle = 'octo/hello#9'") == [
        ("question",)
    ]


def test_reviews_and_review_threads(rich, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0

    assert rows(workdir, "SELECT state, count(*) FROM reviews GROUP BY ALL ORDER BY 1") == [
        ("APPROVED", 1),
        ("COMMENTED", 59),
    ]
    long_thread = rows(
        workdir,
        "SELECT handle, reply_to, path, is_resolved, is_outdated, resolved_by "
        "FROM review_comments WHERE database_id IN (5001, 5015) ORDER BY database_id",
    )
    assert long_thread == [
        ("octo/hello#2/review-comment/5001", None, "src/app.py", True, True, "maintainer"),
        (
            "octo/hello#2/review-comment/5015",
            "octo/hello#2/review-comment/5001",
            "src/app.py",
            True,
            True,
            "maintainer",
        ),
    ]
    assert rows(
        workdir, "SELECT review_handle, diff_hunk FROM review_comments WHERE database_id = 201"
    ) == [("octo/hello#2/review/1", "@@ -1,3 +1,4 @@\n+import os")]


def test_releases(rich, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0

    assert rows(workdir, "SELECT handle, tag, body, tag_commit FROM releases ORDER BY tag") == [
        ("octo/hello@release/v0.9", "v0.9", "", "c" * 40),
        ("octo/hello@release/v1.0", "v1.0", "Fixed #1 (#2)", "c" * 40),
    ]


def test_links_land_in_edges_with_their_provenance(rich, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0

    edges = rows(
        workdir,
        "SELECT src, dst, kind, source_handle, source_field FROM edges "
        "WHERE kind <> 'cross_references' OR src NOT LIKE 'octo/hello#%' ORDER BY ALL",
    )
    commit_edges = [e for e in edges if e[2] == "commit_in_pr"]
    assert len(commit_edges) == 61  # 60 commits + the merge commit
    assert [e for e in edges if e[2] != "commit_in_pr"] == [
        (
            "elsewhere/app#5",
            "octo/hello#1",
            "closes",
            "octo/hello#1",
            "timeline:CrossReferencedEvent",
        ),
        (
            "elsewhere/app#5",
            "octo/hello#1",
            "cross_references",
            "octo/hello#1",
            "timeline:CrossReferencedEvent",
        ),
        ("octo/hello#1", "octo/hello#2", "mentions", "octo/hello#1/comment/5", "comment"),
        ("octo/hello#1", "octo/hello#4", "mentions", "octo/hello#1", "body"),
        ("octo/hello#1", "octo/hello#50", "sub_issue_of", "octo/hello#1", "parent"),
        (
            "octo/hello#1",
            "octo/hello#7",
            "duplicate_of",
            "octo/hello#1",
            "timeline:MarkedAsDuplicateEvent",
        ),
        ("octo/hello#1", "octo/hello#9", "mentions", "octo/hello#1/comment/5", "comment"),
        ("octo/hello#1", "octo/other#3", "mentions", "octo/hello#1/comment/5", "comment"),
        ("octo/hello#2", "octo/hello#1", "closes", "octo/hello#1", "timeline:ClosedEvent"),
        ("octo/hello#2", "octo/hello#1", "closes", "octo/hello#2", "body"),  # "Fixes #1"
        ("octo/hello#2", "octo/hello#1", "closes", "octo/hello#2", "closingIssuesReferences"),
        ("octo/hello#2", "octo/hello#1", "connected", "octo/hello#1", "timeline:ConnectedEvent"),
        ("octo/hello#2", "octo/hello#1", "mentions", "octo/hello#2", "body"),
        ("octo/hello#9", "octo/hello#1", "mentions", "octo/hello#9", "body"),
        (
            "octo/hello@" + "d" * 40,
            "octo/hello#1",
            "references",
            "octo/hello#1",
            "timeline:ReferencedEvent",
        ),
        (
            "octo/hello@release/v1.0",
            "octo/hello#1",
            "mentions",
            "octo/hello@release/v1.0",
            "release",
        ),
        (
            "octo/hello@release/v1.0",
            "octo/hello#2",
            "mentions",
            "octo/hello@release/v1.0",
            "release",
        ),
    ]
    cross = rows(workdir, "SELECT count(*) FROM edges WHERE kind = 'cross_references'")
    assert cross == [(111,)]


@pytest.mark.slow
def test_a_refetched_item_replaces_its_comments_and_links(rich, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    issue = rich.repos["octo/hello"]["issues"][0]
    issue["comments"] = [c for c in issue["comments"] if c["databaseId"] != 5]  # deleted
    issue["comments"].append(comment_node(500, body="now #12"))
    issue["updatedAt"] = "2024-03-01T00:00:00Z"

    assert run("fetch", "--repo", "octo/hello").exit_code == 0

    assert rows(workdir, "SELECT count(*) FROM comments WHERE parent_handle = 'octo/hello#1'") == [
        (150,)
    ]
    assert rows(
        workdir, "SELECT count(*) FROM comments WHERE handle = 'octo/hello#1/comment/5'"
    ) == [(0,)]
    mentions = rows(
        workdir,
        "SELECT dst, source_handle FROM edges WHERE kind = 'mentions' AND src = 'octo/hello#1' "
        "ORDER BY ALL",
    )
    assert mentions == [
        ("octo/hello#12", "octo/hello#1/comment/500"),
        ("octo/hello#4", "octo/hello#1"),
    ]


@pytest.mark.slow
def test_a_deleted_release_leaves_on_the_next_run(rich, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    rich.repos["octo/hello"]["releases"].pop(0)

    assert run("fetch", "--repo", "octo/hello").exit_code == 0

    assert rows(workdir, "SELECT tag FROM releases") == [("v0.9",)]
    assert rows(workdir, "SELECT count(*) FROM edges WHERE source_field = 'release'") == [(0,)]


@pytest.mark.slow
def test_deletions_are_confirmed_per_item_and_only_with_full(github, workdir, run):
    github.add_repo(
        "octo/hello", issues=[issue_node(n, comments=[comment_node(n)]) for n in range(1, 6)]
    )
    github.add_repo("octo/new-home")
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    issues = github.repos["octo/hello"]["issues"]
    deleted = issues.pop(1)  # #2 deleted on GitHub
    moved = issues.pop(2)  # #4 transferred to another repository
    github.repos["octo/new-home"]["issues"].append({**moved, "number": 1})

    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    assert rows(workdir, "SELECT count(*) FROM issues") == [(5,)]  # never inferred

    result = run("fetch", "--repo", "octo/hello", "--full", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["repos"][0]
    assert (report["deleted"], report["transferred"]) == (["octo/hello#2"], ["octo/hello#4"])
    assert rows(workdir, "SELECT number FROM issues ORDER BY 1") == [(1,), (3,), (5,)]
    assert rows(workdir, "SELECT count(*) FROM comments WHERE number IN (2, 4)") == [(0,)]
    nodes_request = [r for r in github.requests if r["operation"] == "Nodes"]
    assert len(nodes_request) == 1
    assert sorted(nodes_request[0]["variables"]["ids"]) == sorted([deleted["id"], moved["id"]])


def test_a_failed_confirmation_deletes_nothing(github, workdir, run):
    github.add_repo("octo/hello", issues=[issue_node(1), issue_node(2)])
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    github.repos["octo/hello"]["issues"].pop()
    # Repository, Issues, PullRequests, Discussions, Releases succeed; Nodes fails
    github.graphql_error_next("Something went wrong while executing your query.", after=5)

    result = run("fetch", "--repo", "octo/hello", "--full")

    assert result.exit_code == 1
    assert rows(workdir, "SELECT count(*) FROM issues") == [(2,)]


def test_sample_times_are_timezone_aware(rich, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    (created,) = rows(workdir, "SELECT created_at FROM reviews WHERE database_id = 1")[0]
    assert created == datetime(2015, 1, 1, 1, tzinfo=UTC)


@pytest.mark.slow
def test_every_fetched_surface_is_searchable_with_its_own_type(rich, workdir, run):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    built = run("build", "--json")
    assert built.exit_code == 0, built.output
    assert set(json.loads(built.stdout)["counts"]) == {
        "issue",
        "pull_request",
        "discussion",
        "issue_comment",
        "pr_review",
        "pr_review_comment",
        "release",
    }

    answer = run(
        "search", "Use the --full flag", "--type", "issue_comment", "--mode", "sparse", "--json"
    )
    top = json.loads(answer.stdout)["results"][0]
    assert (top["handle"], top["entity"], top["entity_type"]) == (
        "octo/hello#9/comment/201",
        "octo/hello#9",
        "discussion",
    )
    release = run("search", "v1.0", "--type", "release", "--json")
    assert json.loads(release.stdout)["results"][0]["entity"] == "octo/hello@release/v1.0"
    fixed = run("search", "octo/hello#1", "--json")
    issue = json.loads(fixed.stdout)["results"][0]
    assert (issue["entity"], issue["exact"]) == ("octo/hello#1", True)
    assert issue["fixed_by"] == ["elsewhere/app#5", "octo/hello#2"]  # cross-repo fixers count
