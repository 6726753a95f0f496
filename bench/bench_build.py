"""Build throughput with each encoder and precision, against their raw encode.

N documents of the httpx retrieval eval corpus are stored as GitHub issues in a fresh
workdir. Three encoders embed exactly the texts a full build embeds: torch fp32 (the
sentence-transformers model, as builds did before ONNX Runtime), ONNX Runtime fp32 and
ONNX Runtime int8 (`onnx_encoder.build_encoder`, the build's own choice, on the CPU with
every core). Each is loaded and warmed up (one untimed encode of all the texts) before
any timing, so load time is excluded. Then, for R rounds, each encoder in an order that
rotates every round, (a) `build(settings, full=True)` runs on an empty LanceDB
directory with that encoder, so every chunk goes through it, and (b) the encoder's
`encode` runs on the same texts, the two sides alternating which goes first. Finally
the no-change rebuild is timed. Medians and ratios are printed as markdown.

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

from bench.eval_sets import eval_set
from ghindex.config import DEFAULT_GRAPHQL_URL, DEFAULT_MODEL, Settings
from ghindex.index.build import build
from ghindex.index.chunking import ChunkSettings, chunk_document
from ghindex.index.documents import iter_documents
from ghindex.index.embed import Embedder
from ghindex.index.onnx_encoder import build_encoder
from ghindex.progress import Progress
from ghindex.state import items
from ghindex.state.database import open_state, transaction

DEFAULT_CORPUS = str(eval_set("httpx-changelog") / "corpus.jsonl")
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


def timed_build(
    settings: Settings, encoder=None, *, full: bool
) -> tuple[float, dict[str, float], int]:
    """Seconds for one build, seconds per phase (from its progress messages), embedded."""
    marks: list[tuple[str, float]] = []
    precision = encoder.precision if encoder is not None else None
    factory = (lambda _name: encoder) if encoder is not None else None
    started = time.perf_counter()
    report = build(
        settings,
        full=full,
        precision=precision,
        embedder_factory=factory,
        progress=Progress(lambda m: marks.append((m, time.perf_counter()))),
    )
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


def encoders() -> dict[str, object]:
    """The three encoders, loaded once: the torch model and ONNX Runtime sessions."""
    return {
        "torch fp32": Embedder(DEFAULT_MODEL),
        "onnx fp32": build_encoder(DEFAULT_MODEL, precision="fp32", device="cpu"),
        "onnx int8": build_encoder(DEFAULT_MODEL, precision="int8", device="cpu"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=300, help="documents to index")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every encoder")
    parser.add_argument("--corpus", type=Path, default=Path(DEFAULT_CORPUS))
    parser.add_argument("--json", action="store_true", help="also print the raw times")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="ghindex-bench-build-"))
    try:
        settings = Settings(workdir=workdir, graphql_url=DEFAULT_GRAPHQL_URL, model=DEFAULT_MODEL)
        store_documents(settings, read_corpus(args.corpus, args.docs))
        texts = chunk_texts(settings)
        loaded = encoders()
        names = list(loaded)
        vectors = {name: loaded[name].encode(texts) for name in names}  # warm-up, untimed
        builds: dict[str, list[float]] = {name: [] for name in names}
        encodes: dict[str, list[float]] = {name: [] for name in names}
        outside: dict[str, list[float]] = {name: [] for name in names}

        def encode(name: str) -> None:
            started = time.perf_counter()
            loaded[name].encode(texts)
            encodes[name].append(time.perf_counter() - started)

        for round_ in range(args.rounds):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in order:
                # alternate which side goes first, so drift in load hits both alike
                if round_ % 2:
                    encode(name)
                shutil.rmtree(settings.lance_path, ignore_errors=True)
                seconds, phases, embedded = timed_build(settings, loaded[name], full=True)
                assert embedded == len(texts), (embedded, len(texts))
                builds[name].append(seconds)
                outside[name].append(seconds - phases["encode + cache write"])
                if not round_ % 2:
                    encode(name)
                print(
                    f"round {round_ + 1} {name}: build {seconds:.2f}s, "
                    f"encode {encodes[name][-1]:.2f}s",
                    flush=True,
                )

        again = [timed_build(settings, full=False) for _ in range(args.rounds)]
        assert all(embedded == 0 for _, _, embedded in again)
        report(args, texts, names, builds, encodes, outside, vectors, again)
        if args.json:
            print(json.dumps({"builds": builds, "encodes": encodes}, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def report(args, texts, names, builds, encodes, outside, vectors, again) -> None:
    n = len(texts)
    torch_build = statistics.median(builds[names[0]])
    print(f"\n{args.docs} documents, {n} unique chunks, {args.rounds} rounds\n")
    print(
        "| encoder | build s | build chunks/s | vs torch build | encode s | encode chunks/s "
        "| build / encode | build outside encode | cosine to torch (min / mean) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in names:
        b, e = statistics.median(builds[name]), statistics.median(encodes[name])
        ratio = statistics.median(x / y for x, y in zip(builds[name], encodes[name], strict=True))
        own = statistics.median(outside[name])
        cos = (vectors[name] * vectors[names[0]]).sum(axis=1)
        agreement = "—" if name == names[0] else f"{cos.min():.4f} / {cos.mean():.4f}"
        print(
            f"| {name} | {b:.2f} | {n / b:.1f} | {torch_build / b:.2f}× | {e:.2f} | "
            f"{n / e:.1f} | {100 * (ratio - 1):+.1f} % | {own:.2f} s "
            f"({100 * own / e:.1f} %) | {agreement} |"
        )
    print(
        f"\n`build` again, nothing changed (embedded=0): "
        f"{statistics.median(s for s, _, _ in again):.2f} s"
    )
    for name in names:
        times = ", ".join(
            f"{b:.1f}/{e:.1f}" for b, e in zip(builds[name], encodes[name], strict=True)
        )
        print(f"- {name}, build/encode s per round: {times}")


if __name__ == "__main__":
    main()
