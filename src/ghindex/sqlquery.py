"""Read-only SQL over a snapshot's state database: `ghindex sql` and the MCP `sql` tool.

The connection is opened read-only with external access, extension installing and
loading turned off and the configuration locked, so a statement can read the state
and nothing else: no files, no network, no writes. One statement per call, a row
limit, and a time limit enforced by interrupting the query.
"""

from __future__ import annotations

import decimal
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb

from ghindex.errors import GhindexError, StateError, first_line

TIMEOUT = 10.0


@dataclass
class Result:
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    truncated: bool
    elapsed_ms: float


def connect(state: Path) -> duckdb.DuckDBPyConnection:
    """A sandboxed, read-only connection to a state database."""
    if not state.exists():
        raise StateError(f"no state database at {state}: run `ghindex fetch` or `ghindex pull`")
    con = duckdb.connect(
        str(state),
        read_only=True,
        config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
        },
    )
    # Another connection of this process to the same file shares its database, and
    # may have locked the configuration already: setting it again would fail.
    if not con.execute("SELECT current_setting('lock_configuration')").fetchone()[0]:
        con.execute("SET lock_configuration = true")
    return con


def run(state: Path, query: str, max_rows: int, timeout: float = TIMEOUT) -> Result:
    con = connect(state)
    try:
        return run_on(con, query, max_rows, timeout)
    finally:
        con.close()


def run_on(
    con: duckdb.DuckDBPyConnection, query: str, max_rows: int, timeout: float = TIMEOUT
) -> Result:
    """`run` on a connection from `connect` (or a cursor of one)."""
    statements = con.extract_statements(query)
    if len(statements) != 1:
        raise GhindexError(f"query: give exactly one SQL statement, not {len(statements)}")
    timer = threading.Timer(timeout, con.interrupt)
    started = time.perf_counter()
    timer.start()
    try:
        cursor = con.execute(query)
        description = cursor.description or []
        rows = cursor.fetchmany(max_rows + 1)
    except duckdb.InterruptException:
        raise GhindexError(
            f"query: stopped after the {timeout:g} s time limit; narrow it down"
        ) from None
    except duckdb.Error as exc:
        raise GhindexError(f"query: {first_line(exc)}") from None
    finally:
        timer.cancel()
    return Result(
        columns=[d[0] for d in description],
        types=[str(d[1]) for d in description],
        rows=[[plain(v) for v in row] for row in rows[:max_rows]],
        truncated=len(rows) > max_rows,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
    )


def plain(value: Any) -> Any:
    """A value as JSON can carry it."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID | bytes):
        return str(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "total_seconds"):  # INTERVAL
        return str(value)
    return value
