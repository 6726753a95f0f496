"""Cold CLI commands end to end: process start to exit, median of several runs.

Each run is a fresh `python -m ghindex ...` process on an existing workdir (default: the
httpx eval workdir that `python -m bench.eval_retrieval ../shared/eval/httpx-changelog`
leaves in bench/.cache/), so every run pays the imports, opening the snapshot and, for
`search`, loading the query encoder (ONNX Runtime on the cached export, or torch with
`--encoder torch`). Runs of the commands are interleaved so that machine noise falls on
all of them alike.

With `--rows N` the workdir is the httpx one with its index replaced by a synthetic
table of N rows (bench_search's copies of real rows; built once into bench/.cache/).
`--demo` times `ghindex demo` in a fresh directory, whole and by phase.

    python -m bench.bench_cli --runs 10
    python -m bench.bench_cli --rows 100000 --runs 10
    python -m bench.bench_cli --demo
    python -m bench.bench_cli --workdir DIR --encoder torch
    python -m bench.bench_cli --rows 100000 --compare ../old-checkout/src   # then vs now
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CACHE = Path(__file__).resolve().parent / ".cache"
QUERY = "connection pool timeout when the server closes the connection"


def commands(workdir: Path) -> dict[str, list[str]]:
    first = _first_entity(workdir)
    return {
        "search QUERY": ["search", QUERY, "-k", "10"],
        f"show {first}": ["show", first],
        f"related {first}": ["related", first],
        "status": ["status"],
        "sql SELECT count(*) FROM commits": ["sql", "SELECT count(*) FROM commits"],
    }


def _first_entity(workdir: Path) -> str:
    """An item or commit of the workdir, for `show`."""
    import duckdb

    con = duckdb.connect(str(workdir / "state.duckdb"), read_only=True)
    try:
        row = con.execute(
            "SELECT handle FROM (SELECT handle FROM issues UNION ALL SELECT handle FROM "
            "pull_requests UNION ALL SELECT handle FROM commits) ORDER BY handle LIMIT 1"
        ).fetchone()
    finally:
        con.close()
    if row is None:
        sys.exit(f"{workdir} holds no item or commit: build an eval workdir first")
    return row[0]


def time_once(args: list[str], workdir: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ghindex", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"ghindex {' '.join(args)} failed: {done.stderr.strip()[:300]}")
    return elapsed


def synthetic_workdir(base: Path, rows: int) -> Path:
    """`base`'s state beside a synthetic index of `rows` rows (made once, then reused)."""
    target = CACHE / f"cli-{rows}"
    if (target / "lance" / "nearest").is_dir():
        return target
    shutil.rmtree(target, ignore_errors=True)  # made before the lists' current layout
    from bench.bench_search import EVAL, base_documents, base_vectors, synthesise
    from ghindex.config import DEFAULT_MODEL, DEFAULT_PRECISION
    from ghindex.index import nearest
    from ghindex.index import table as index
    from ghindex.index.chunking import ChunkSettings
    from ghindex.index.onnx_encoder import build_encoder

    staging = Path(tempfile.mkdtemp(prefix="cli-", dir=CACHE))
    for name in ("state.duckdb", "manifest.json"):
        shutil.copy(base / name, staging / name)
    embedder = build_encoder(DEFAULT_MODEL, precision=DEFAULT_PRECISION)
    documents = base_documents(EVAL / "corpus.jsonl", 3000, ChunkSettings())
    chunks, vectors = synthesise(documents, base_vectors(documents, embedder), rows)
    index.write_chunks(
        index.connect(staging / "lance"),
        embedder.name,
        chunks,
        vectors,
        embedder.dimension,
        precision=DEFAULT_PRECISION,
    )
    manifest = json.loads((staging / "manifest.json").read_text())
    made_by = nearest.basis(embedder.name, DEFAULT_PRECISION)
    manifest["nearest"] = nearest.manifest_entry(
        nearest.write(staging / "lance", nearest.entities(chunks, vectors), made_by)
    )
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2))
    staging.rename(target)
    return target


def demo_phases(runs: int) -> list[tuple[str, list[float]]]:
    """`ghindex demo` from a fresh directory (process start to exit), and its phases in
    one process: loading the sample, the build (embedding), the four searches."""
    from ghindex.config import DEFAULT_MODEL, Settings
    from ghindex.index.build import build
    from ghindex.query.search import Searcher
    from ghindex.sample.demo import QUERIES, load_sample

    whole, load, built, searched = [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="ghindex-demo-") as fresh:
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "ghindex", "demo"],
                cwd=fresh,
                capture_output=True,
                check=True,
            )
            whole.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory(prefix="ghindex-demo-") as fresh:
            settings = Settings(workdir=Path(fresh) / "demo", graphql_url="", model=DEFAULT_MODEL)
            started = time.perf_counter()
            load_sample(settings)
            load.append(time.perf_counter() - started)
            started = time.perf_counter()
            build(settings)
            built.append(time.perf_counter() - started)
            started = time.perf_counter()
            searcher = Searcher(settings.lance_path)
            for query, filters, mode in QUERIES:
                searcher.search(query, filters=filters, k=3, mode=mode)
            searcher.close()
            searched.append(time.perf_counter() - started)
    return [
        ("`ghindex demo`, whole (fresh directory)", whole),
        ("phase: load the sample into the state", load),
        ("phase: build (chunk, embed, index)", built),
        ("phase: the four searches (incl. loading the encoder)", searched),
    ]


def table(rows: list[tuple[str, list[float]]]) -> None:
    print("| command | median s | p95 s | min s | max s |")
    print("|---|---:|---:|---:|---:|")
    for name, values in rows:
        print(
            f"| {name} | {statistics.median(values):.2f} | "
            f"{float(np.percentile(values, 95)):.2f} | {min(values):.2f} | "
            f"{max(values):.2f} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=CACHE / "eval-httpx-changelog")
    parser.add_argument("--rows", type=int, help="a synthetic index of this many rows")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--encoder", choices=("onnx", "torch"), default="onnx")
    parser.add_argument("--demo", action="store_true", help="time the demo instead")
    parser.add_argument(
        "--compare", type=Path, metavar="SRC", help="also run another checkout's src/, interleaved"
    )
    args = parser.parse_args(argv)
    if args.demo:
        table(demo_phases(args.runs))
        return 0
    workdir = args.workdir.resolve()
    if not (workdir / "lance").is_dir():
        sys.exit(f"no index at {workdir / 'lance'}: run bench.eval_retrieval first")
    if args.rows:
        workdir = synthetic_workdir(workdir, args.rows)
    env = {**os.environ, "GHINDEX_ENCODER": args.encoder, "GHINDEX_WORKDIR": str(workdir)}
    versions = {"": env}
    if args.compare:  # the same commands run by another checkout's code, interleaved
        versions["then "] = {**env, "PYTHONPATH": str(args.compare.resolve())}
    cases = {
        f"{label}`ghindex {name}`": (argv_, version_env)
        for name, argv_ in commands(workdir).items()
        for label, version_env in versions.items()
    }
    for argv_, version_env in cases.values():  # warm the page cache and the export, untimed
        time_once(argv_, workdir, version_env)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, (argv_, version_env) in cases.items():
            times[name].append(time_once(argv_, workdir, version_env))
    from ghindex.index import table as index

    rows = index.connect(workdir / "lance").open_table(index.CHUNKS).count_rows()
    print(f"workdir {workdir} ({rows:,} rows), encoder {args.encoder}, {args.runs} runs")
    table(list(times.items()))
    if args.compare:
        print("\n| command | then / now (medians) |\n|---|---:|")
        for name in (n for n in times if not n.startswith("then ")):
            ratio = statistics.median(times[f"then {name}"]) / statistics.median(times[name])
            print(f"| {name} | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
