"""Cold CLI commands end to end: process start to exit, median of several runs.

Each run is a fresh `python -m ghindex ...` process on an existing workdir (default: the
httpx eval workdir that `python -m bench.eval_retrieval ../shared/eval/httpx-changelog`
leaves in bench/.cache/), so every run pays the imports, opening the snapshot and, for
`search`, loading the query encoder (ONNX Runtime on the cached export, or torch with
`--encoder torch`). Runs of the commands are interleaved so that machine noise falls on
all of them alike.

    python -m bench.bench_cli --runs 7
    python -m bench.bench_cli --workdir DIR --encoder torch
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache"
QUERY = "connection pool timeout when the server closes the connection"


def commands(workdir: Path) -> dict[str, list[str]]:
    first = _first_entity(workdir)
    return {
        "search QUERY": ["search", QUERY, "-k", "10"],
        f"show {first}": ["show", first],
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
        [sys.executable, "-m", "ghindex", *args], cwd=workdir, env=env,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"ghindex {' '.join(args)} failed: {done.stderr.strip()[:300]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=CACHE / "eval-httpx-changelog")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--encoder", choices=("onnx", "torch"), default="onnx")
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    if not (workdir / "lance").is_dir():
        sys.exit(f"no index at {workdir / 'lance'}: run bench.eval_retrieval first")
    env = {**os.environ, "GHINDEX_ENCODER": args.encoder, "GHINDEX_WORKDIR": str(workdir)}
    cases = commands(workdir)
    for args_ in cases.values():  # warm the page cache and the ONNX export, untimed
        time_once(args_, workdir, env)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, args_ in cases.items():
            times[name].append(time_once(args_, workdir, env))
    manifest = json.loads((workdir / "manifest.json").read_text(encoding="utf-8"))
    chunks = manifest.get("counts", {}).get("chunks")
    print(f"workdir {workdir} ({chunks} rows), encoder {args.encoder}, {args.runs} runs")
    print("| command | median s | min s | max s |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        print(f"| `ghindex {name}` | {statistics.median(values):.2f} | {min(values):.2f} "
              f"| {max(values):.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
