"""What sessions cost `ghindex serve --transport http`: a flood of bare `initialize`
calls from one client, then a second client; and the server's resident memory after
one session and after many abandoned ones, each left holding one large answer.

A small snapshot is built (`testkit.mcp_load.busy_workdir`: an issue with 400 long
comments), served on 127.0.0.1 in a subprocess (the `ghindex` this interpreter
imports: point PYTHONPATH at another checkout's `src` to measure it side by side), with
the answer budget at its most (`GHINDEX_MCP_MAX_TOKENS=20000`) so that each `fetch`
of that issue is a large answer.

    python -m bench.bench_sessions            # --flood 10000 --abandoned 1000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import mcp

import ghindex
from testkit.mcp_load import LARGE, abandon, busy_workdir, flood, http_server, rss_mb


async def second_client(url: str, mode: str = "legacy") -> float:
    """Seconds a fresh client (of the handshake, by default: the protocol that opens a
    session) takes to connect and get one answer."""
    started = time.perf_counter()
    async with mcp.Client(url, mode=mode) as client:
        answered = await client.call_tool("status", {})
    assert not answered.is_error, answered.content[0].text
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=10_000)
    parser.add_argument("--abandoned", type=int, default=1_000)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-sessions-"))
    snapshot = busy_workdir(home / "snap")
    print(f"ghindex from {Path(ghindex.__file__).parent}")
    with http_server(snapshot, home, GHINDEX_MCP_MAX_TOKENS="20000") as (process, url):
        sizes = abandon(url, 1, *LARGE)  # one session, as a client leaves it
        asyncio.run(second_client(url))
        one = rss_mb(process.pid)
        started = time.perf_counter()
        sizes += abandon(url, args.abandoned, *LARGE)
        took_abandon = time.perf_counter() - started
        time.sleep(1)
        many = rss_mb(process.pid)
        started = time.perf_counter()
        statuses = flood(url, args.flood)
        took_flood = time.perf_counter() - started
        seconds = {}
        for mode in ("legacy", "2026-07-28"):
            try:
                seconds[mode] = f"{asyncio.run(second_client(url, mode)):.2f} s"
            except Exception as exc:  # the old server refuses it: say how
                seconds[mode] = f"refused ({str(exc)[:60]})"
        after = rss_mb(process.pid)
    answer_kb = statistics.median(sizes) / 1024
    print()
    print("| measure | value |")
    print("|---|---:|")
    print(f"| answer size (median) | {answer_kb:,.0f} KB |")
    print(f"| RSS after one session | {one:,.0f} MB |")
    print(f"| RSS after {args.abandoned:,} abandoned sessions | {many:,.0f} MB |")
    print(f"| per abandoned session | {(many - one) * 1024 / max(args.abandoned, 1):,.1f} KB |")
    print(f"| abandoning them took | {took_abandon:,.1f} s |")
    print(f"| {args.flood:,} bare initialize calls | {took_flood:,.1f} s, statuses {statuses} |")
    for mode, second in seconds.items():
        print(f"| a second client ({mode}) after the flood | {second} |")
    print(f"| RSS after the flood | {after:,.0f} MB |")


if __name__ == "__main__":
    main()
