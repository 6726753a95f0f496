"""One SQL statement in a process of its own, under limits no function can escape.

DuckDB's `memory_limit` and `interrupt()` cover its buffer manager and the points
between vectors, not a function building one huge value: `len(range(200000000))`
grows a process by gigabytes and runs on long past any interrupt. So `ghindex sql`
and the MCP `sql` tool run each statement in a child process (`python -m
ghindex.query.sql_process`) whose address space is capped by the kernel
(`RLIMIT_AS`: what the child uses once DuckDB is loaded, plus the memory limit), whose
CPU time is capped too, and which the caller kills at the time limit. DuckDB spills
into a private temporary folder of bounded size that is removed after the call, never
beside the snapshot. The caller's own memory is untouched: the child exits.

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
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ghindex.config import env
from ghindex.errors import GhindexError
from ghindex.query.sql import Result, connect, run_on, too_big

_GRACE = 5.0  # seconds beyond the time limit for the child to start and answer
_SLACK_MB = 256  # address space beyond DuckDB's memory limit (Python, results, stacks)


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
    temporary `views` a held connection uses), run in a child process."""
    memory = env("GHINDEX_SQL_MEMORY_MB")
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
        done = subprocess.run(
            [sys.executable, "-m", "ghindex.query.sql_process"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout + _GRACE,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    except subprocess.TimeoutExpired:
        raise GhindexError(
            f"query: stopped after the {timeout:g} s time limit; narrow it down"
        ) from None
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):  # killed by the kernel, or died
        if done.returncode < 0 or "MemoryError" in done.stderr or "bad_alloc" in done.stderr:
            raise GhindexError(too_big(memory))
        last = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise GhindexError(f"query: the SQL process failed ({last[:300]})")
    if "error" in answer:
        raise GhindexError(str(answer["error"]).splitlines()[0][:2000])
    return Result(**answer)


def _limit(memory_mb: int, timeout: float) -> None:
    """Cap this process: its address space now plus `memory_mb` and some slack, and its
    CPU seconds a little beyond the time limit."""
    try:
        import resource
    except ImportError:  # not a Unix: the time limit still holds (the caller kills)
        return
    size = _address_space()
    if size:
        cap = size + (memory_mb + _SLACK_MB) * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    seconds = int(timeout + _GRACE)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))


def _address_space() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None  # no /proc (macOS): DuckDB's memory limit and the time limit hold


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    con = connect(Path(request["path"]), spill=(request["temp"], int(request["temp_mb"])))
    try:
        for view in request["views"]:
            con.execute(view)
        _limit(int(request["memory_mb"]), float(request["timeout"]))
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
