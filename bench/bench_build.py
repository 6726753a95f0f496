"""Embedding throughput of `ghindex build` against raw `SentenceTransformer.encode`.

N documents of the httpx retrieval eval corpus are stored as GitHub issues in a
fresh workdir. Then, alternating for R rounds, (a) `build(settings, full=True)`
runs on an empty LanceDB directory, so every chunk goes through the model, and
(b) the model's own `encode` runs on exactly the texts build embedded. The model
is loaded once before any timing (`embed._load` is cached per process), so load
time is excluded from both sides. Finally the no-change rebuild is timed.

    python -m bench.bench_build --docs 300 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ghindex.config import DEFAULT_GRAPHQL_URL, DEFAULT_MODEL, Settings
from ghindex.index.build import build
from ghindex.index.chunking import ChunkSettings, chunk_document
from ghindex.index.documents import iter_documents
from ghindex.index.embed import Embedder
from ghindex.state import items
from ghindex.state.database import open_state, transaction

DEFAULT_CORPUS = "/work/shared/eval/httpx-changelog/corpus.jsonl"
REPO = "bench/httpx"
EMPTY_PAGE = {"endCursor": None, "hasNextPage": False}
FALLBACK_TIME = "2025-01-01T00:00:00Z"  # a few corpus records (docs) carry no dates


def read_corpus(path: Path, count: int) -> list[dict]:
    """`count` records spread evenly over the corpus (it is ordered by type)."""
    with path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    step = max(1, len(rows) // count)
    return rows[::step][:count]


def issue_node(number: int, record: dict) -> dict:
    """A corpus record shaped like the issue nodes `fetch` stores."""
    login = record.get("author") or "someone"
    updated = record.get("updated_at") or FALLBACK_TIME
    return {
        "assignees": {"nodes": []},
        "author": {"__typename": "User", "login": login},
        "authorAssociation": "CONTRIBUTOR",
        "body": record["body"],
        "closedAt": None,
        "comments": {"nodes": [], "pageInfo": EMPTY_PAGE, "totalCount": 0},
        "createdAt": record.get("created_at") or updated,
        "id": f"BENCH_{number}",
        "labels": {"nodes": [{"name": name, "color": "ededed"} for name in record["labels"]]},
        "locked": False,
        "milestone": None,
        "number": number,
        "parent": None,
        "reactions": {"totalCount": 0},
        "state": "OPEN" if number % 3 else "CLOSED",
        "stateReason": None,
        "timelineItems": {"nodes": [], "pageInfo": EMPTY_PAGE, "totalCount": 0},
        "title": record["title"],
        "updatedAt": updated,
        "url": f"https://github.com/{REPO}/issues/{number}",
    }


def store_documents(settings: Settings, records: list[dict]) -> None:
    con = open_state(settings.state_path)
    try:
        with transaction(con):
            items.save_repository(con, {"nameWithOwner": REPO, "url": f"https://github.com/{REPO}"})
            nodes = [issue_node(i, r) for i, r in enumerate(records, 1)]
            items.save_issues(con, REPO, nodes)
    finally:
        con.close()


def chunk_texts(settings: Settings) -> list[str]:
    """The texts a full build embeds: unique chunk texts, in build's order."""
    con = open_state(settings.state_path, read_only=True)
    try:
        chunks = [c for d in iter_documents(con) for c in chunk_document(d, ChunkSettings())]
    finally:
        con.close()
    return list({c.content_hash: c.text for c in chunks}.values())


def timed_build(settings: Settings, *, full: bool) -> tuple[float, dict[str, float], int]:
    """Seconds for one build, seconds per phase (from its progress messages), embedded."""
    marks: list[tuple[str, float]] = []
    started = time.perf_counter()
    report = build(settings, full=full, progress=lambda m: marks.append((m, time.perf_counter())))
    seconds = time.perf_counter() - started
    marks.append(("end", time.perf_counter()))
    phases: dict[str, float] = {}
    previous = started
    for message, at in marks:
        phases[_phase(message)] = at - previous
        previous = at
    return seconds, phases, report.embedded


def _phase(message: str) -> str:
    """Name the phase that ends when `message` is printed."""
    for prefix, name in (
        ("loading model", "read + chunk + cache lookup"),
        ("embedding", "model setup"),
        ("writing the index", "encode + cache write"),
        ("end", "write chunks + FTS + manifest"),
    ):
        if message.startswith(prefix):
            return name
    return "drop tables + open state + read documents"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=300, help="documents to index")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--corpus", type=Path, default=Path(DEFAULT_CORPUS))
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="ghindex-bench-build-"))
    try:
        settings = Settings(workdir=workdir, graphql_url=DEFAULT_GRAPHQL_URL, model=DEFAULT_MODEL)
        store_documents(settings, read_corpus(args.corpus, args.docs))
        texts = chunk_texts(settings)
        model = Embedder(DEFAULT_MODEL)._model  # loads (and caches) the model: untimed

        def encode() -> float:
            started = time.perf_counter()
            model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
            return time.perf_counter() - started

        # torch's first pass over new input shapes is slower: warm up on the very texts
        encode()
        build_times, encode_times, phase_runs = [], [], []
        for round_ in range(1, args.rounds + 1):
            # alternate which side goes first, so drift in machine load hits both alike
            if round_ % 2 == 0:
                encode_times.append(encode())
            shutil.rmtree(settings.lance_path, ignore_errors=True)
            seconds, phases, embedded = timed_build(settings, full=True)
            assert embedded == len(texts), (embedded, len(texts))
            build_times.append(seconds)
            phase_runs.append({**phases, "total": seconds})
            if round_ % 2 == 1:
                encode_times.append(encode())
            print(
                f"round {round_}: build {seconds:.2f}s, encode {encode_times[-1]:.2f}s",
                flush=True,
            )

        again = [timed_build(settings, full=False) for _ in range(args.rounds)]
        assert all(embedded == 0 for _, _, embedded in again)

        b, e = statistics.median(build_times), statistics.median(encode_times)
        print(f"\n{args.docs} documents, {len(texts)} unique chunks, {args.rounds} rounds\n")
        print("| | median s | texts/s |")
        print("|---|---:|---:|")
        print(f"| `build(full=True)` | {b:.2f} | {len(texts) / b:.1f} |")
        print(f"| raw `model.encode` (batch 32) | {e:.2f} | {len(texts) / e:.1f} |")
        print(f"| overhead, end to end | {b - e:+.2f} | {100 * (b - e) / e:+.1f} % |")
        ratio = statistics.median(x / y for x, y in zip(build_times, encode_times, strict=True))
        print(f"| overhead, median of per-round ratios | | {100 * (ratio - 1):+.1f} % |")
        own = statistics.median(p["total"] - p["encode + cache write"] for p in phase_runs)
        print(f"| build outside its encode call | {own:.2f} | {100 * own / e:.1f} % of encode |")
        print(
            f"| `build` again, nothing changed (embedded=0) | "
            f"{statistics.median(s for s, _, _ in again):.2f} | |"
        )
        print("\nfull build, median seconds per phase\n")
        print("| phase | median s |")
        print("|---|---:|")
        for name in [n for n in phase_runs[0] if n != "total"]:
            print(f"| {name} | {statistics.median(p[name] for p in phase_runs):.3f} |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
