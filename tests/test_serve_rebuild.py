"""A workdir served while another process writes it: readers see the last complete
state, and the writer is never refused (real processes, real MCP sessions)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import mcp
import pytest

from ghindex.serve.holder import SnapshotHolder, open_snapshot
from ghindex.serve.server import create_server
from testkit.state import built_workdir

pytestmark = pytest.mark.slow  # built workdirs, and writer and server processes

# Holds the state for writing six times, half a second each, adding one run per hold.
WRITER = textwrap.dedent(
    """
    import sys, time, uuid
    from datetime import UTC, datetime
    from pathlib import Path
    from ghindex.state.cursors import record_run
    from ghindex.state.database import open_state, transaction
    for _ in range(6):
        con = open_state(Path(sys.argv[1]))
        with transaction(con):
            record_run(con, run_id=str(uuid.uuid4()), command="fetch",
                       started_at=datetime.now(UTC), status="ok")
        time.sleep(0.5)
        con.close()
        time.sleep(0.05)
    """
)


def runs_seen(server) -> list[int]:
    async def go():
        seen = []
        async with mcp.Client(server) as client:
            for _ in range(40):
                result = await client.call_tool("sql", {"query": "SELECT count(*) FROM runs"})
                assert not result.is_error, result.content[0].text
                seen.append(result.structured_content["rows"][0][0])
                await asyncio.sleep(0.08)
        return seen

    return asyncio.run(go())


def test_a_served_workdir_can_be_written_while_it_answers(tmp_path):
    workdir = built_workdir(tmp_path / "work", 12)
    holder = SnapshotHolder(current=open_snapshot(workdir))
    server = create_server(holder)
    before = runs_seen(server)[-1]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(workdir / "state.duckdb")],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = runs_seen(server)
    finally:
        _, errors = writer.communicate(timeout=120)
    after = runs_seen(server)[-1]
    holder.current.close()
    holder.current.held.close()

    assert writer.returncode == 0, errors  # never refused by the server's reads
    assert seen == sorted(seen)  # never an older state after a newer one
    assert before <= seen[0] and seen[-1] <= before + 6
    assert after == before + 6  # the last complete state, once the writer is done


def test_a_server_with_no_copy_yet_says_the_workdir_is_being_rebuilt(tmp_path):
    workdir = built_workdir(tmp_path / "work", 3)
    holder = SnapshotHolder(current=open_snapshot(workdir))
    server = create_server(holder)
    hold = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, duckdb; c = duckdb.connect(sys.argv[1]); "
            "print('held', flush=True); time.sleep(30)",
            str(workdir / "state.duckdb"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert hold.stdout.readline().strip() == "held"

        async def go():
            async with mcp.Client(server) as client:
                return await client.call_tool("sql", {"query": "SELECT 1"})

        result = asyncio.run(go())
    finally:
        hold.kill()
        hold.wait()
    holder.current.held.close()

    assert result.is_error
    assert result.content[0].text == (
        "Error executing tool sql: the workdir is being rebuilt (fetch or build holds its "
        "state): retry in a moment, or serve a published snapshot"
    )


def test_a_rebuild_of_the_served_workdir_is_answered_from_next(tmp_path):
    from ghindex.index.build import build
    from testkit.github_server import issue_node
    from testkit.state import settings_for, store_issues

    workdir = built_workdir(tmp_path / "work", 4)
    holder = SnapshotHolder(current=open_snapshot(workdir))
    server = create_server(holder)

    async def ask():
        async with mcp.Client(server) as client:
            found = await client.call_tool(
                "search", {"query": "zeppelin mooring mast", "mode": "sparse", "top_k": 1}
            )
            return found.structured_content

    before = asyncio.run(ask())
    settings = settings_for(workdir)
    store_issues(settings, [issue_node(50, title="Zeppelin mooring mast", body="A new one.")])
    build(settings)
    after = asyncio.run(ask())
    holder.current.close()
    holder.current.held.close()

    assert [r["handle"] for r in before["results"]] != ["octo/hello#50"]
    assert [r["handle"] for r in after["results"]] == ["octo/hello#50"]
    assert after["snapshot_id"] != before["snapshot_id"]


def test_serving_any_workdir_never_blocks_its_writer(tmp_path):
    # `serve --snapshot DIR` on a workdir that is not GHINDEX_WORKDIR used to hold its
    # state open, and a writer of DIR then failed after a minute
    import os

    from mcp.client.stdio import StdioServerParameters, stdio_client

    workdir = built_workdir(tmp_path / "elsewhere", 3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GHINDEX_")}
    env.update(HF_HUB_OFFLINE="1", GHINDEX_WORKDIR=str(tmp_path / "default"))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ghindex", "serve", "--snapshot", str(workdir)], env=env
    )

    async def ask():
        async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
            await session.initialize()
            answered = await session.call_tool("sql", {"query": "SELECT count(*) FROM runs"})
            writer = subprocess.run(
                [sys.executable, "-c", WRITER, str(workdir / "state.duckdb")],
                capture_output=True,
                text=True,
                timeout=60,
            )
            again = await session.call_tool("sql", {"query": "SELECT count(*) FROM runs"})
            return answered, writer, again

    answered, writer, again = asyncio.run(ask())

    assert not answered.is_error and not again.is_error
    assert writer.returncode == 0, writer.stderr  # never waits on the server
    assert again.structured_content["rows"][0][0] == answered.structured_content["rows"][0][0] + 6
