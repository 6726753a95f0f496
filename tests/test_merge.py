"""Shards built separately merge into one index with no embedding."""

from __future__ import annotations

import json

import pytest

from ghindex.index.build import build
from testkit.github_server import comment_node, issue_node
from testkit.state import rows, settings_for, store_issues


@pytest.mark.slow
def test_shards_merge_without_embedding_again(isolated, run):
    for name, repo in (("a", "octo/alpha"), ("b", "octo/beta")):
        shard = settings_for(isolated / "shards" / name)
        store_issues(
            shard,
            [
                issue_node(
                    n,
                    repo=repo,
                    title=f"{repo} issue {n}",
                    body=f"Text of {repo} #{n}.",
                    comments=[comment_node(n * 10, body=f"A comment long enough on {n}.")],
                )
                for n in range(1, 4)
            ],
            repo=repo,
        )
        build(shard)

    result = run("merge", str(isolated / "shards" / "a"), str(isolated / "shards" / "b"), "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["built"]["embedded"] == 0
    assert report["built"]["counts"] == {"issue": 6, "issue_comment": 6}
    assert report["merged"]["rows"]["issues"] == 6
    workdir = isolated / "work"
    assert rows(workdir, "SELECT repo, count(*) FROM issues GROUP BY 1 ORDER BY 1") == [
        ("octo/alpha", 3),
        ("octo/beta", 3),
    ]
    assert rows(workdir, "SELECT repo FROM repos ORDER BY 1") == [("octo/alpha",), ("octo/beta",)]
    assert rows(workdir, "SELECT count(*) FROM comments") == [(6,)]
    found = run("search", "Text of octo/beta #2", "--mode", "sparse", "--json")
    assert json.loads(found.stdout)["results"][0]["handle"] == "octo/beta#2"

    again = run("merge", str(isolated / "shards" / "a"), "--json")  # idempotent
    assert json.loads(again.stdout)["built"]["embedded"] == 0
    assert rows(workdir, "SELECT count(*) FROM issues") == [(6,)]


def test_merge_refuses_what_is_not_a_workdir(isolated, run):
    (isolated / "empty").mkdir()
    result = run("merge", str(isolated / "empty"))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {isolated / 'empty'} holds no state.duckdb: is it a ghindex workdir?\n"
    )
