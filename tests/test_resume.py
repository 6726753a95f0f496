"""A fetch killed with SIGKILL in the middle of paging resumes on the next run
with nothing lost and nothing stored twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from testkit.github_server import (
    comment_node,
    format_time,
    issue_node,
    parse_time,
    pull_request_node,
)
from testkit.state import rows


def stamp(n):
    return format_time(parse_time("2024-01-01T00:00:00Z") + timedelta(minutes=n))


@pytest.mark.slow
def test_kill_9_mid_paging_then_resume(github, isolated, run):
    workdir = isolated / "work"
    github.add_repo(
        "octo/big",
        issues=[
            issue_node(n, repo="octo/big", updatedAt=stamp(n), comments=[comment_node(n)])
            for n in range(1, 601)
        ],
        pull_requests=[
            pull_request_node(n, repo="octo/big", updatedAt=stamp(n)) for n in range(601, 851)
        ],
    )
    github.slow_requests(n=1000, seconds=0.25)
    env = {**os.environ, "GHINDEX_WORKDIR": str(workdir)}
    fetch = subprocess.Popen(
        [sys.executable, "-m", "ghindex", "fetch", "--repo", "octo/big"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while sum(r["operation"] == "Issues" for r in github.requests) < 4:
        assert fetch.poll() is None, "the fetch ended before it could be killed"
        assert time.monotonic() < deadline, "the fetch never reached its fourth page"
        time.sleep(0.02)
    fetch.send_signal(signal.SIGKILL)
    assert fetch.wait(timeout=10) == -signal.SIGKILL

    stored, newest = rows(workdir, "SELECT count(*), max(updated_at) FROM issues")[0]
    assert stored in (300, 400)  # pages 1-3 committed, page 4 maybe
    mark = rows(workdir, "SELECT high_water_mark FROM sync_state WHERE surface = 'issues'")
    assert mark == [(newest,)]
    assert rows(workdir, "SELECT count(*) FROM comments") == [(stored,)]
    assert rows(workdir, "SELECT count(*) FROM runs") == [(0,)]  # killed: no record

    github.clear_faults()
    github.requests.clear()
    result = run("fetch", "--repo", "octo/big")

    assert result.exit_code == 0, result.output
    first = next(r for r in github.requests if r["operation"] == "Issues")
    assert parse_time(first["variables"]["since"].replace("+00:00", "Z")) == newest - timedelta(
        minutes=5
    )
    assert rows(
        workdir, "SELECT count(*), count(DISTINCT handle), min(number), max(number) FROM issues"
    ) == [(600, 600, 1, 600)]
    assert rows(workdir, "SELECT count(*), count(DISTINCT handle) FROM comments") == [(600, 600)]
    assert rows(workdir, "SELECT count(*) FROM pull_requests") == [(250,)]
    assert rows(workdir, "SELECT status FROM runs") == [("ok",)]
