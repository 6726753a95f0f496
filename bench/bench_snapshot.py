"""What snapshots cost: bytes moved by an incremental publish and pull, and pull speed.

Builds a workdir of ~100k chunks (25,000 issues with three comments each, every one a
row) through ghindex's own fetch savers and build (state database, chunks table with
its full-text, vector and scalar indexes, nearest lists), publishes it to a local S3
protocol server (moto, 127.0.0.1), changes 1% of the issues, rebuilds, publishes again,
and pulls into a directory that holds the first snapshot. Then one issue gains one
comment (stored as a fetch stores it), and the build and publish after it are measured
file by file: what one changed item uploads. Then it times a full `pull` into an empty directory
against a plain recursive download of the same objects with boto3, side by side; the
peak resident memory of a real `ghindex pull` process doing the same; and a pull
with nothing new (time, and the store requests it makes).

Embedding 50k chunks would take most of an hour on 2 cores, and what is measured
here does not depend on the vectors' values: the embedding cache is seeded with
real all-MiniLM-L6-v2 vectors of eval-corpus texts (perturbed per chunk), so the
build embeds nothing and every other step is the product's.

    python -m bench.bench_snapshot [--issues 25000] [--comments 3] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import numpy as np

from bench.eval_sets import eval_set
from ghindex.config import DEFAULT_MODEL, DEFAULT_PRECISION, Settings
from ghindex.index import table as index
from ghindex.index.build import build
from ghindex.index.chunking import ChunkSettings, chunk_document
from ghindex.index.documents import iter_documents
from ghindex.snapshot import Store, publish, pull
from ghindex.snapshot.layout import blob_path
from ghindex.snapshot.refs import latest_ref, read_manifest
from ghindex.state import items
from ghindex.state.database import open_state, transaction
from testkit.github_server import (
    as_response,
    comment_node,
    format_time,
    issue_node,
    repository_node,
)
from testkit.store_proxy import start_s3

REPO = "bench/snapshots"
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
# Runs the ghindex CLI, then prints the process's peak resident memory (KiB) to stderr.
PEAK = """
import atexit, sys
from ghindex.cli import cli
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print(line.split()[1], file=sys.stderr)
atexit.register(peak)
sys.argv[0] = "ghindex"
cli()
"""
CORPUS = eval_set("httpx-changelog") / "corpus.jsonl"


def texts(corpus: Path) -> list[str]:
    bodies = [json.loads(line)["body"] for line in corpus.open()]
    return [b[:3000] for b in bodies if len(b) > 200]


def store_issues(
    settings: Settings,
    numbers: range,
    bodies: list[str],
    edit: str = "",
    comments: int = 0,
    more: int = 0,
) -> None:
    """Issues `numbers` with `comments` comments each (and `more` after those), stored as
    a fetch stores a page."""
    con = open_state(settings.state_path)
    try:
        with transaction(con):
            items.save_repository(con, repository_node(REPO))
            for start in range(numbers.start, numbers.stop, 1000):
                page = [
                    issue_node(
                        n,
                        repo=REPO,
                        title=f"Issue {n}{edit}",
                        body=bodies[n % len(bodies)] + f"\n\nSee #{n}.",
                        comments=[
                            comment_node(n * 100 + c, body=bodies[(n * 7 + c) % len(bodies)][:1500])
                            for c in range(comments + more)
                        ],
                        updatedAt=format_time(EPOCH + timedelta(hours=n, minutes=more)),
                    )
                    for n in range(start, min(start + 1000, numbers.stop))
                ]
                items.save_issues(con, REPO, as_response(page))
    finally:
        con.close()


def seed_cache(settings: Settings, rng: np.random.Generator, dim: int = 384) -> None:
    """Give every chunk a vector in the embedding cache, so the build embeds nothing."""
    con = open_state(settings.state_path)
    try:
        hashes = sorted(
            {
                c.content_hash
                for d in iter_documents(con)
                for c in chunk_document(d, ChunkSettings())
            }
        )
    finally:
        con.close()
    db = index.connect(settings.lance_path)
    cached = index.cached_vectors(db, DEFAULT_MODEL, hashes, DEFAULT_PRECISION)
    missing = [h for h in hashes if h not in cached]
    vectors = rng.normal(size=(len(missing), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.add_to_cache(db, DEFAULT_MODEL, missing, vectors, DEFAULT_PRECISION)


def part_of(path: str) -> str:
    """The piece of a snapshot a file belongs to, as the README's tables name them."""
    parts = path.split("/")
    if len(parts) > 1 and parts[1].endswith(".lance"):
        return f"lance/{parts[1]}"
    if len(parts) > 1 and parts[1] == "nearest":
        return "lance/nearest/"
    return path


def moved_by_file(old, new) -> dict[str, tuple[int, int]]:
    """For each part of the snapshot `new`: (bytes it holds, bytes of pieces `old` lacks:
    what a publish of `new` over `old` uploads)."""
    held = old.blobs()
    seen: set[str] = set()
    found: dict[str, list[int]] = {}
    for entry in new.files:
        sizes = found.setdefault(part_of(entry.path), [0, 0])
        sizes[0] += entry.size
        for piece in entry.pieces:
            if piece.sha256 not in held and piece.sha256 not in seen:
                seen.add(piece.sha256)
                sizes[1] += piece.size
    return {k: (v[0], v[1]) for k, v in sorted(found.items())}


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=25000)
    parser.add_argument("--comments", type=int, default=3, help="comments per issue")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    bodies = texts(args.corpus)

    server, endpoint = start_s3("bench")
    s3 = boto3.client("s3", endpoint_url=endpoint)
    store = Store("s3://bench/ghindex")
    tmp = Path(tempfile.mkdtemp())
    try:
        settings = Settings(workdir=tmp / "work", graphql_url="", model=DEFAULT_MODEL)
        store_issues(settings, range(1, args.issues + 1), bodies, comments=args.comments)
        seed_cache(settings, rng)
        first_build = build(settings)
        first = publish(settings.workdir, store)
        reader = tmp / "reader"
        pull(store, reader)

        changed = range(1, args.issues + 1, 100)  # 1% of the issues
        for n in changed:
            store_issues(settings, range(n, n + 1), bodies, " (edited)", args.comments)
        seed_cache(settings, rng)
        second_build = build(settings)
        second = publish(settings.workdir, store)
        again = pull(store, reader)

        # one issue gains one comment, stored as a fetch stores it, then build and publish
        before = read_manifest(store, latest_ref(store))
        middle = args.issues // 2 + 1
        store_issues(settings, range(middle, middle + 1), bodies, "", args.comments, more=1)
        seed_cache(settings, rng)
        started = time.perf_counter()
        third_build = build(settings)
        build_s = time.perf_counter() - started
        third = publish(settings.workdir, store)
        one = moved_by_file(before, read_manifest(store, latest_ref(store)))
        one_pull = pull(store, reader)

        # full pull into an empty directory vs a plain download of the same objects
        latest = read_manifest(store, latest_ref(store))
        keys = sorted(f"ghindex/{blob_path(sha)}" for sha in latest.blobs())
        latest_bytes = sum(f.size for f in latest.files)
        pulls, copies = [], []
        for round_ in range(args.rounds):
            target = tmp / f"pull-{round_}"
            plain = tmp / f"copy-{round_}"

            def plain_copy(plain=plain):
                for key in keys:
                    path = plain / key
                    path.parent.mkdir(parents=True, exist_ok=True)
                    s3.download_file("bench", key, str(path))

            order = [("pull", lambda target=target: pull(store, target)), ("copy", plain_copy)]
            for name, step in order if round_ % 2 == 0 else reversed(order):
                (pulls if name == "pull" else copies).append(timed(step))
            shutil.rmtree(target)
            shutil.rmtree(plain)
        # peak memory of a real `ghindex pull` process, a full pull of the snapshot. Its
        # own high-water mark (VmHWM), read as it exits: getrusage's ru_maxrss would count
        # the bench's own memory, which a forked child holds until it execs.
        peak_mib = []
        for round_ in range(args.rounds):
            target = tmp / f"rss-{round_}"
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    PEAK,
                    "pull",
                    "--store",
                    "s3://bench/ghindex",
                    "--dest",
                    str(target),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            peak_mib.append(int(done.stderr.strip().splitlines()[-1]) / 1024)
            shutil.rmtree(target)

        # a pull with nothing new: its time and every request it makes of the store
        calls: dict[str, int] = {}
        for method in ("get", "head", "list"):
            original = getattr(Store, method)

            def counted(self, *a, _original=original, _name=method, **k):
                calls[_name] = calls.get(_name, 0) + 1
                return _original(self, *a, **k)

            setattr(Store, method, counted)
        idle = [timed(lambda: pull(store, reader)) for _ in range(args.rounds * 3)]
        idle_calls = {k: v // (args.rounds * 3) for k, v in calls.items()}
        store_bytes = sum(
            obj["Size"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench")
            for obj in page.get("Contents", [])
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        server.stop()

    figures = {
        "issues": args.issues,
        "chunks": first_build.chunks,
        "first_bytes": first.bytes,
        "one_percent_uploaded": second.bytes_uploaded,
        "one_percent_share": round(second.bytes_uploaded / second.bytes, 4),
        "one_comment_bytes": third.bytes,
        "one_comment_uploaded": third.bytes_uploaded,
        "one_comment_share": round(third.bytes_uploaded / third.bytes, 4),
        "one_comment_downloaded": one_pull.bytes_downloaded,
        "one_comment_build_s": round(build_s, 1),
        "one_comment_embedded": third_build.embedded,
        "one_comment_by_file": one,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"# snapshots: {args.issues} issues, {first_build.chunks} chunks\n")
    print("| step | snapshot bytes | bytes moved | share |")
    print("|---|---:|---:|---:|")
    print(f"| first publish | {first.bytes:,} | {first.bytes_uploaded:,} | 100 % |")
    print(
        f"| publish after 1% of issues changed ({second_build.updated} chunk rows "
        f"rewritten) | {second.bytes:,} | {second.bytes_uploaded:,} | "
        f"{100 * second.bytes_uploaded / second.bytes:.1f} % |"
    )
    print(
        f"| pull after that change | {again.bytes:,} | {again.bytes_downloaded:,} | "
        f"{100 * again.bytes_downloaded / again.bytes:.1f} % |"
    )
    print(
        f"| publish after one new comment (build {build_s:.1f} s, {third_build.embedded} "
        f"embedded) | {third.bytes:,} | {third.bytes_uploaded:,} | "
        f"{100 * third.bytes_uploaded / third.bytes:.2f} % |"
    )
    print(
        f"| pull after it | {one_pull.bytes:,} | {one_pull.bytes_downloaded:,} | "
        f"{100 * one_pull.bytes_downloaded / one_pull.bytes:.2f} % |"
    )
    print(
        "\n| what the publish after one new comment uploads | bytes in the snapshot "
        "| uploaded | share |"
    )
    print("|---|---:|---:|---:|")
    for part, (held, sent) in one.items():
        print(f"| {part} | {held:,} | {sent:,} | {100 * sent / max(held, 1):.1f} % |")
    print(f"\nstore holds {store_bytes:,} bytes for both snapshots\n")
    print("| full download from the local S3 server | median s |")
    print("|---|---:|")
    print(f"| `ghindex pull` (verify + swap) | {statistics.median(pulls):.2f} |")
    print(f"| boto3 download of the same blobs, one by one | {statistics.median(copies):.2f} |")
    print(f"| ratio | {statistics.median(pulls) / statistics.median(copies):.2f}× |")
    print("\n| `ghindex pull` process | value |")
    print("|---|---:|")
    print(
        f"| peak resident memory, full pull of {latest_bytes:,} bytes (max of "
        f"{args.rounds}) | {max(peak_mib):.0f} MiB |"
    )
    idle_ms = statistics.median(idle) * 1000
    print(f"| pull with nothing new, median of {len(idle)} | {idle_ms:.1f} ms |")
    print(
        f"| store requests of a pull with nothing new | "
        f"{', '.join(f'{n} {k}' for k, n in sorted(idle_calls.items()))} |"
    )


if __name__ == "__main__":
    main()
