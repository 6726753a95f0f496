"""An index of up to millions of chunks: write, search, recall, nearest lists, memory.

Tables are synthesised as in bench_search.py (real vectors of the httpx eval corpus's
first chunks, copied with new identities and perturbed vectors) and written by the
product's own `write_chunks`, which streams them to LanceDB and builds the full-text,
vector and scalar indexes. Each measurement runs in a process of its own, so that its
peak memory is its own:

- write: `write_chunks` of the whole table from a stream (the process's peak RSS);
- search: a `Searcher` as `ghindex serve` opens one, timed per mode, filtered and not,
  query by query side by side; dense recall@10 of the index against exact kNN; the
  searching process's RSS after the queries; then, with nearest lists of random
  neighbours of random types written beside the table (what reading them costs does
  not depend on what they hold), hybrid search with and without lifting the best hit's
  nearest items (`lift_nearest`), query by query side by side (`*_lift_p50_ms`,
  `*_nolift_p50_ms`);
- nearest: every entity's nearest list (`index.nearest.neighbours`), its time and peak
  memory, and its recall@10 against the exact lists of a sample of entities.

    python -m bench.bench_scale --sizes 100000,300000,1000000
    python -m bench.bench_scale --sizes 300000 --json   # {"300000": {...}} on stdout
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_search import EVAL, FILTER, base_documents, base_vectors, synthesise
from bench.memory import peak_mb, rss_mb
from ghindex.config import DEFAULT_MODEL
from ghindex.index.chunking import Chunk
from ghindex.index.onnx_encoder import build_encoder

PRECISION = "int8"  # what `build` makes where ONNX Runtime runs the model
BASE_CHUNKS = 3000
CASES = {
    "hybrid": ("hybrid", None),
    "dense": ("dense", None),
    "sparse": ("sparse", None),
    "filtered_hybrid": ("hybrid", FILTER),
    "filtered_dense": ("dense", FILTER),
    "filtered_sparse": ("sparse", FILTER),
}


class Window(Mapping[str, np.ndarray]):
    """The vectors of the last `size` chunks a stream made: what `write_chunks` reads
    for the batch it is converting, without a map of the whole table."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.held: collections.OrderedDict[str, np.ndarray] = collections.OrderedDict()

    def add(self, key: str, vector: np.ndarray) -> None:
        self.held[key] = vector
        while len(self.held) > self.size:
            self.held.popitem(last=False)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.held[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.held)

    def __len__(self) -> int:
        return len(self.held)


def streamed(size: int, window: Window, spread: float = 0.02) -> Iterator[Chunk]:
    """`synthesise`'s chunks, made 20,000 at a time (each slice numbering its copies on
    from the last), their vectors left in `window`."""
    documents = base_documents(EVAL / "corpus.jsonl", BASE_CHUNKS)
    base = _base_vectors(documents)
    made, part, numbered = 0, 0, 0
    while made < size:
        chunks, vectors = synthesise(
            documents, base, min(size - made, 20_000), part, spread, start=numbered
        )
        for chunk in chunks:
            window.add(chunk.content_hash, vectors[chunk.content_hash])
            yield chunk
        made += len(chunks)
        numbered = chunks[-1].document.number
        part += 1


def _base_vectors(documents: list[list[Chunk]]) -> dict[str, np.ndarray]:
    return base_vectors(documents, _Lazy(lambda: build_encoder(DEFAULT_MODEL, precision=PRECISION)))


class _Lazy:
    """An encoder loaded only if a base vector is not cached yet."""

    name = DEFAULT_MODEL
    precision = PRECISION

    def __init__(self, make: Any) -> None:
        self.make, self.made = make, None

    def encode(self, texts: list[str]) -> np.ndarray:
        self.made = self.made or self.make()
        return self.made.encode(texts)


def write_child(lance: Path, size: int, spread: float, vector_index: str) -> dict[str, Any]:
    from ghindex.index import table as index

    index.VECTOR_INDEX = vector_index
    window = Window(4 * index.WRITE_BATCH)
    rows = streamed(size, window, spread)
    first = next(rows)  # the base vectors are loaded: what follows is the write's
    before = rss_mb()
    started = time.perf_counter()
    db = index.connect(lance)

    def again() -> Iterator[Chunk]:
        yield first
        yield from rows

    dimension = len(window[first.content_hash])
    written = index.write_chunks(db, DEFAULT_MODEL, again(), window, dimension, precision=PRECISION)
    return {
        "write_s": round(time.perf_counter() - started, 1),
        "rows": written["inserted"],
        "write_peak_rss_mb": round(peak_mb()),
        "write_start_rss_mb": round(before),
    }


def search_child(lance: Path, queries: list[str], recall_queries: int) -> dict[str, Any]:
    from ghindex.query.search import DEPTH, Searcher

    searcher = Searcher(lance)
    for query in queries[:5]:  # warm-up: every case
        for mode, filters in CASES.values():
            searcher.search(query, filters=filters, mode=mode)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for query in queries:
        for name, (mode, filters) in CASES.items():
            started = time.perf_counter()
            searcher.search(query, filters=filters, mode=mode)
            times[name].append(1000 * (time.perf_counter() - started))
    found = {f"{name}_p50_ms": round(statistics.median(v), 1) for name, v in times.items()}
    found.update(
        {f"{name}_p95_ms": round(float(np.percentile(v, 95)), 1) for name, v in times.items()}
    )
    found["search_rss_mb"] = round(rss_mb())
    found["search_peak_rss_mb"] = round(peak_mb())
    recalls, exact_sets = [], []
    depth = max(DEPTH[0], DEPTH[1] * 10)  # the rows dense search asks for at k = 10
    vectors = searcher._embedder.encode(queries[:recall_queries])
    for vector in vectors:
        indexed = searcher._knn(vector).select(["id"]).limit(depth).to_list()[:10]
        exact = (
            searcher.table.search(vector, query_type="vector")
            .distance_type("cosine")
            .bypass_vector_index()
            .select(["id"])
            .limit(10)
            .to_list()
        )
        exact_sets.append([r["id"] for r in exact])
        recalls.append(len({r["id"] for r in indexed} & {r["id"] for r in exact}) / 10)
    found["dense_recall_at_10"] = round(statistics.mean(recalls), 3)
    found["probes"] = searcher._probes
    if searcher._probes:  # what other refine factors would give, beside the default
        for refine in (8, 16):
            got, ms = [], []
            for vector in vectors:
                started = time.perf_counter()
                rows = (
                    searcher.table.search(vector, query_type="vector")
                    .distance_type("cosine")
                    .nprobes(searcher._probes)
                    .refine_factor(refine)
                    .select(["id"])
                    .limit(depth)
                    .to_list()
                )
                ms.append(1000 * (time.perf_counter() - started))
                got.append({r["id"] for r in rows[:10]})
            exact_ids = [set(e) for e in exact_sets]
            hits = [len(a & b) / 10 for a, b in zip(got, exact_ids, strict=True)]
            found[f"dense_recall_at_10_refine{refine}"] = round(statistics.mean(hits), 3)
            found[f"knn_p50_ms_refine{refine}"] = round(statistics.median(ms), 1)
    found.update(_lift_cost(searcher, lance, queries))
    searcher.close()
    return found


def _lift_cost(plain: Any, lance: Path, queries: list[str]) -> dict[str, Any]:
    """Hybrid p50 with and without the nearest-items lift, side by side. `plain` looked
    for nearest lists before they were written, so it ranks without them."""
    from ghindex.query.search import Searcher

    listed = _random_lists(plain, lance)
    lifting = Searcher(lance)
    times: dict[str, list[float]] = collections.defaultdict(list)
    for query in queries:
        for name, filters in (("hybrid", None), ("filtered_hybrid", FILTER)):
            for label, searcher in (("nolift", plain), ("lift", lifting)):
                started = time.perf_counter()
                searcher.search(query, filters=filters)
                times[f"{name}_{label}"].append(1000 * (time.perf_counter() - started))
    lifting.close()
    found = {f"{name}_p50_ms": round(statistics.median(v), 1) for name, v in times.items()}
    found["nearest_entities"] = listed
    return found


def _random_lists(searcher: Any, lance: Path) -> int:
    """Nearest lists (`index/nearest.py`'s layout) of 10 random neighbours of random
    types for every entity of the table, and a manifest beside it naming them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ghindex.index import nearest
    from ghindex.vocabulary.layout import MANIFEST

    heads = searcher.table.search().where("chunk_index = 0").select(["entity"]).limit(None)
    entities = sorted(set(heads.to_arrow()["entity"].to_pylist()))
    count = nearest.buckets(len(entities))
    members: dict[int, list[str]] = collections.defaultdict(list)
    for entity in entities:
        members[nearest.bucket_of(entity, count)].append(entity)
    rng = np.random.default_rng(0)
    kinds = np.array(["issue", "pull_request", "commit"])
    folder = lance / nearest.NEAREST_DIR
    folder.mkdir()
    for bucket, names in members.items():
        rows = len(names) * nearest.K
        picked = rng.integers(0, len(entities), rows)
        table = pa.table(
            {
                "entity": np.repeat(names, nearest.K),
                "rank": np.tile(np.arange(1, nearest.K + 1), len(names)).astype(np.int32),
                "neighbour": [entities[i] for i in picked],
                "score": np.sort(rng.uniform(0.3, 0.9, rows)).astype(np.float32)[::-1],
                "type": kinds[rng.integers(0, 3, rows)],
            }
        )
        pq.write_table(table, nearest.bucket_file(folder, bucket))
    manifest = {"nearest": nearest.manifest_entry(len(entities))}
    (lance.parent / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return len(entities)


def nearest_child(size: int, spread: float, sample: int) -> dict[str, Any]:
    from ghindex.index import nearest

    window = Window(10**9)  # the lists need every vector at once, as `build` holds them
    chunks = list(streamed(size, window, spread))
    now = nearest.entities(chunks, window.held)
    del chunks, window
    started = time.perf_counter()
    found, _scores = nearest.neighbours(now.means)
    seconds = time.perf_counter() - started
    rows = np.random.default_rng(0).choice(len(now.means), min(sample, len(now.means)), False)
    exact, _ = nearest._scored(now.means, np.sort(rows), np.arange(len(now.means)), found.shape[1])
    got = found[np.sort(rows)]
    recall = np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(got, exact, strict=True)])
    return {
        "entities": len(now.means),
        "nearest_s": round(seconds, 1),
        "nearest_recall_at_10": round(float(recall), 3),
        "nearest_peak_rss_mb": round(peak_mb()),
    }


def _child(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_scale", "--child", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise SystemExit(f"bench child {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,300000,1000000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--nearest-sample", type=int, default=1000)
    parser.add_argument(
        "--spread",
        type=float,
        default=0.02,
        help="noise per dimension of a copy's vector (bench_search's 0.01 makes each base "
        "document's copies near-identical: at 1M rows the true top 10 is a tie of ~660)",
    )
    parser.add_argument(
        "--also-cache-mb",
        type=int,
        help="search the table again with GHINDEX_INDEX_CACHE_MB at this size (figures "
        "suffixed _cache<N>), beside the default",
    )
    parser.add_argument("--no-nearest", action="store_true", help="leave the nearest lists out")
    parser.add_argument(
        "--vector-index",
        choices=("IVF_HNSW_SQ", "IVF_PQ"),
        default="IVF_PQ",
        help="the vector index the write builds (`index.table.VECTOR_INDEX`)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    with (EVAL / "queries.jsonl").open(encoding="utf-8") as f:
        queries = [json.loads(line)["query"] for line in f if line.strip()][: args.queries]

    if args.child:
        kind, *rest = args.child
        if kind == "write":
            out = write_child(Path(rest[0]), int(rest[1]), args.spread, args.vector_index)
        elif kind == "search":
            out = search_child(Path(rest[0]), queries, args.recall_queries)
        else:
            out = nearest_child(int(rest[0]), args.spread, args.nearest_sample)
        print(json.dumps(out))
        return

    _base_vectors(base_documents(EVAL / "corpus.jsonl", BASE_CHUNKS))  # cached once
    figures: dict[str, dict[str, Any]] = {}
    for size in [int(s) for s in args.sizes.split(",")]:
        lance = Path(tempfile.mkdtemp(prefix="ghindex-bench-scale-")) / "lance"
        try:
            say = sys.stderr if args.json else sys.stdout
            spread = f"--spread={args.spread}"
            kind = f"--vector-index={args.vector_index}"
            figures[str(size)] = found = _child("write", str(lance), str(size), spread, kind)
            print(f"{size:,} rows written in {found['write_s']} s", file=say, flush=True)
            searching = (
                "search",
                str(lance),
                f"--queries={args.queries}",
                f"--recall-queries={args.recall_queries}",
                spread,
            )
            found.update(_child(*searching))
            print(f"{size:,} rows searched", file=say, flush=True)
            if args.also_cache_mb:
                cache = {"GHINDEX_INDEX_CACHE_MB": str(args.also_cache_mb)}
                searched = _child(*searching, env=cache)
                found.update({f"{k}_cache{args.also_cache_mb}": v for k, v in searched.items()})
            if not args.no_nearest:
                sample = f"--nearest-sample={args.nearest_sample}"
                found.update(_child("nearest", str(size), sample, spread))
        finally:
            shutil.rmtree(lance.parent, ignore_errors=True)
    if args.json:
        print(json.dumps(figures))
        return
    names = sorted({name for found in figures.values() for name in found})
    print("\n| figure | " + " | ".join(f"{int(s):,}" for s in figures) + " |")
    print("|---|" + "---:|" * len(figures))
    for name in names:
        print(f"| {name} | " + " | ".join(str(f.get(name, "")) for f in figures.values()) + " |")


if __name__ == "__main__":
    main()
