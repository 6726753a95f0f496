"""Long-running commands stop when asked (issue #31): `ghindex serve` in a terminal and
over HTTP ends on Ctrl-C (SIGINT) or SIGTERM within seconds, with one line and the
shells' exit statuses (130, 143), and an HTTP server names its address and answers a
stray path with where clients connect. A `fetch` or `build` stopped mid-run says its
work is kept, and the same command run again finishes it: every item stored once, an
index that answers. Real processes, real signals."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import mcp
import pytest

from testkit.github_server import comment_node, issue_node, pull_request_node
from testkit.state import built_workdir, rows, settings_for, store_issues

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return built_workdir(tmp_path_factory.mktemp("interrupt") / "work", 3)


def as_from_a_terminal() -> None:
    """A shell's background job (`cmd &`, nohup) starts with SIGINT ignored, and Python
    keeps it so: the child is given Ctrl-C's default back, as a terminal would have it,
    so that these tests test ghindex and not how the suite was started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def serve(args: list[str], **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "ghindex", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=as_from_a_terminal,
        **kwargs,
    )


def read_until(stream, pattern: str, deadline: float = 60.0) -> str:
    """stderr lines until one matches `pattern` (the server is up), or fail."""
    seen = ""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        line = stream.readline().decode("utf-8", "replace")
        if not line:
            break
        seen += line
        if re.search(pattern, line):
            return seen
    pytest.fail(f"no line matching {pattern!r} in: {seen!r}")


def stop(process: subprocess.Popen, signum: int) -> tuple[int, float, str]:
    started = time.monotonic()
    process.send_signal(signum)
    try:
        _, err = process.communicate(timeout=15)
    finally:
        process.kill()
    return process.returncode, time.monotonic() - started, err.decode("utf-8", "replace")


def test_serve_in_a_terminal_says_it_waits_and_stops_on_ctrl_c(workdir):
    controller, terminal = pty.openpty()
    try:
        process = serve(["--snapshot", str(workdir)], stdin=terminal)
        read_until(process.stderr, r"waiting for a client on stdin")
        code, took, rest = stop(process, signal.SIGINT)
    finally:
        os.close(controller)
        os.close(terminal)

    assert code == 130
    assert took < 5, took  # within a second on an idle machine
    assert rest.strip().splitlines() == ["stopped: the server has shut down"], rest
    assert "Traceback" not in rest


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_http_serve_names_its_address_points_strays_at_mcp_and_stops(workdir, signum, status):
    process = serve(["--snapshot", str(workdir), "--transport", "http", "--port", "0"])
    seen = read_until(process.stderr, r"MCP server on http://127\.0\.0\.1:\d+/mcp")
    url = re.search(r"http://127\.0\.0\.1:\d+/mcp", seen).group(0)
    try:

        async def session():
            async with mcp.Client(url) as client:
                return await client.call_tool("status", {})

        assert asyncio.run(session()).structured_content["status"] == "serving"
        with pytest.raises(urllib.error.HTTPError) as stray:
            urllib.request.urlopen(url.removesuffix("/mcp") + "/", timeout=10)
        assert stray.value.code == 404
        body = json.loads(stray.value.read())
        assert body["endpoint"] == url and "/mcp" in body["error"]
    finally:
        code, took, rest = stop(process, signum)

    assert code == status
    assert took < 5, took
    assert "Traceback" not in rest


def test_a_port_in_use_is_one_line_naming_port(workdir):
    first = serve(["--snapshot", str(workdir), "--transport", "http", "--port", "0"])
    seen = read_until(first.stderr, r"MCP server on http://127\.0\.0\.1:\d+/mcp")
    port = re.search(r"127\.0\.0\.1:(\d+)/mcp", seen).group(1)
    try:
        second = serve(["--snapshot", str(workdir), "--transport", "http", "--port", port])
        _, err = second.communicate(timeout=60)
    finally:
        stop(first, signal.SIGTERM)

    assert second.returncode == 1
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "--port" in lines[0], lines


INTERRUPTED = "interrupted: the work done so far is kept; run the same command again to go on"


def ghindex(args: list[str], workdir) -> subprocess.Popen:
    """`ghindex ARGS` in its own process on `workdir`; stderr is a pipe, progress a line
    at every step."""
    env = {
        **os.environ,
        "GHINDEX_WORKDIR": str(workdir),
        "GHINDEX_PROGRESS_SECONDS": "0",
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "ghindex", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=as_from_a_terminal,
    )


def finished(process: subprocess.Popen) -> str:
    """stdout of a process that must succeed."""
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err.decode("utf-8", "replace")
    return out.decode("utf-8", "replace")


def stopped_by_ctrl_c(process: subprocess.Popen, seen: str = "") -> None:
    """Send Ctrl-C to a resumable command: it ends within seconds, exit 130, its last
    line saying the work is kept, and no traceback."""
    code, took, err = stop(process, signal.SIGINT)
    assert code == 130, seen + err
    assert took < 5, took
    assert err.strip().splitlines()[-1] == INTERRUPTED, err
    assert "Traceback" not in err


def stored(workdir) -> dict[str, list[str]]:
    """Every handle in the state's item tables, sorted."""
    return {
        table: [h for (h,) in rows(workdir, f"SELECT handle FROM {table} ORDER BY handle")]
        for table in ("issues", "pull_requests", "comments")
    }


def test_a_fetch_stopped_by_ctrl_c_says_so_and_a_rerun_stores_everything_once(github, isolated):
    github.add_repo(
        "octo/big",
        issues=[issue_node(n, repo="octo/big", comments=[comment_node(n)]) for n in range(1, 501)],
        pull_requests=[pull_request_node(n, repo="octo/big") for n in range(501, 651)],
    )
    reference = isolated / "reference"
    finished(ghindex(["fetch", "--repo", "octo/big"], reference))
    expected = stored(reference)
    assert [len(v) for v in expected.values()] == [500, 150, 500]

    github.requests.clear()
    github.slow_requests(n=1000, seconds=0.3)  # a page every 0.3 s: several seconds of paging
    workdir = isolated / "work"
    fetch = ghindex(["fetch", "--repo", "octo/big"], workdir)
    deadline = time.monotonic() + 60
    while sum(r["operation"] == "Issues" for r in github.requests) < 3:
        assert fetch.poll() is None, "the fetch ended before it was interrupted"
        assert time.monotonic() < deadline, "the fetch never reached its third page"
        time.sleep(0.02)
    stopped_by_ctrl_c(fetch)

    kept = rows(workdir, "SELECT count(*), count(DISTINCT handle) FROM issues")[0]
    assert kept[0] == kept[1] and 0 < kept[0] < 500, kept  # some pages kept, none twice

    github.clear_faults()  # the rerun opens the state the interrupted run left
    finished(ghindex(["fetch", "--repo", "octo/big"], workdir))

    assert stored(workdir) == expected
    assert rows(workdir, "SELECT status FROM runs ORDER BY started_at DESC LIMIT 1") == [("ok",)]


def test_a_build_stopped_while_embedding_says_so_and_a_rerun_finishes_it(isolated):
    workdir = isolated / "work"
    store_issues(
        settings_for(workdir),
        [
            issue_node(n, title=f"Issue {n} about topic {n % 7}", body="Words here. " * 40)
            for n in range(1, 1201)
        ],
    )
    build = ghindex(["build"], workdir)
    seen = read_until(build.stderr, r"[1-9][\d,]* / [\d,]+ rows embedded", deadline=120)
    stopped_by_ctrl_c(build, seen)

    assert not (workdir / "manifest.json").exists()  # no index yet: nothing half-made serves

    finished(ghindex(["build"], workdir))
    found = json.loads(finished(ghindex(["search", "Issue 77 about topic 0", "--json"], workdir)))

    assert "octo/hello#77" in [hit["handle"] for hit in found["results"]]


def test_the_demo_stopped_by_ctrl_c_says_so_and_a_rerun_finishes_it(isolated):
    workdir = isolated / "work"
    demo = ghindex(["demo"], workdir)
    # past the first step of embedding (256 rows), which a stopped build hands over
    seen = read_until(demo.stderr, r"[3-9]\d\d / [\d,]+ rows embedded", deadline=120)
    stopped_by_ctrl_c(demo, seen)

    assert not (workdir / "demo" / "manifest.json").exists()  # no half-made demo reads

    said = finished(ghindex(["demo"], workdir))
    found = json.loads(finished(ghindex(["search", "betamax", "--json"], workdir)))

    assert "Next, as typed" in said
    cached = re.search(r"\((\d+) embedded, (\d+) from the cache\)", said)
    assert cached and int(cached.group(2)) > 0, said  # what the stopped run embedded is kept
    assert found["results"], found
