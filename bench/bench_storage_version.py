"""What writing the state in DuckDB 1.4's storage format costs (#47): file size and fetch
time of the same fetch, state written in STORAGE_VERSION against DuckDB 2.0's default.

Two states per round, interleaved: the bundled sample stored as `ghindex demo` stores it,
and a full fetch of a synthetic repository from the test suite's local GitHub server
(as `bench_fetch.py`), then CHECKPOINT; medians over the rounds.

    python -m bench.bench_storage_version [--rounds 3] [--issues 600] [--pulls 300]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.bench_fetch import REPO, synthetic_repo
from ghindex.config import DEFAULT_MODEL, Settings
from ghindex.github.client import GraphQLClient
from ghindex.github.ingest import fetch
from ghindex.sample.demo import load_sample
from ghindex.state import database
from testkit.github_server import GitHubServer

VERSIONS = (database.STORAGE_VERSION, "v2.0.0")


def written(version: str, store) -> tuple[float, int]:
    """Seconds `store(folder)` took with the state in `version`, and the file's size."""
    database.STORAGE_VERSION = version  # what `_connect` creates files in
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        state = store(Path(tmp))
        con = database.open_state(state)
        con.execute("CHECKPOINT")
        assert database.storage_version(con) == version
        con.close()
        return time.perf_counter() - started, state.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--issues", type=int, default=600)
    parser.add_argument("--pulls", type=int, default=300)
    args = parser.parse_args()
    results: dict[tuple[str, str], list[tuple[float, int]]] = {}
    with GitHubServer() as server:
        synthetic_repo(server, args.issues, args.pulls)

        def sample(folder: Path) -> Path:
            settings = Settings(workdir=folder, graphql_url="", model=DEFAULT_MODEL)
            load_sample(settings)
            return settings.state_path

        def fetched(folder: Path) -> Path:
            with GraphQLClient(server.url, server.token) as client:
                fetch(folder / "state.duckdb", client, [REPO])
            return folder / "state.duckdb"

        for _ in range(args.rounds):
            for version in VERSIONS:
                for name, store in (("sample (demo)", sample), ("fetch", fetched)):
                    results.setdefault((name, version), []).append(written(version, store))
    print(f"| state | storage | median s | bytes (of {args.rounds} rounds) |")
    print("|---|---|---:|---:|")
    for (name, version), runs in results.items():
        seconds = statistics.median(s for s, _ in runs)
        sizes = sorted({b for _, b in runs})
        print(f"| {name} | {version} | {seconds:.2f} | {', '.join(f'{b:,}' for b in sizes)} |")


if __name__ == "__main__":
    main()
