"""Long-running commands stop when asked (issue #31): `ghindex serve` in a terminal and
over HTTP ends on Ctrl-C (SIGINT) or SIGTERM within seconds, with one line and the
shells' exit statuses (130, 143), and an HTTP server names its address and answers a
stray path with where clients connect. Real processes, real signals."""

from __future__ import annotations

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

import pytest

from testkit.state import built_workdir

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return built_workdir(tmp_path_factory.mktemp("interrupt") / "work", 3)


def serve(args: list[str], **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "ghindex", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
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
