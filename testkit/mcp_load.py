"""Load on a `ghindex serve --transport http` process on 127.0.0.1: a flood of bare
`initialize` calls from one client, sessions opened and abandoned with an answer each,
and the server's resident memory read from /proc. Shared by `tests/test_sessions.py`
and `bench/bench_sessions.py`."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2

# The handshake's protocol (2025-11-25): the one that opens a session on a server
# that keeps them. Clients of the current protocol never do.
HANDSHAKE = "2025-11-25"
ACCEPT = {"Accept": "application/json, text/event-stream"}


def initialize(request_id: int = 1) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "0"},
        },
    }


def call(tool: str, arguments: dict, request_id: int = 2) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def busy_workdir(path: Path) -> Path:
    """A built workdir at `path`: octo/hello#1 with 400 comments of 600 characters (kept
    in the state, not indexed: the build embeds one issue)."""
    from dataclasses import replace

    from ghindex.index.build import build
    from testkit.github_server import comment_node, issue_node
    from testkit.state import settings_for, store_issues

    settings = replace(settings_for(path), skip_types=("issue_comment",))  # one to embed
    comments = [
        comment_node(1000 + n, body=f"Comment {n}. " + "Same here. " * 55) for n in range(400)
    ]
    store_issues(
        settings, [issue_node(1, title="Crash on startup", body="It crashes.", comments=comments)]
    )
    build(settings)
    return path


# A large answer: that issue, as much of it as the answer budget holds.
LARGE = ("fetch", {"handles": ["octo/hello#1"], "max_chars": 200_000})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(snapshot: Path, home: Path, **env: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """`ghindex serve --snapshot SNAPSHOT --transport http` on 127.0.0.1 (the `ghindex` of
    this interpreter's path), its stderr in HOME/serve.stderr; stopped on leaving."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GHINDEX_", "GH_TOKEN"))}
    clean.update(HF_HUB_OFFLINE="1", GHINDEX_WORKDIR=str(home / "work"), **env)
    argv = [sys.executable, "-m", "ghindex", "serve", "--snapshot", str(snapshot)]
    argv += ["--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    url = f"http://127.0.0.1:{port}/mcp"
    with open(home / "serve.stderr", "w") as errlog:
        process = subprocess.Popen(
            argv, env=clean, stdout=subprocess.DEVNULL, stderr=errlog, cwd=home
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                assert process.poll() is None, (home / "serve.stderr").read_text()
                try:
                    httpx2.get(url, timeout=1)
                    break
                except httpx2.TransportError:
                    assert time.monotonic() < deadline, "ghindex serve did not start"
                    time.sleep(0.1)
            yield process, url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:  # a server holding thousands of sessions
                process.kill()
                process.wait()


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid`, in MiB."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def flood(url: str, count: int) -> dict[int, int]:
    """`count` bare `initialize` calls from one client (one connection, kept alive), as
    fast as the server answers: how many got each HTTP status."""
    statuses: dict[int, int] = {}
    with httpx2.Client(timeout=30) as client:
        for n in range(count):
            status = client.post(url, json=initialize(n), headers=ACCEPT).status_code
            statuses[status] = statuses.get(status, 0) + 1
    return statuses


def abandon(url: str, count: int, tool: str, arguments: dict) -> list[int]:
    """`count` sessions opened with the handshake, each given one tool call and then left
    (never deleted): the answers' sizes in bytes."""
    sizes = []
    with httpx2.Client(timeout=60) as client:
        for n in range(count):
            opened = client.post(url, json=initialize(n), headers=ACCEPT)
            headers = dict(ACCEPT, **{"mcp-protocol-version": HANDSHAKE})
            session = opened.headers.get("mcp-session-id")
            if session:
                headers["mcp-session-id"] = session
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            client.post(url, json=done, headers=headers)
            answered = client.post(url, json=call(tool, arguments, n), headers=headers)
            sizes.append(len(answered.content))
    return sizes
