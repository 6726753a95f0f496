"""Fresh within minutes of a change (#19): what a served store costs to watch, what
`status` says about it, and a change travelling from GitHub to a running server.

Requests are counted on the wire: the store is a real S3 protocol server (moto) behind
a counting proxy, both on 127.0.0.1 (testkit/store_proxy.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time

import mcp
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from ghindex.serve import SnapshotHolder, create_server
from ghindex.snapshot import Store, publish
from ghindex.snapshot.layout import REFS, ref_path
from testkit.github_server import comment_node, issue_node
from testkit.state import built_workdir
from testkit.store_proxy import StoreProxy

R = "octo/hello"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A small built workdir, published again and again (never changed)."""
    return built_workdir(tmp_path_factory.mktemp("freshness") / "work", 3)


@pytest.fixture
def proxied(s3_store_url, moto_endpoint, monkeypatch):
    """(store URL, proxy): the fresh bucket of `s3_store_url`, reached through a
    counting proxy."""
    with StoreProxy(moto_endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        yield s3_store_url, proxy


def wire(requests) -> list[tuple[str, str, dict[str, str]]]:
    """Each request as (method, what it names below the store's prefix, query)."""
    return [(r.method, r.key.removeprefix("snapshots/"), r.query) for r in requests]


def listing(after: int) -> tuple[str, str, dict[str, str]]:
    """The request that lists the pointer's generations after generation `after`."""
    return (
        "GET",
        REFS,
        {
            "list-type": "2",
            "prefix": "snapshots/" + REFS,
            "start-after": "snapshots/" + ref_path(after),
        },
    )


def status_of(holder) -> dict:
    async def go():
        async with mcp.Client(create_server(holder)) as client:
            return await client.call_tool("status", {})

    result = asyncio.run(go())
    assert not result.is_error, result.content[0].text
    return result.structured_content


# --------------------------------------------------------------------------- checks


@pytest.mark.slow
def test_a_check_with_nothing_new_is_one_listing_of_one_name(workdir, proxied, isolated):
    url, proxy = proxied
    store = Store(url)
    for _ in range(3):  # three generations, as three updates leave them
        publish(workdir, store)
    holder = SnapshotHolder(store=store, cache=isolated / "serve")
    holder.start()
    try:
        proxy.clear()
        idle = holder.sync_once()
        check = proxy.taken()
        newest = publish(workdir, store).snapshot_id  # the same files, a new snapshot
        proxy.clear()
        swapped = holder.sync_once()
        swap = proxy.taken()
        again = holder.sync_once()
        after = proxy.taken()
    finally:
        holder.stop()

    assert (idle, swapped, again) == (False, True, False)
    # nothing new: one listing from the served generation on, naming only that one
    assert wire(check) == [listing(after=2)]
    assert check[0].answer.count(b"<Key>") == 1 and check[0].received < 1024
    # something new: the listing, the new generation, its manifest, and no blob (the
    # files are those the server holds)
    assert wire(swap) == [
        listing(after=2),
        ("GET", ref_path(4), {}),
        ("HEAD", f"snapshots/{newest}/manifest.json", {}),
        ("GET", f"snapshots/{newest}/manifest.json", {}),
    ]
    assert wire(after) == [listing(after=3)]


@pytest.mark.slow
def test_a_store_published_to_again_from_scratch_is_followed(workdir, isolated):
    store = Store(str(isolated / "store"))
    publish(workdir, store)
    publish(workdir, store)
    holder = SnapshotHolder(store=store, cache=isolated / "serve")
    holder.start()
    try:
        served = holder.ref.generation
        shutil.rmtree(isolated / "store")  # emptied, then published to anew: generation 1
        fresh = publish(workdir, store)
        swapped = holder.sync_once()
        now = holder.current.snapshot_id
    finally:
        holder.stop()

    assert (served, fresh.generation) == (2, 1)
    assert swapped is True and now == fresh.snapshot_id


# --------------------------------------------------------------------------- status


@pytest.mark.slow
def test_status_says_when_the_store_was_last_checked_and_what_failed(workdir, isolated):
    store = Store(str(isolated / "store"))
    first = publish(workdir, store)
    holder = SnapshotHolder(store=store, cache=isolated / "serve", interval=30)
    holder.start()
    try:
        time.sleep(1.1)
        idle = status_of(holder)
        store.put(ref_path(2), b"{not a pointer")
        holder.sync_once()
        failed = status_of(holder)
    finally:
        holder.stop()

    sync = idle.pop("sync")
    assert idle["snapshot_id"] == first.snapshot_id and idle["snapshot_age_seconds"] >= 1
    assert sync["last_check"] == sync["last_success"]
    assert sync["seconds_since_last_check"] >= 1
    assert sync == {
        "store": str(isolated / "store"),
        "interval_seconds": 30.0,
        "last_check": sync["last_check"],
        "seconds_since_last_check": sync["seconds_since_last_check"],
        "last_success": sync["last_check"],
        "last_error": None,
        "syncs": 1,
    }
    after = failed["sync"]
    assert failed["snapshot_id"] == first.snapshot_id  # still serving
    assert after["last_check"] >= sync["last_check"] and after["seconds_since_last_check"] <= 1
    assert after == {
        **sync,
        "last_check": after["last_check"],
        "seconds_since_last_check": after["seconds_since_last_check"],
        "last_error": f"{REFS}000000000002.json in {isolated / 'store'} is not a ghindex "
        "pointer (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
    }


def test_serve_checks_the_store_every_minute_by_default(run):
    shown = " ".join(run("serve", "--help").output.split())

    assert (
        "--sync-interval FLOAT RANGE Seconds between checks of the store for a newer "
        "snapshot (one small request). [default: 60.0; x>=1]" in shown
    )


# --------------------------------------------------------------------------- end to end


PHRASE = "the turbo encabulator hums off-key after a firmware flash"


def ghindex(workdir, *args: str) -> dict:
    """One `ghindex ... --json` run in its own process, as a CI runner starts it."""
    env = {**os.environ, "GHINDEX_WORKDIR": str(workdir)}
    done = subprocess.run(
        [sys.executable, "-m", "ghindex", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_comment_reaches_a_running_server_through_update(github, s3_store_url, isolated):
    github.add_repo(
        R,
        issues=[
            issue_node(
                n,
                title=f"Greeting {n} is rude",
                body=f"Greeting number {n} sounds rude.",
                updatedAt=f"2024-01-0{n}T00:00:00Z",
                comments=[comment_node(n * 10, body=f"Confirmed: greeting {n} needs work.")],
            )
            for n in (1, 2, 3)
        ],
    )
    update = ("update", "--repo", R, "--store", s3_store_url)
    first = ghindex(isolated / "runner-1", *update)
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ghindex", "serve", "--store", s3_store_url, "--sync-interval", "1"],
        env={**os.environ, "GHINDEX_WORKDIR": str(isolated / "server")},
        cwd=str(isolated),
    )

    def comment_on_issue_2():
        issue = github.repos[R]["issues"][1]
        issue["comments"].append(comment_node(99, body=f"Also: {PHRASE}."))
        issue["updatedAt"] = "2024-02-01T00:00:00Z"  # as GitHub does when one is added

    async def scenario(errlog):
        async with mcp.Client(stdio_client(server, errlog=errlog)) as client:

            async def search():
                found = await client.call_tool("search", {"query": PHRASE, "top_k": 3})
                assert not found.is_error, found.content[0].text
                return found.structured_content

            before = await search()
            comment_on_issue_2()
            second = await asyncio.to_thread(ghindex, isolated / "runner-2", *update)
            deadline = time.monotonic() + 60
            while True:
                after = await search()
                if after["snapshot_id"] == second["published"]["snapshot_id"]:
                    return before, second, after
                assert time.monotonic() < deadline, "the server did not pick up the update"
                await asyncio.sleep(0.2)

    with open(isolated / "serve-stderr.txt", "w") as errlog:
        before, second, after = asyncio.run(scenario(errlog))

    assert before["snapshot_id"] == first["published"]["snapshot_id"]
    assert all(r.get("matched", {}).get("handle") != f"{R}#2/comment/99" for r in before["results"])
    # the fresh runner started from the published snapshot and embedded only the change
    assert second["pulled"]["snapshot_id"] == first["published"]["snapshot_id"]
    assert second["published"]["generation"] == 2
    assert second["built"]["embedded"] == 1
    top = after["results"][0]
    assert (top["handle"], top["matched"]) == (
        f"{R}#2",
        {"handle": f"{R}#2/comment/99", "type": "issue_comment"},
    )
