"""Latency of every MCP tool through a real client session over streamable HTTP, the
server's memory, and what the MCP layer adds over calling the tool functions directly.

For each size a snapshot directory is synthesised the way `bench_search.py` builds
its tables: the first ~3,000 chunks of the httpx eval corpus are embedded for real
(cached in bench/.cache/), and copies with new repos, numbers, states, labels and
slightly perturbed vectors fill the table, written by `ghindex.index.table.write_chunks`
(so at 50k rows and more it also gets the IVF_HNSW_SQ vector index `build` makes).
The state database holds an issue or pull request for every synthetic document
(pull requests close an earlier issue of their repo), so fetch, related and sql read
real rows; `build.write_manifest` writes the manifest.

`ghindex serve --snapshot DIR --transport http` then runs in a subprocess on
127.0.0.1, and one `mcp.Client` session calls every tool, query by query. Side by
side, in the same loop and alternating which goes first, the same call runs two
more ways in this process on the same snapshot: the plain query function in
`ghindex.serve.tools`, and an in-process MCP session (`mcp.Client(server)`), which
separates the protocol's cost from the HTTP transport's. The server's resident
memory is read from /proc after start-up, after the warm-up and at the end.

Both processes run torch. OpenMP threads busy-wait for a while after each parallel
region, so on a small machine the one that has just embedded a query steals the CPU
from the other: the first runs showed +900 ms per HTTP hybrid search that was only
this. The script sets OMP_WAIT_POLICY=PASSIVE for itself and the server (unless it is
set already), which makes the three ways comparable.

    python -m bench.bench_mcp                   # --sizes 10000,100000 --queries 50
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: see above

import argparse
import asyncio
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import mcp
import numpy as np

from bench.bench_search import EVAL, base_documents, base_vectors, synthesise
from ghindex.config import DEFAULT_MODEL
from ghindex.index import table as index
from ghindex.index.build import BuildReport, write_manifest
from ghindex.index.chunking import Chunk, ChunkSettings
from ghindex.index.documents import Document, DocumentSettings
from ghindex.index.embed import Embedder
from ghindex.serve import SnapshotHolder, create_server, open_snapshot, tools
from ghindex.state import items
from ghindex.state.database import open_state, transaction
from testkit.github_server import as_response, issue_node, pull_request_node, ref

SQL = "SELECT repo, state, count(*) AS n FROM issues GROUP BY ALL ORDER BY ALL"


def write_snapshot(root: Path, chunks: list[Chunk], vectors: dict[str, np.ndarray], dim: int):
    """A snapshot directory: state rows for the chunks' documents, the chunks table, a
    manifest. Returns the documents' handles."""
    documents: dict[str, Document] = {}
    for chunk in chunks:
        documents.setdefault(chunk.document.handle, chunk.document)
    con = open_state(root / "state.duckdb")
    try:
        with transaction(con):
            for repo in sorted({d.repo for d in documents.values()}):
                items.save_repository(
                    con, {"nameWithOwner": repo, "url": f"https://github.com/{repo}"}
                )
            issues: dict[str, list[dict]] = {}
            pulls: dict[str, list[dict]] = {}
            last_issue: dict[str, int] = {}
            for doc in documents.values():
                fields = {
                    "title": doc.title,
                    "body": doc.body,
                    "url": doc.url,
                    "labels": {
                        "nodes": [
                            {"name": n, "color": "ededed", "description": None} for n in doc.labels
                        ]
                    },
                }
                if doc.type == "issue":
                    state = "OPEN" if doc.state == "open" else "CLOSED"
                    node = issue_node(doc.number, repo=doc.repo, state=state, **fields)
                    issues.setdefault(doc.repo, []).append(node)
                    last_issue[doc.repo] = doc.number
                else:
                    closes = [ref(doc.repo, last_issue[doc.repo])] if doc.repo in last_issue else []
                    node = pull_request_node(
                        doc.number,
                        repo=doc.repo,
                        state=(doc.state or "open").upper(),
                        merged=doc.state == "merged",
                        closingIssuesReferences=closes,
                        **fields,
                    )
                    pulls.setdefault(doc.repo, []).append(node)
            for repo, nodes in issues.items():
                items.save_issues(con, repo, as_response(nodes))
            for repo, nodes in pulls.items():
                items.save_pull_requests(con, repo, as_response(nodes))
        db = index.connect(root / "lance")
        index.write_chunks(db, DEFAULT_MODEL, chunks, vectors, dim)
        counts: dict[str, int] = {}
        for doc in documents.values():
            counts[doc.type] = counts.get(doc.type, 0) + 1
        report = BuildReport(
            model=DEFAULT_MODEL,
            dimension=dim,
            documents=len(documents),
            chunks=len(chunks),
            embedded=0,
            from_cache=len(chunks),
            inserted=len(chunks),
            updated=0,
            deleted=0,
            seconds=0.0,
            counts=counts,
            git=[],
        )
        write_manifest(root / "manifest.json", con, report, ChunkSettings(), DocumentSettings())
    finally:
        con.close()
    return list(documents)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> tuple[float, float]:
    """(resident, peak resident) memory of a process in MB, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def start_server(root: Path, port: int, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GHINDEX_")}
    env.update(HF_HUB_OFFLINE="1", GHINDEX_WORKDIR=str(root / "serve-workdir"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ghindex",
            "serve",
            "--snapshot",
            str(root),
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        cwd=root,
    )
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            raise SystemExit(f"ghindex serve exited: {log.read_text()[-2000:]}")
        try:
            httpx2.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
            return process
        except httpx2.TransportError:
            if time.monotonic() > deadline:
                raise SystemExit("ghindex serve did not start in 120 s") from None
            time.sleep(0.1)


def cases(queries: list[str], handles: list[str], repo: str):
    """Tool name -> (label, arguments for query i, direct call for query i)."""
    pick = random.Random(0)
    chosen = [pick.choice(handles) for _ in queries]
    none = tools.filters()
    scan = tools.filters(repo=repo, state="open")
    return {
        "search (hybrid)": (
            "search",
            lambda i: {"query": queries[i]},
            lambda s, i: tools.search(s, queries[i], none, top_k=10),
        ),
        "search (sparse)": (
            "search",
            lambda i: {"query": queries[i], "mode": "sparse"},
            lambda s, i: tools.search(s, queries[i], none, top_k=10, mode="sparse"),
        ),
        "search (no query: scan, repo + state)": (
            "search",
            lambda i: {"repo": repo, "state": "open"},
            lambda s, i: tools.search(s, None, scan, top_k=10),
        ),
        "fetch (1 handle)": (
            "fetch",
            lambda i: {"handles": [chosen[i]]},
            lambda s, i: tools.fetch(s, [chosen[i]], 20_000),
        ),
        "related": (
            "related",
            lambda i: {"handle": chosen[i]},
            lambda s, i: tools.related(s, chosen[i], 1),
        ),
        "context (4,000 tokens)": (
            "context",
            lambda i: {"query": queries[i], "max_tokens": 4000},
            lambda s, i: tools.context(s, queries[i], none, 4000),
        ),
        "sql (group by over issues)": (
            "sql",
            lambda i: {"query": SQL},
            lambda s, i: tools.sql(s, SQL, 100),
        ),
        "status": ("status", lambda i: {}, lambda s, i: tools.status(SnapshotHolder(current=s))),
    }


async def measure(
    url: str, root: Path, table, rounds: int, warmup: int, warmed: Callable[[], None]
) -> dict[str, dict[str, list[float]]]:
    """Per case and way: latencies in ms. Calls `warmed` between warm-up and timing."""
    snapshot = open_snapshot(root, immutable=True)  # as the server opens it
    inproc = create_server(SnapshotHolder(current=snapshot))
    ways = ["direct", "in-process MCP", "HTTP MCP"]
    times = {name: {way: [] for way in ways} for name in table}
    async with mcp.Client(url) as http, mcp.Client(inproc) as local:

        async def timed(way: str, name: str, i: int) -> float:
            tool, arguments, direct = table[name]
            started = time.perf_counter()
            if way == "direct":
                await asyncio.to_thread(direct, snapshot, i)  # a thread, as the server runs it
            else:
                result = await (http if way == "HTTP MCP" else local).call_tool(tool, arguments(i))
                if result.is_error:
                    raise SystemExit(f"{name}: {result.content[0].text}")
            return 1000 * (time.perf_counter() - started)

        for i in range(rounds, rounds + warmup):  # loads the model on both sides
            for name in table:
                for way in ways:
                    await timed(way, name, i)
        warmed()
        for i in range(rounds):
            for name in table:
                for way in ways[i % 3 :] + ways[: i % 3]:  # rotate which goes first
                    times[name][way].append(await timed(way, name, i))
    return times


HEAVY_SQL = "SELECT a.range * b.range AS x FROM range(300000) a, range(30000) b ORDER BY x DESC"
RUNAWAY_SQL = "SELECT count(*) FROM range(1000000000000)"


async def contention(url: str, queries: list[str], pid: int) -> dict[str, object]:
    """Cheap searches from one client, idle and while a second client runs heavy SQL
    capped by the time limit; the server's peak memory meanwhile; and how long past
    the limit a runaway statement takes to be interrupted."""

    async def searches(client) -> list[float]:
        latencies = []
        for query in queries:
            started = time.perf_counter()
            result = await client.call_tool("search", {"query": query, "top_k": 10})
            if result.is_error:
                raise SystemExit(result.content[0].text)
            latencies.append(1000 * (time.perf_counter() - started))
        return latencies

    async with mcp.Client(url) as cheap, mcp.Client(url) as heavy:
        idle = await searches(cheap)
        stop = asyncio.Event()
        heavy_answers: list[float] = []

        async def load() -> None:
            while not stop.is_set():
                started = time.perf_counter()
                await heavy.call_tool("sql", {"query": HEAVY_SQL})
                heavy_answers.append(time.perf_counter() - started)

        loader = asyncio.create_task(load())
        await asyncio.sleep(0.5)  # the first heavy statement is running
        loaded = await searches(cheap)
        stop.set()
        await loader
        peak = rss_mb(pid)[1]
        started = time.perf_counter()
        runaway = await heavy.call_tool("sql", {"query": RUNAWAY_SQL})
        interrupted = time.perf_counter() - started
    return {
        "idle": idle,
        "loaded": loaded,
        "heavy_calls": len(heavy_answers),
        "peak_rss_mb": peak,
        "runaway_s": interrupted,
        "runaway_answer": runaway.content[0].text[:120],
    }


def ms(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated chunk counts")
    parser.add_argument("--queries", type=int, default=50, help="eval queries timed per case")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--base-chunks", type=int, default=3000, help="chunks really embedded")
    parser.add_argument("--corpus", type=Path, default=EVAL / "corpus.jsonl")
    parser.add_argument("--queries-file", type=Path, default=EVAL / "queries.jsonl")
    args = parser.parse_args()
    with args.queries_file.open(encoding="utf-8") as f:
        queries = [json.loads(line)["query"] for line in f if line.strip()]
    queries = queries[: args.queries + args.warmup]  # the last `warmup` ones warm up
    embedder = Embedder(DEFAULT_MODEL)
    documents = base_documents(args.corpus, args.base_chunks)
    vectors = base_vectors(documents, embedder)

    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        root = Path(tempfile.mkdtemp(prefix="ghindex-bench-mcp-"))
        process = None
        try:
            chunks, table_vectors = synthesise(documents, vectors, size)
            started = time.perf_counter()
            handles = write_snapshot(root, chunks, table_vectors, embedder.dimension)
            indexed = index.has_vector_index(index.connect(root / "lance").open_table("chunks"))
            print(
                f"{size:,} chunks, {len(handles):,} items written in "
                f"{time.perf_counter() - started:.1f}s (vector index: {indexed})",
                flush=True,
            )
            port = free_port()
            process = start_server(root, port, root / "serve.log")
            memory = {"after start": rss_mb(process.pid)}
            table = cases(queries, handles, chunks[0].document.repo)
            url = f"http://127.0.0.1:{port}/mcp"

            def warmed(process=process, memory=memory):
                memory["after warm-up"] = rss_mb(process.pid)

            times = asyncio.run(measure(url, root, table, args.queries, args.warmup, warmed))
            memory["after the run"] = rss_mb(process.pid)
            load = asyncio.run(contention(url, queries[: args.queries], process.pid))
            results.append((size, indexed, times, memory, load))
        finally:
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
            shutil.rmtree(root, ignore_errors=True)

    print(f"\n{args.queries} queries per case, k = 10, latency in ms (p50 / p95)\n")
    print("| chunks | tool | direct | in-process MCP | HTTP MCP | HTTP over direct (p50) |")
    print("|---:|---|---:|---:|---:|---:|")
    for size, _indexed, times, _memory, _load in results:
        for name, by_way in times.items():
            cells = [f"{ms(v, 50):.1f} / {ms(v, 95):.1f}" for v in by_way.values()]
            extra = ms(by_way["HTTP MCP"], 50) - ms(by_way["direct"], 50)
            print(f"| {size:,} | {name} | {' | '.join(cells)} | {extra:+.1f} |")
    print("\n| chunks | server RSS MB: after start | after warm-up | after the run | peak |")
    print("|---:|---:|---:|---:|---:|")
    for size, _indexed, _times, memory, _load in results:
        rss = [f"{memory[k][0]:.0f}" for k in ("after start", "after warm-up", "after the run")]
        print(f"| {size:,} | {' | '.join(rss)} | {memory['after the run'][1]:.0f} |")
    print("\nA cheap `search` from one client, idle and while a second client runs heavy SQL")
    print(f"(`{HEAVY_SQL}`, stopped by the 10 s limit), in ms (p50 / p95):\n")
    print(
        "| chunks | idle | under heavy SQL | p95 ratio | heavy calls | server peak RSS MB "
        "| runaway SQL answered after |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size, _indexed, _times, _memory, load in results:
        idle, loaded = load["idle"], load["loaded"]
        print(
            f"| {size:,} | {ms(idle, 50):.1f} / {ms(idle, 95):.1f} "
            f"| {ms(loaded, 50):.1f} / {ms(loaded, 95):.1f} "
            f"| {ms(loaded, 95) / ms(idle, 95):.2f} | {load['heavy_calls']} "
            f"| {load['peak_rss_mb']:.0f} | {load['runaway_s']:.2f} s |"
        )
        print(f"\nrunaway answer ({size:,}): {load['runaway_answer']}")


if __name__ == "__main__":
    main()
