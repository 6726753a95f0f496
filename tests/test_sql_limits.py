"""SQL's memory, per statement and in all (`query/sql_process.py`): every statement's
process stays within `GHINDEX_SQL_MEMORY_MB` (512 MB), the process itself included, and
at most `GHINDEX_SQL_PROCESSES` (2) run at once, whatever the statements and however
many callers there are.

The statements are generated (hypothesis): functions that build one huge value, lists
and strings, aggregates and joins, of sizes from small to far past the limit. The
children's memory is read from /proc by a watcher thread while they run (every 10 ms),
not taken from ghindex's own account."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.errors import GhindexError
from ghindex.query.snapshot import Snapshot
from testkit.github_server import issue_node
from testkit.state import settings_for, store_issues

pytestmark = pytest.mark.slow  # each statement starts a process; bombs run for seconds

LIMIT_MB = 512  # the documented default of GHINDEX_SQL_MEMORY_MB
PLACES = 2  # the documented default of GHINDEX_SQL_PROCESSES
PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory):
    """A state database of three issues: what SQL reads (no index needed)."""
    config = settings_for(tmp_path_factory.mktemp("sql") / "work")
    store_issues(config, [issue_node(n, title=f"Issue {n}", body="Text.") for n in (1, 2, 3)])
    return config.workdir


class Watcher(threading.Thread):
    """Reads the resident memory of this process's children until stopped: the most one
    held, the most they held together, and the most that ran at once."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.most_one = self.most_sum = 0.0
        self.most_at_once = 0

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            sizes = [_rss_mb(pid) for pid in _children(me)]
            sizes = [s for s in sizes if s is not None]
            if sizes:
                self.most_one = max(self.most_one, max(sizes))
                self.most_sum = max(self.most_sum, sum(sizes))
                self.most_at_once = max(self.most_at_once, len(sizes))
            time.sleep(0.01)

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry.name))
    return found


def _rss_mb(pid: int) -> float | None:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return None


def run(state_dir: Path, statement: str) -> str:
    """The statement's outcome: 'ok', or its error line."""
    try:
        Snapshot(state_dir).sql(statement, timeout=10)
    except GhindexError as exc:
        assert "\n" not in str(exc)
        return str(exc)
    return "ok"


# Statements that build large values, of any size: each is answered or refused.
_N = st.sampled_from([10**4, 10**6, 3 * 10**7, 2 * 10**8, 2 * 10**9])
_BOMBS = st.one_of(
    _N.map(lambda n: f"SELECT len(range({n}))"),
    _N.map(lambda n: f"SELECT length(repeat('x', {n}))"),
    _N.map(lambda n: f"SELECT len(list_concat(range({n}), range({n})))"),
    _N.map(lambda n: f"SELECT len(list(i)) FROM range({n}) t(i)"),
    _N.map(lambda n: f"SELECT length(string_agg(repeat('y', 100), ',')) FROM range({n // 100})"),
    _N.map(lambda n: f"SELECT count(DISTINCT md5(i::VARCHAR)) FROM range({n // 10}) t(i)"),
)


@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_BOMBS)
def test_a_statement_process_stays_within_the_documented_memory_limit(state_dir, statement):
    with Watcher() as watcher:
        outcome = run(state_dir, statement)

    assert outcome == "ok" or outcome.startswith("query: "), outcome
    assert "unexpected" not in outcome
    assert watcher.most_one <= LIMIT_MB, (statement, watcher.most_one)


def test_concurrent_statements_are_bounded_in_number_and_in_memory_together(state_dir):
    bombs = ["SELECT len(range(200000000))", "SELECT length(repeat('x', 2000000000))"] * 3
    with Watcher() as watcher, ThreadPoolExecutor(len(bombs)) as pool:
        outcomes = list(pool.map(lambda s: run(state_dir, s), bombs))

    assert all("memory limit" in o or "running already" in o for o in outcomes), outcomes
    assert watcher.most_at_once <= PLACES, watcher.most_at_once
    assert watcher.most_sum <= PLACES * LIMIT_MB, watcher.most_sum
    assert run(state_dir, "SELECT count(*) FROM issues") == "ok"


def test_a_statement_waits_for_a_place_and_is_refused_in_one_line(state_dir, monkeypatch):
    monkeypatch.setenv("GHINDEX_SQL_PROCESSES", "1")
    # runs until the 10 s time limit stops it
    slow = "SELECT a.range * b.range AS x FROM range(300000) a, range(30000) b ORDER BY x DESC"
    started = threading.Event()

    def first() -> str:
        started.set()
        return run(state_dir, slow)

    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(first)
        started.wait()
        time.sleep(1.5)
        try:
            Snapshot(state_dir).sql("SELECT 1", timeout=1)
            waited = "ok"
        except GhindexError as exc:
            waited = str(exc)
        ended = running.result()

    assert "time limit" in ended
    assert waited == (
        "query: the most SQL statements at once (1, GHINDEX_SQL_PROCESSES) are running "
        "already: retry when one has ended"
    )
