"""How fresh a served store stays: one new comment, `ghindex update` on a new runner,
and the time until a running `ghindex serve --store` answers with it (#19).

A local GitHub GraphQL server (testkit/github_server.py, executing GitHub's published
schema) serves one repository of about 7,000 items: issues and pull requests with
text from the httpx eval corpus, their comments and reviews. `ghindex update` builds
and publishes the first snapshot to a local S3 protocol server (moto); everything
listens on 127.0.0.1, and the store is reached through counting proxies
(testkit/store_proxy.py), one for the updates and one for the server. A `ghindex
serve --store ... --sync-interval S` process (MCP over stdio, one client session)
serves it from then on.

Each round adds one comment on the GraphQL server three times, each followed by a
`ghindex update` process (`--json`), as a CI runner would run it:

- **new runner**: empty workdir and empty model cache (GHINDEX_CACHE_DIR), as the
  Action's runner has today: the ONNX export of the model is not in its caches;
- **new runner, model cached**: empty workdir, the ONNX export kept;
- **workdir kept**: the previous update's workdir, as a runner that restored it from
  a cache (or a self-hosted one) has it.

Per update: wall time, split into pull, fetch, build (embedding included) and publish
(pull, build and publish as the update's report times them, fetch from the first to
the last GraphQL request; the rest is start-up), the GraphQL requests, and the bytes
downloaded from and uploaded to the store (response and request bodies, split at the
first and last GraphQL request). Meanwhile a client polls the server's `status`; once
it names the new snapshot, a `search` for the comment's words must rank the comment's
issue first with the comment as its match. The pickup time runs from the pointer's
move (the proxy sees its PUT) to that answer.

    python -m bench.bench_freshness   # --issues 1530 --pulls 610 --rounds 3 --sync-interval 5
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as bench_mcp: two processes, 2 cores

import argparse
import asyncio
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.bench_snapshot import CORPUS, texts
from ghindex.snapshot import Store
from ghindex.snapshot.refs import read_manifest
from testkit.github_server import (
    GitHubServer,
    comment_node,
    format_time,
    issue_node,
    parse_time,
    pull_request_node,
    review_node,
)
from testkit.store_proxy import Request, StoreProxy, start_s3

REPO = "bench/fresh"
START = parse_time("2024-01-01T00:00:00Z")
STORE = "s3://bench/ghindex"
VARIANTS = ("new runner", "new runner, model cached", "workdir kept")


def stamp(minutes: float) -> str:
    return format_time(START + timedelta(minutes=minutes))


def repository(server: GitHubServer, issues: int, pulls: int, bodies: list[str]) -> int:
    """Issues with 0-3 comments (every 50th a long thread of 45), pull requests with a
    comment and 0-2 reviews: bench_fetch's shape, with corpus text. Returns how many
    items that is (issues, pull requests, comments, reviews)."""
    issue_nodes = []
    for n in range(1, issues + 1):
        count = 45 if n % 50 == 0 else n % 4
        comments = [
            comment_node(
                n * 100 + c,
                body=bodies[(n * 7 + c) % len(bodies)][:400],
                createdAt=stamp(n),
                updatedAt=stamp(n),
            )
            for c in range(count)
        ]
        body = bodies[n % len(bodies)]
        issue_nodes.append(
            issue_node(
                n, repo=REPO, title=f"Issue {n}", body=body, comments=comments, updatedAt=stamp(n)
            )
        )
    pull_nodes = []
    for n in range(issues + 1, issues + pulls + 1):
        reviews = [
            review_node(
                n * 10 + r, "APPROVED" if r == 1 else "COMMENTED", body=f"Review {r} of #{n}."
            )
            for r in range(n % 3)
        ]
        pull_nodes.append(
            pull_request_node(
                n,
                repo=REPO,
                title=f"Pull request {n}",
                updatedAt=stamp(n),
                reviews=reviews,
                body=f"Fixes #{n - issues}.\n\n" + bodies[(n * 3) % len(bodies)][:1500],
                comments=[
                    comment_node(
                        n * 100,
                        body=bodies[(n * 5) % len(bodies)][:300],
                        createdAt=stamp(n),
                        updatedAt=stamp(n),
                    )
                ],
            )
        )
    server.add_repo(REPO, issues=issue_nodes, pull_requests=pull_nodes)
    nested = sum(len(n["comments"]) for n in issue_nodes + pull_nodes)
    return issues + pulls + nested + sum(len(n["reviews"]) for n in pull_nodes)


def add_comment(server: GitHubServer, number: int, database_id: int, words: str, at: float):
    """One new comment on issue `number`, its issue updated as GitHub updates it."""
    with server.lock:
        issue = server.repos[REPO]["issues"][number - 1]
        issue["comments"].append(
            comment_node(database_id, body=words, createdAt=stamp(at), updatedAt=stamp(at))
        )
        issue["updatedAt"] = stamp(at)


@dataclass
class Update:
    variant: str
    wall: float
    report: dict[str, Any]
    graphql: list[tuple[float, float]]  # (start, end) of every GraphQL request
    store: list[Request]
    pickup: float | None = None  # pointer moved -> a search answered with the comment
    swap_seen: float | None = None  # pointer moved -> status named the new snapshot
    server_bytes: int = 0  # what the server downloaded to swap the new snapshot in
    uploads: dict[str, tuple[int, int]] = field(default_factory=dict)  # part: (size, sent)

    @property
    def snapshot_bytes(self) -> int:
        return self.report["published"]["bytes"]

    def phase(self, name: str) -> list[Request]:
        first, last = self.graphql[0][0], self.graphql[-1][1]
        if name == "pull":
            return [r for r in self.store if r.started < first]
        return [r for r in self.store if r.started > last]

    def seconds(self) -> dict[str, float]:
        pulled = (self.report.get("pulled") or {}).get("seconds", 0.0)
        found = {
            "pull": pulled,
            "fetch": self.graphql[-1][1] - self.graphql[0][0],
            "build": self.report["built"]["seconds"],
            "publish": self.report["published"]["seconds"],
        }
        found["start-up and the rest"] = self.wall - sum(found.values())
        return found

    def weigh_uploads(self, store: Store) -> None:
        """What the publish uploaded, by part of the snapshot (the state, each table)."""
        manifest = read_manifest(store, snapshot_id=self.report["published"]["snapshot_id"])
        owner = {p.sha256: part(f.path) for f in manifest.files for p in f.pieces}
        sizes = Counter()
        for entry in manifest.files:
            sizes[part(entry.path)] += entry.size
        sent = Counter()
        for request in self.phase("publish"):
            if request.method == "PUT" and "/blobs/" in request.path:
                sent[owner[request.path.rsplit("/", 1)[-1]]] += request.sent
        self.uploads = {name: (size, sent[name]) for name, size in sizes.items()}

    def pointer_moved(self) -> float:
        return next(r.ended for r in self.store if r.method == "PUT" and "/refs/latest/" in r.path)


def part(path: str) -> str:
    """`state.duckdb`, or the LanceDB table a file of the index belongs to."""
    return "/".join(path.split("/")[:2])


@dataclass
class Bench:
    github: GitHubServer
    updates_proxy: StoreProxy
    server_proxy: StoreProxy
    tmp: Path
    env: dict[str, str]
    stamps: list[tuple[float, float]] = field(default_factory=list)

    def watch_graphql(self) -> None:
        handle = self.github._handle

        def stamped(*args: Any) -> Any:
            started = time.monotonic()
            try:
                return handle(*args)
            finally:
                self.stamps.append((started, time.monotonic()))

        self.github._handle = stamped  # type: ignore[method-assign]

    async def update(self, variant: str, workdir: Path, cache: Path) -> Update:
        env = {
            **self.env,
            "GHINDEX_WORKDIR": str(workdir),
            "GHINDEX_CACHE_DIR": str(cache),
            "AWS_ENDPOINT_URL": self.updates_proxy.url,
        }
        self.stamps.clear()
        self.updates_proxy.clear()
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "ghindex",
            "update",
            "--repo",
            REPO,
            "--store",
            STORE,
            "--json",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        wall = time.monotonic() - started
        if process.returncode != 0:
            raise SystemExit(f"ghindex update failed:\n{err.decode()[-3000:]}")
        return Update(
            variant, wall, json.loads(out), sorted(self.stamps), self.updates_proxy.taken()
        )


async def until_served(client, update: Update, words: str, handle: str, timeout: float):
    """Poll `status` until the server names the update's snapshot, then search."""
    wanted = update.report["published"]["snapshot_id"]
    moved = update.pointer_moved()
    deadline = time.monotonic() + timeout
    while True:
        status = (await client.call_tool("status", {})).structured_content
        if status["snapshot_id"] == wanted:
            update.swap_seen = time.monotonic() - moved
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"the server did not pick up {wanted} in {timeout:.0f} s")
        await asyncio.sleep(0.1)
    found = await client.call_tool("search", {"query": words, "top_k": 3})
    answered = time.monotonic()
    body = found.structured_content
    top = body["results"][0] if body and body["results"] else {}
    if body["snapshot_id"] != wanted or top.get("matched", {}).get("handle") != handle:
        raise SystemExit(f"search for the new comment did not find {handle}: {body}")
    update.pickup = answered - moved


async def scenario(bench: Bench, args: argparse.Namespace) -> tuple[list[Update], dict]:
    first_cache = bench.tmp / "model-cache-first"
    print("first snapshot: ghindex update into an empty store ...", flush=True)
    first = await bench.update("first", bench.tmp / "runner-0", first_cache)
    bench.server_proxy.clear()
    interval = str(args.sync_interval)
    serve_env = {
        **bench.env,
        "GHINDEX_WORKDIR": str(bench.tmp / "server"),
        "GHINDEX_CACHE_DIR": str(first_cache),
        "AWS_ENDPOINT_URL": bench.server_proxy.url,
    }
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ghindex", "serve", "--store", STORE, "--sync-interval", interval],
        env=serve_env,
    )
    warm_cache = bench.tmp / "model-cache-warm"
    shutil.copytree(first_cache, warm_cache)
    updates: list[Update] = []
    seen: list[Request] = []  # every request of the server's
    with open(bench.tmp / "serve-stderr.txt", "w") as errlog:
        async with mcp.Client(stdio_client(server, errlog=errlog)) as client:
            status = (await client.call_tool("status", {})).structured_content
            assert status["snapshot_id"] == first.report["published"]["snapshot_id"], status
            await client.call_tool("search", {"query": "warm up", "top_k": 1})
            bench.server_proxy.clear()
            kept = None
            minutes = args.issues + args.pulls + 1000
            for round_ in range(args.rounds):
                for variant in VARIANTS:
                    n = len(updates) + 1
                    words = f"Round {round_} {variant}: zorblax{n} breaks the quux{n} handshake"
                    number = 1 + (37 * n) % args.issues
                    add_comment(bench.github, number, 900_000 + n, words, minutes + n)
                    if variant == "new runner":
                        cache = bench.tmp / f"model-cache-{n}"  # empty
                        workdir = bench.tmp / f"runner-{n}"
                    elif variant == "new runner, model cached":
                        cache, workdir = warm_cache, bench.tmp / f"runner-{n}"
                    else:
                        cache, workdir = warm_cache, kept
                    done = await bench.update(variant, workdir, cache)
                    kept = workdir
                    handle = f"{REPO}#{number}/comment/{900_000 + n}"
                    await until_served(client, done, words, handle, 10 * args.sync_interval + 60)
                    served = bench.server_proxy.taken()
                    seen += served
                    done.server_bytes = sum(r.received for r in served if "/blobs/" in r.path)
                    done.weigh_uploads(Store(STORE))
                    updates.append(done)
                    print(
                        f"  {variant}: {done.wall:.1f} s, picked up after {done.pickup:.1f} s",
                        flush=True,
                    )
    checks = [r for r in seen if r.query.get("list-type")]
    return updates, {"first": first, "checks": checks}


def median(values: list[float]) -> float:
    return statistics.median(values)


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %"


def report(updates: list[Update], extra: dict, args: argparse.Namespace) -> None:
    first: Update = extra["first"]
    counts = first.report["built"]["counts"]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"\n# freshness, {platform.node()} ({os.cpu_count()} cores), {when}")
    kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
    print(
        f"{extra['items']:,} items on the GraphQL server (issues, pull requests, comments, "
        f"reviews); index rows: {kinds}; first snapshot {first.snapshot_bytes:,} bytes, "
        f"built and published in {first.wall:.0f} s; --sync-interval "
        f"{args.sync_interval:g} s; medians of {args.rounds} rounds\n"
    )
    print(
        "| update after one new comment | wall s | pull s | fetch s | build s | publish s | "
        "start-up and the rest s | GraphQL requests | embedded |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for variant in VARIANTS:
        runs = [u for u in updates if u.variant == variant]
        parts = [u.seconds() for u in runs]
        cells = [f"{median([u.wall for u in runs]):.1f}"]
        cells += [f"{median([p[k] for p in parts]):.1f}" for k in parts[0]]
        cells.append(f"{median([len(u.graphql) for u in runs]):.0f}")
        cells.append(f"{median([u.report['built']['embedded'] for u in runs]):.0f}")
        print(f"| {variant} | {' | '.join(cells)} |")
    print(
        "\n| update after one new comment | snapshot pulled, bytes | downloaded | share | "
        "snapshot published, bytes | uploaded | share | read while publishing | "
        "store requests |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for variant in VARIANTS:
        runs = [u for u in updates if u.variant == variant]
        pulled = median([u.report["pulled"]["bytes"] for u in runs])
        down = median([sum(r.received for r in u.phase("pull")) for u in runs])
        size = median([u.snapshot_bytes for u in runs])
        up = median([sum(r.sent for r in u.phase("publish")) for u in runs])
        read = median([sum(r.received for r in u.phase("publish")) for u in runs])
        print(
            f"| {variant} | {pulled:,.0f} | {down:,.0f} | {share(down, pulled)} | {size:,.0f} | "
            f"{up:,.0f} | {share(up, size)} | {read:,.0f} | "
            f"{median([len(u.store) for u in runs]):.0f} |"
        )
    kept = [u for u in updates if u.variant == VARIANTS[-1]]
    print("\n| what a publish uploads (workdir kept) | bytes in the snapshot | uploaded | share |")
    print("|---|---:|---:|---:|")
    for name in sorted(kept[-1].uploads, key=lambda n: -kept[-1].uploads[n][1]):
        size = median([u.uploads[name][0] for u in kept if name in u.uploads])
        sent = median([u.uploads[name][1] for u in kept if name in u.uploads])
        print(f"| {name} | {size:,.0f} | {sent:,.0f} | {share(sent, size)} |")
    print(
        f"\n| running `ghindex serve --store`, --sync-interval {args.sync_interval:g} s "
        "| median | max |"
    )
    print("|---|---:|---:|")
    pickups = [u.pickup for u in updates]
    swaps = [u.swap_seen for u in updates]
    print(
        f"| pointer moved -> `status` names the new snapshot, s | {median(swaps):.1f} | "
        f"{max(swaps):.1f} |"
    )
    print(
        f"| pointer moved -> `search` answers with the new comment, s | {median(pickups):.1f} | "
        f"{max(pickups):.1f} |"
    )
    server_bytes = [u.server_bytes for u in updates]
    print(
        f"| bytes the server downloaded to swap the snapshot in | {median(server_bytes):,.0f} | "
        f"{max(server_bytes):,} |"
    )
    checks = extra["checks"]
    idle = [r for r in checks if r.answer.count(b"<Key>") == 1]
    print(
        f"| checks with nothing new: requests each, response bytes | 1, "
        f"{median([r.received for r in idle]):,.0f} | 1, {max(r.received for r in idle):,} |"
    )
    print(
        f"\n{len(updates)} updates picked up; the server checked the store {len(checks)} times, "
        f"{len(idle)} of them finding nothing new (one listing each)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=1530)
    parser.add_argument("--pulls", type=int, default=610)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sync-interval", type=float, default=5.0)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()

    # the bench's own reads (manifests) go straight to the store; ghindex's through proxies
    moto, endpoint = start_s3("bench")
    tmp = Path(tempfile.mkdtemp(prefix="ghindex-bench-fresh-"))
    try:
        with (
            GitHubServer() as github,
            StoreProxy(endpoint) as updates_proxy,
            StoreProxy(endpoint) as server_proxy,
        ):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("GHINDEX_", "AWS_"))}
            env.update(
                HF_HUB_OFFLINE="1",
                GITHUB_TOKEN=github.token,
                GHINDEX_GRAPHQL_URL=github.url,
                AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench",
                AWS_DEFAULT_REGION="us-east-1",
            )
            items = repository(github, args.issues, args.pulls, texts(args.corpus))
            bench = Bench(github, updates_proxy, server_proxy, tmp, env)
            bench.watch_graphql()
            updates, extra = asyncio.run(scenario(bench, args))
            extra["items"] = items
        report(updates, extra, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        moto.stop()


if __name__ == "__main__":
    main()
