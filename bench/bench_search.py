"""Search latency (p50/p95) of `Searcher.search` per mode at several index sizes.

Real vectors for every size would take hours on a small CPU, so the chunks of the
first documents of the httpx retrieval eval corpus are embedded once (cached in
bench/.cache/), and larger tables are synthesised from them: each copy of a
document gets a new repo/number/handle, varied type, state and labels, and its
vectors a small random perturbation (re-normalised). Tables are written with
`ghindex.index.table.write_chunks`, so schema, FTS index and search code are the
product's. Queries are the eval set's queries.

    python -m bench.bench_search --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_build import read_corpus, store_documents
from bench.eval_sets import eval_set
from ghindex.config import (
    DEFAULT_GRAPHQL_URL,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    FP32,
    PRECISIONS,
    Settings,
)
from ghindex.index import table as index
from ghindex.index.chunking import Chunk, ChunkSettings, chunk_document
from ghindex.index.documents import Document, iter_documents
from ghindex.index.onnx_encoder import build_encoder
from ghindex.query.search import Filters, Searcher
from ghindex.state.database import open_state

EVAL = eval_set("httpx-changelog")
CACHE = Path(__file__).resolve().parent / ".cache"
REPOS = ("encode/httpx", "encode/httpcore", "encode/starlette", "encode/uvicorn")
LABELS = ("bug", "enhancement", "docs", "question", "http/2", "refactor", "tests", "ci")
FILTER = Filters(states=("open",), labels=("bug",))
CASES = {
    "hybrid": ("hybrid", None),
    "dense": ("dense", None),
    "sparse": ("sparse", None),
    "hybrid + state=open + label=bug": ("hybrid", FILTER),
}

# pieces of a search, timed alone: (searcher, embedder, query) -> anything
PARTS = {
    "part of dense, hybrid: query embedding": lambda s, _e, q: s._embedder.encode([q]),
    "part of every mode: exact-reference lookup": lambda s, _e, q: s._exact(q.strip(), None),
    "part of the filtered case: unmatched-filter check": lambda s, _e, _q: s._unmatched(FILTER),
}


def base_documents(
    corpus: Path, max_chunks: int, chunking: ChunkSettings | None = None
) -> list[list[Chunk]]:
    """Chunks of corpus records stored as issues and read back as `build` does."""
    workdir = Path(tempfile.mkdtemp(prefix="ghindex-bench-search-"))
    try:
        settings = Settings(workdir=workdir, graphql_url=DEFAULT_GRAPHQL_URL, model=DEFAULT_MODEL)
        store_documents(settings, read_corpus(corpus, 10**9))
        con = open_state(settings.state_path, read_only=True)
        try:
            docs = list(iter_documents(con))
        finally:
            con.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    documents, total = [], 0
    for doc in docs:
        chunks = chunk_document(doc, chunking or ChunkSettings())
        if total + len(chunks) > max_chunks:
            break
        documents.append(chunks)
        total += len(chunks)
    return documents


def base_vectors(documents: list[list[Chunk]], embedder: Any) -> dict[str, np.ndarray]:
    """Vectors by content hash, from bench/.cache/ or embedded now (and cached)."""
    precision = getattr(embedder, "precision", FP32)
    suffix = "" if precision == FP32 else f"-{precision}"
    path = CACHE / f"vectors-{embedder.name.replace('/', '--')}{suffix}.npz"
    cached: dict[str, np.ndarray] = {}
    if path.exists():
        with np.load(path) as data:
            cached = dict(zip(data["hashes"].tolist(), data["vectors"], strict=True))
    texts = {c.content_hash: c.text for chunks in documents for c in chunks}
    missing = [h for h in texts if h not in cached]
    if missing:
        print(f"embedding {len(missing)} chunks (cached in {path})", flush=True)
        cached.update(zip(missing, embedder.encode([texts[h] for h in missing]), strict=True))
        CACHE.mkdir(exist_ok=True)
        vectors = np.stack([cached[h] for h in texts])
        np.savez(path, hashes=np.array(list(texts)), vectors=vectors)
    return {h: cached[h] for h in texts}


def synthesise(
    documents: list[list[Chunk]],
    vectors: dict[str, np.ndarray],
    size: int,
    seed: int = 0,
    spread: float = 0.01,
    start: int = 0,
) -> tuple[list[Chunk], dict[str, np.ndarray]]:
    """`size` chunks: copies of the base documents with new identities and nearby vectors
    (the base vector plus normal noise of `spread` per dimension, re-normalised). Copies
    are numbered from `start` + 1, so that a table made in slices goes on numbering
    (only the very first copy of each base document keeps its vector unperturbed)."""
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    chunks: list[Chunk] = []
    out: dict[str, np.ndarray] = {}
    number = start
    while len(chunks) < size:
        for base in documents:
            number += 1
            first_copy = number <= len(documents)
            original = base[0].document
            doc = _variant(original, number, pick)
            for chunk in base:
                text = chunk.text.replace(original.repo, doc.repo, 1)  # the breadcrumb
                # copies share texts but not vectors: the hash (a plain column) keeps them apart
                digest = hashlib.sha256(f"{number}:{text}".encode()).hexdigest()
                vector = vectors[chunk.content_hash]
                if not first_copy:
                    vector = vector + rng.normal(0.0, spread, vector.shape).astype(np.float32)
                    vector /= np.linalg.norm(vector)
                out[digest] = vector
                chunks.append(Chunk(f"{doc.handle}::{chunk.index}", doc, chunk.index, text, digest))
                if len(chunks) == size:
                    return chunks, out
    return chunks, out


def _variant(doc: Document, number: int, pick: random.Random) -> Document:
    repo = pick.choice(REPOS)
    kind = pick.choice(("issue", "pull_request"))
    states = ("open", "closed", "merged") if kind == "pull_request" else ("open", "closed")
    handle = f"{repo}#{number}"
    return replace(
        doc,
        handle=handle,
        entity=handle,
        entity_type=kind,
        repo=repo,
        type=kind,
        number=number,
        state=pick.choices(states, weights=(3, 5, 4)[: len(states)])[0],
        labels=tuple(sorted(pick.sample(LABELS, pick.choice((0, 0, 1, 1, 2, 3))))),
        url=f"https://github.com/{repo}/{'pull' if kind == 'pull_request' else 'issues'}/{number}",
    )


def _ms(call: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    call(*args)
    return 1000 * (time.perf_counter() - started)


def _matches(hit) -> bool:
    return hit.state in FILTER.states and set(FILTER.labels) <= set(hit.labels)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated chunk counts")
    parser.add_argument("--queries", type=int, default=100, help="eval queries to time")
    parser.add_argument("--base-chunks", type=int, default=3000, help="chunks really embedded")
    parser.add_argument("--corpus", type=Path, default=EVAL / "corpus.jsonl")
    parser.add_argument("--queries-file", type=Path, default=EVAL / "queries.jsonl")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION)
    parser.add_argument("--tail-tokens", type=int, help="text a budget's last row carries")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    with args.queries_file.open(encoding="utf-8") as f:
        queries = [json.loads(line)["query"] for line in f if line.strip()][: args.queries]
    embedder = build_encoder(DEFAULT_MODEL, precision=args.precision)
    chunking = ChunkSettings()
    if args.tail_tokens is not None:
        chunking = replace(chunking, tail_tokens=args.tail_tokens)
    documents = base_documents(args.corpus, args.base_chunks, chunking)
    vectors = base_vectors(documents, embedder)
    print(f"{len(documents)} base documents, {len(vectors)} embedded chunks", flush=True)
    embedder.encode(queries)  # a first pass over new input shapes is slower

    rows = []
    for size in sizes:
        lance = Path(tempfile.mkdtemp(prefix="ghindex-bench-search-"))
        try:
            chunks, table_vectors = synthesise(documents, vectors, size)
            started = time.perf_counter()
            db = index.connect(lance)
            index.write_chunks(
                db,
                embedder.name,
                chunks,
                table_vectors,
                embedder.dimension,
                precision=args.precision,
            )
            write_s = time.perf_counter() - started
            print(f"{size} chunks written in {write_s:.1f}s", flush=True)
            searcher = Searcher(lance)
            for query in queries[:5]:  # warm-up: every case, a few queries
                for mode, filters in CASES.values():
                    searcher.search(query, filters=filters, k=args.k, mode=mode)
            times: dict[str, list[float]] = {name: [] for name in (*CASES, *PARTS)}
            for query in queries:  # everything side by side, query by query
                for name, (mode, filters) in CASES.items():
                    started = time.perf_counter()
                    response = searcher.search(query, filters=filters, k=args.k, mode=mode)
                    times[name].append(1000 * (time.perf_counter() - started))
                    assert not filters or all(_matches(hit) for hit in response.results)
                for name, part in PARTS.items():
                    times[name].append(_ms(part, searcher, embedder, query))
            for name, values in times.items():
                rows.append((size, name, percentile(values, 50), percentile(values, 95)))
        finally:
            shutil.rmtree(lance, ignore_errors=True)

    print(f"\n{len(queries)} queries, k={args.k}, {args.precision}, Searcher.search in ms\n")
    print("| chunks | mode | p50 ms | p95 ms |")
    print("|---:|---|---:|---:|")
    for size, name, p50, p95 in rows:
        print(f"| {size:,} | {name} | {p50:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main()
