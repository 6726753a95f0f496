"""`ghindex serve --transport http` keeps no sessions (`serve/server.py`, STATELESS): a
flood of bare `initialize` calls from one client cannot fill a table and lock out the
next client, and a client that opens sessions and walks away leaves no answers behind.

The load is real: a `ghindex serve` process on 127.0.0.1 and plain HTTP requests. The
issue's figures are 10,000 `initialize` calls and 1,000 abandoned sessions; on a
shared 2-core machine those take minutes, so the test sends fewer (FLOOD, ABANDONED;
`GHINDEX_LOAD=full` sends the issue's). The count does not change what is checked:
with no session table there is nothing to fill, which the test checks directly (no
answer carries a session id), and memory is compared per abandoned session.
`bench/bench_sessions.py` measures the full figures (bench/README.md, "Sessions")."""

from __future__ import annotations

import asyncio
import os
import time

import httpx2
import mcp
import pytest

from testkit.mcp_load import (
    ACCEPT,
    HANDSHAKE,
    LARGE,
    abandon,
    busy_workdir,
    flood,
    http_server,
    initialize,
    rss_mb,
)

pytestmark = pytest.mark.slow  # a built snapshot, a server process and thousands of requests

FULL = os.environ.get("GHINDEX_LOAD") == "full"
FLOOD = 10_000 if FULL else 1_000
ABANDONED = 1_000 if FULL else 150


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("sessions")
    snapshot = busy_workdir(home / "snap")
    with http_server(snapshot, home, GHINDEX_MCP_MAX_TOKENS="20000") as (process, url):
        yield process, url


async def one_client(url: str, mode: str = "2026-07-28") -> tuple[float, dict]:
    started = time.perf_counter()
    async with mcp.Client(url, mode=mode) as client:
        answered = await client.call_tool("status", {})
    assert not answered.is_error, answered.content[0].text
    return time.perf_counter() - started, answered.structured_content


def test_the_handshake_opens_no_session_and_other_methods_are_refused(served):
    _, url = served
    opened = httpx2.post(url, json=initialize(), headers=ACCEPT)

    assert opened.status_code == 200
    assert "mcp-session-id" not in opened.headers
    for method in ("GET", "DELETE"):
        refused = httpx2.request(method, url, headers=ACCEPT, timeout=5)
        assert refused.status_code == 405 and refused.headers["allow"] == "POST"
        assert "POST" in refused.json()["error"]


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_clients_of_both_protocols_are_served(served, mode):
    _, url = served

    _, status = asyncio.run(one_client(url, mode))

    assert status["status"] == "serving"


def test_a_flood_of_initialize_calls_leaves_the_next_client_served_at_once(served):
    process, url = served
    before = rss_mb(process.pid)

    statuses = flood(url, FLOOD)
    took, status = asyncio.run(one_client(url, "legacy"))  # the protocol that opened sessions

    assert statuses == {200: FLOOD}
    assert status["status"] == "serving" and took < 5
    assert rss_mb(process.pid) - before < 0.1 * before


def test_abandoned_sessions_leave_no_answers_behind(served):
    process, url = served
    sizes = abandon(url, 1, *LARGE)  # one session, its answer sent
    assert sizes[0] > 50_000
    one = rss_mb(process.pid)

    abandon(url, ABANDONED, *LARGE)

    # within 10% of one session's memory (and so with no answer kept per session)
    assert rss_mb(process.pid) - one < 0.1 * one
    first = httpx2.post(url, json=initialize(), headers=ACCEPT)
    assert first.status_code == 200 and "mcp-session-id" not in first.headers


def test_a_request_of_the_handshake_needs_no_session(served):
    _, url = served
    headers = dict(ACCEPT, **{"mcp-protocol-version": HANDSHAKE})
    listed = httpx2.post(
        url, json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, headers=headers
    )

    assert listed.status_code == 200
    assert '"name":"search"' in listed.text.replace(" ", "")
