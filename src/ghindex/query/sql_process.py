"""One SQL statement in a process of its own, under limits no function can escape.

DuckDB's `memory_limit` and `interrupt()` cover its buffer manager and the points
between vectors, not a function building one huge value: `len(range(200000000))`
grows a process by gigabytes and runs on long past any interrupt. So `ghindex sql`
and the MCP `sql` tool run each statement in a child process (`python -m
ghindex.query.sql_process`) held to `GHINDEX_SQL_MEMORY_MB` (default 512) in all, the
process itself included: DuckDB's own limit is what is left after the process's share
(`_OWN_MB`), the kernel caps the address space the child may add once DuckDB is loaded
(`RLIMIT_AS`) to what is left of the limit, and the caller reads the child's resident
memory while it runs and kills it past the limit. Its CPU time is capped too, and the
caller kills it at the time limit. DuckDB spills into a private temporary folder of
bounded size that is removed after the call, never beside the snapshot. The caller's
own memory is untouched: the child exits.

At most `GHINDEX_SQL_PROCESSES` (default 2) children run at once in one process (a
server answering many clients), so SQL holds at most that many times the memory limit
in all; a statement waits for a free place up to its time limit, then is refused in
one line.

The request goes to the child's stdin and the answer (a `Result`, or one error line)
comes back on its stdout, both JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ghindex.config import env
from ghindex.errors import GhindexError
from ghindex.query.sql import Result, connect, run_on, too_big

_GRACE = 5.0  # seconds beyond the time limit for the child to start and answer
_OWN_MB = 128  # of the memory limit, the child's own: Python, DuckDB's code, the rows read
_POLL = 0.05  # seconds between reads of a running child's memory
_PLACES: dict[int, threading.BoundedSemaphore] = {}  # places for children, by their number
_PLACES_LOCK = threading.Lock()


def run(
    path: Path,
    views: list[str],
    query: str,
    max_rows: int,
    timeout: float,
    offset: int = 0,
    max_bytes: int | None = None,
) -> Any:
    """`sql.Result` of `query` over the state database at `path` (read-only, with the
    temporary `views` a held connection uses), run in a child process once one of the
    `GHINDEX_SQL_PROCESSES` places is free."""
    memory = env("GHINDEX_SQL_MEMORY_MB")
    places = env("GHINDEX_SQL_PROCESSES")
    place = _places(places)
    if not place.acquire(timeout=timeout):
        raise GhindexError(
            f"query: the most SQL statements at once ({places}, GHINDEX_SQL_PROCESSES) are "
            "running already: retry when one has ended"
        )
    temp = Path(tempfile.mkdtemp(prefix="ghindex-sql-"))
    request = {
        "path": str(path),
        "views": views,
        "query": query,
        "max_rows": max_rows,
        "offset": offset,
        "max_bytes": max_bytes,
        "timeout": timeout,
        "memory_mb": memory,
        "temp": str(temp),
        "temp_mb": env("GHINDEX_SQL_TEMP_MB"),
    }
    try:
        out, err, returncode, stopped = _child(request, timeout + _GRACE, memory)
    finally:
        place.release()
        shutil.rmtree(temp, ignore_errors=True)
    if stopped == "time":
        raise GhindexError(f"query: stopped after the {timeout:g} s time limit; narrow it down")
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):  # killed by the kernel or by `_child`, or died
        if stopped == "memory" or returncode < 0 or "MemoryError" in err or "bad_alloc" in err:
            raise GhindexError(too_big(memory))
        last = (err.strip().splitlines() or ["no answer"])[-1]
        raise GhindexError(f"query: the SQL process failed ({last[:300]})")
    if "error" in answer:
        raise GhindexError(str(answer["error"]).splitlines()[0][:2000])
    return Result(**answer)


def _places(count: int) -> threading.BoundedSemaphore:
    """The places for `count` children at once, shared by every call in this process."""
    with _PLACES_LOCK:
        return _PLACES.setdefault(count, threading.BoundedSemaphore(count))


def _child(request: dict[str, Any], seconds: float, memory_mb: int) -> tuple[str, str, int, str]:
    """Run the child on `request`: its stdout, stderr, exit status, and why it was
    killed ("time" past `seconds`, "memory" past `memory_mb` resident) or ""."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ghindex.query.sql_process"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    deadline = time.monotonic() + seconds
    given: str | None = json.dumps(request)
    stopped = ""
    try:
        while True:
            try:
                out, err = process.communicate(given, timeout=_POLL)
                break
            except subprocess.TimeoutExpired:
                given = None  # sent: the next wait sends nothing
                if _resident_mb(process.pid) > memory_mb:
                    stopped = "memory"
                elif time.monotonic() > deadline:
                    stopped = "time"
                if stopped:
                    process.kill()
                    out, err = process.communicate()
                    break
    finally:
        if process.poll() is None:  # interrupted (Ctrl-C): the child goes too
            process.kill()
            process.wait()
    return out, err, process.returncode, stopped


def _resident_mb(pid: int) -> float:
    """Resident memory of process `pid` in MiB (0 where /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _limit(memory_mb: int, timeout: float) -> None:
    """Cap this process: the address space it may add from now to what is left of
    `memory_mb` once its resident memory is counted, and its CPU seconds a little beyond
    the time limit."""
    try:
        import resource
    except ImportError:  # not a Unix: the time limit still holds (the caller kills)
        return
    size, resident = _address_space()
    if size:
        cap = size + max(memory_mb * 2**20 - resident, 0)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    seconds = int(timeout + _GRACE)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))


def _address_space() -> tuple[int, int]:
    """This process's address space and resident memory, in bytes (0, 0 without /proc)."""
    found = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmSize:", "VmRSS:")):
                found[line.split(":")[0]] = int(line.split()[1]) * 1024
        return found["VmSize"], found["VmRSS"]
    except (OSError, ValueError, IndexError, KeyError):
        return 0, 0  # no /proc (macOS): DuckDB's memory limit and the time limit hold


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    memory = int(request["memory_mb"])
    spill = (request["temp"], int(request["temp_mb"]))
    # DuckDB has what the limit leaves once the process's own share is set aside
    con = connect(
        Path(request["path"]), spill=spill, memory_mb=max(memory - _OWN_MB, memory // 4, 1)
    )
    try:
        for view in request["views"]:
            con.execute(view)
        _limit(memory, float(request["timeout"]))
        result = run_on(
            con,
            request["query"],
            int(request["max_rows"]),
            float(request["timeout"]),
            offset=int(request["offset"]),
            hidden=[request["temp"]],
            max_bytes=request["max_bytes"],
        )
    finally:
        con.close()
    return asdict(result)


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        answer = _answer(request)
    except GhindexError as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": too_big(request["memory_mb"])}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
