"""What indexes ghindex does not build yet would buy on a large `chunks` table.

On a synthetic table (built as in bench_search.py), times per query, side by side:
brute-force kNN (what `Searcher` does today) against an IVF_HNSW_SQ and an IVF_PQ
vector index, with recall@10 against the brute-force top 10; then the exact
reference lookup every search runs (`Searcher._exact`) before and after BTree
indexes on `handle` and `entity`.

    python -m bench.bench_indexes --size 100000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from lancedb.index import BTree, IvfHnswSq, IvfPq

from bench.bench_search import EVAL, base_documents, base_vectors, synthesise
from ghindex.config import DEFAULT_MODEL
from ghindex.index import table as index
from ghindex.index.embed import Embedder
from ghindex.query.search import Searcher

DEPTH = 200  # rows `Searcher` asks each retriever for at k=10


def knn(table, vector, *, flat: bool, refine: int | None = None) -> tuple[float, list[str]]:
    started = time.perf_counter()
    query = table.search(vector, query_type="vector").distance_type("cosine").select(["id"])
    if flat:
        query = query.bypass_vector_index()
    if refine:
        query = query.refine_factor(refine)
    rows = query.limit(DEPTH).to_list()
    return 1000 * (time.perf_counter() - started), [r["id"] for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="chunks in the table")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--base-chunks", type=int, default=3000)
    args = parser.parse_args()

    with (EVAL / "queries.jsonl").open(encoding="utf-8") as f:
        queries = [json.loads(line)["query"] for line in f if line.strip()][: args.queries]
    embedder = Embedder(DEFAULT_MODEL)
    documents = base_documents(EVAL / "corpus.jsonl", args.base_chunks)
    chunks, vectors = synthesise(documents, base_vectors(documents, embedder), args.size)
    query_vectors = embedder.encode(queries)
    lance = Path(tempfile.mkdtemp(prefix="ghindex-bench-indexes-"))
    try:
        db = index.connect(lance)
        index.write_chunks(db, embedder.name, chunks, vectors, embedder.dimension)
        table = db.open_table(index.CHUNKS)
        print(f"\n{args.size:,} chunks, {len(queries)} queries, top {DEPTH} rows per query\n")
        print("| vector search | build s | p50 ms | p95 ms | recall@10 vs brute force |")
        print("|---|---:|---:|---:|---:|")
        for name, config in (("IVF_HNSW_SQ", IvfHnswSq), ("IVF_PQ", IvfPq)):
            started = time.perf_counter()
            table.create_index("vector", config=config(distance_type="cosine"), replace=True)
            built = time.perf_counter() - started
            cases = {
                "brute force (today)": {"flat": True},
                name: {"flat": False},
                f"{name}, refine_factor 5": {"flat": False, "refine": 5},
            }
            times = {case: [] for case in cases}
            recall = {case: [] for case in cases}
            for vector in [*query_vectors[:5], *query_vectors]:  # first 5: warm-up
                truth = None
                for case, options in cases.items():
                    ms, ids = knn(table, vector, **options)
                    truth = truth or set(ids[:10])
                    times[case].append(ms)
                    recall[case].append(len(truth & set(ids[:10])) / 10)
            for case in cases:
                values = times[case][5:]
                print(
                    f"| {case} | {'' if case.startswith('brute') else f'{built:.1f}'} "
                    f"| {statistics.median(values):.1f} "
                    f"| {statistics.quantiles(values, n=20)[-1]:.1f} "
                    f"| {statistics.mean(recall[case][5:]):.3f} |"
                )

        searcher = Searcher(lance)
        print("\n| exact-reference lookup (`Searcher._exact`) | p50 ms |")
        print("|---|---:|")
        for label in ("no scalar index (today)", "BTree on handle and entity"):
            if label.startswith("BTree"):
                for column in ("handle", "entity"):
                    table.create_index(column, config=BTree())
                searcher = Searcher(lance)
            times = []
            for query in [*queries[:5], *queries]:
                started = time.perf_counter()
                searcher._exact(query.strip(), None)
                times.append(1000 * (time.perf_counter() - started))
            print(f"| {label} | {statistics.median(times[5:]):.1f} |")
    finally:
        shutil.rmtree(lance, ignore_errors=True)


if __name__ == "__main__":
    main()
