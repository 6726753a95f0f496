"""Read-only SQL over a snapshot's state database: `ghindex sql` and the MCP `sql` tool.

The connection is opened read-only with external access, extension installing and
loading turned off, a memory limit (`GHINDEX_SQL_MEMORY_MB`, default 512), one thread
(`GHINDEX_SQL_THREADS`) and the configuration locked, so a statement can read the
state and nothing else: no files, no network, no writes, and not the machine's memory
or every core. One statement per call, and only a reading one (`SELECT`, `WITH`,
`FROM`, `VALUES`, `DESCRIBE`, `SHOW`, `SUMMARIZE`, `EXPLAIN`, and the pragmas that
describe tables): `CHECKPOINT`, `VACUUM`, `CREATE`, `SET`, `ATTACH`, `COPY` are refused
before they run. The answer is cut at a row limit and at `GHINDEX_SQL_MAX_BYTES`
(default 1,000,000) of JSON, with `truncated` and the reason; a time limit covers
execution and reading the rows, enforced by interrupting the query, and rows read by
then are the answer. `sql_process.py` runs all this in a child process whose memory,
CPU time and temporary files are capped by the kernel.
"""

from __future__ import annotations

import decimal
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb

from ghindex.config import env
from ghindex.errors import GhindexError, StateError, first_line
from ghindex.state.database import check_schema, damaged, no_state
from ghindex.vocabulary.layout import STATE_FILE

TIMEOUT = 10.0
_BATCH = 64  # rows read and converted at a time
_SANDBOX = {  # no files, no network, no extensions
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}


_CONFIGURING = threading.Lock()  # one connection at a time sets and locks a database's settings


@dataclass
class Result:
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    truncated: bool
    elapsed_ms: float
    reason: str | None = None  # why the answer was cut, when it was
    hint: str | None = None  # what may explain an empty answer (`empty_hint`)


def connect(
    state: Path,
    *,
    wait: float = 0.0,
    check: bool = False,
    spill: tuple[str, int] | None = None,
    memory_mb: int | None = None,
) -> duckdb.DuckDBPyConnection:
    """A sandboxed, read-only connection to a state database. `wait`: seconds to wait for
    a writer (fetch, build) to let go of the file; `check`: refuse a schema this ghindex
    cannot read (written by a newer one, or not yet migrated); `spill`: the folder and
    megabytes temporary files may use; `memory_mb`: DuckDB's memory limit (default
    `GHINDEX_SQL_MEMORY_MB`)."""
    if not state.exists():
        raise no_state(state)
    config = dict(_SANDBOX)
    if spill is not None:  # a read-only database spills beside itself unless told
        config |= {"temp_directory": spill[0], "max_temp_directory_size": f"{spill[1]}MB"}
    deadline = time.monotonic() + wait
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(state), read_only=True, config=config)
            break
        except duckdb.Error as exc:
            if (error := damaged(exc, state)) is not None:
                raise error from None
            if not isinstance(exc, duckdb.IOException):
                raise
            if "lock" not in str(exc).lower():
                raise StateError(f"cannot open {state.name}: {first_line(exc)}") from None
            if time.monotonic() >= deadline:
                raise StateError(
                    "the state database is being written (fetch or build is running): retry "
                    "in a moment, or read a published snapshot"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    # Another connection of this process to the same file shares its database, and
    # may have locked the configuration already (or be locking it in another thread):
    # setting it again would fail.
    with _CONFIGURING:
        if not con.execute("SELECT current_setting('lock_configuration')").fetchone()[0]:
            memory = memory_mb or env("GHINDEX_SQL_MEMORY_MB")
            threads = env("GHINDEX_SQL_THREADS")
            con.execute(f"SET memory_limit = '{memory}MB'")
            con.execute("SET enable_progress_bar = false")
            # one core for SQL, the rest for everything else a server answers meanwhile
            con.execute(f"SET threads = {threads}")
            con.execute("SET lock_configuration = true")
    if check:
        try:
            check_schema(con, state)
        except BaseException:
            con.close()
            raise
    return con


def database_path(con: duckdb.DuckDBPyConnection) -> str:
    """The file a connection reads."""
    (path,) = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone() or ("",)
    return path or ""


def run_on(
    con: duckdb.DuckDBPyConnection,
    query: str,
    max_rows: int,
    timeout: float = TIMEOUT,
    *,
    offset: int = 0,
    hidden: list[str] = (),
    max_bytes: int | None = None,
) -> Result:
    """One statement on a connection from `connect` (or a cursor of one): rows from
    `offset` on, at most `max_rows`. Paths in `hidden`, the database's folder and the
    home directory never appear in an answer or an error. `max_bytes`: a smaller cap on
    the answer's JSON than `GHINDEX_SQL_MAX_BYTES`."""
    cap = env("GHINDEX_SQL_MAX_BYTES")
    max_bytes = min(max_bytes, cap) if max_bytes else cap
    # where the file lives is nobody's business: answers name it by its file name
    hide = _hider(database_path(con), hidden)
    timer = threading.Timer(timeout, con.interrupt)
    started = time.perf_counter()
    rows: list[list[Any]] = []
    reason = None
    ran = _Ran(query)  # the text DuckDB was given, for where its errors point
    timer.start()
    try:
        statements = con.extract_statements(query)
        if len(statements) != 1:
            raise GhindexError(f"query: give exactly one SQL statement, not {len(statements)}")
        _check_reading(statements[0], query)
        cursor = _execute(con, statements[0], query, max_rows, offset, ran)
        description = cursor.description or []
        size = 0
        while reason is None:
            try:
                batch = cursor.fetchmany(_BATCH)
            except duckdb.InterruptException:
                if not rows:
                    raise
                reason = f"stopped at the {timeout:g} s time limit"
                break
            if not batch:
                break
            for raw in batch:
                if len(rows) == max_rows:
                    reason = f"cut at {max_rows} rows: raise max_rows or narrow the query"
                    break
                row = [hide(plain(v)) for v in raw]
                row, size = _fit(row, size, max_bytes)
                rows.append(row)
                if size >= max_bytes:
                    reason = (
                        f"cut at {max_bytes:,} bytes: select fewer or narrower columns, "
                        "or fewer rows"
                    )
                    break
            if reason is None and time.perf_counter() - started > timeout:
                reason = f"stopped at the {timeout:g} s time limit"
    except duckdb.InterruptException:
        raise GhindexError(
            f"query: stopped after the {timeout:g} s time limit; narrow it down"
        ) from None
    except duckdb.OutOfMemoryException as exc:
        if "temp" in str(exc).lower() or "disk" in str(exc).lower():
            raise GhindexError(
                "query: needs more temporary disk than its limit (GHINDEX_SQL_TEMP_MB): "
                "group or sort fewer rows"
            ) from None
        raise GhindexError(too_big(env("GHINDEX_SQL_MEMORY_MB"))) from None
    except duckdb.Error as exc:
        broken = damaged(exc, Path(STATE_FILE))  # a block the statement read is damaged
        if broken is not None:
            raise broken from None
        raise GhindexError(hide(f"query: {_sql_error(exc, ran)}")) from None
    finally:
        timer.cancel()
    return Result(
        columns=[d[0] for d in description],
        types=[str(d[1]) for d in description],
        rows=rows,
        truncated=reason is not None,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
        reason=reason,
        hint=None if offset else empty_hint(query, rows),
    )


# The values the state stores in upper case, as GitHub spells them: the states of
# issues, pull requests, discussions and reviews, and why an item was closed.
STORED_UPPER = {
    "state": ("OPEN", "CLOSED", "MERGED"),
    "review state": ("APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED", "PENDING"),
    "state reason": ("COMPLETED", "NOT_PLANNED", "REOPENED", "DUPLICATE", "RESOLVED", "OUTDATED"),
}
# A state-like column (`state`, `i.state`, `issue_state`, `state_reason`) compared with a
# string: `= 'open'`, `<> 'open'`, `IN ('open', 'closed')`, `LIKE 'open'`.
_STATE_COMPARED = re.compile(
    r"(?i)\b\w*state(?:_reason)?\b\s*(?:=|==|!=|<>|(?:not\s+)?(?:i?like|in)\b)\s*\(?\s*"
    r"((?:'[^']*'\s*,?\s*)+)"
)


def empty_hint(query: str, rows: list[list[Any]]) -> str | None:
    """For a statement that found nothing (no rows, or one row of zeros: a count): a line
    saying states are stored in upper case, when it compares a state-like column with
    one spelt in lower case (`state = 'open'`)."""
    if rows and (len(rows) > 1 or any(v not in (0, None) for v in rows[0])):
        return None
    for match in _STATE_COMPARED.finditer(query):
        for value in re.findall(r"'([^']*)'", match.group(1)):
            if value == value.upper():
                continue
            for what, stored in STORED_UPPER.items():
                if value.upper() in stored:
                    return f"{what}s are stored upper-case: {', '.join(stored)}"
    return None


def _hider(path: str | None, hidden: list[str] = ()):
    """A function replacing `path` (and its folder) in text with the file's name, each of
    `hidden` with `…` and the home directory with `~`."""
    swaps = [(p, "…") for p in hidden if p]
    if path:
        swaps += [(path, Path(path).name), (str(Path(path).parent), ".")]
    home = str(Path.home())
    if len(home) > 1:
        swaps.append((home, "~"))

    def hide(value: Any) -> Any:
        if isinstance(value, str):
            for old, new in swaps:
                value = value.replace(old, new)
            return value
        if isinstance(value, list):
            return [hide(v) for v in value]
        if isinstance(value, dict):
            return {k: hide(v) for k, v in value.items()}
        return value

    return hide


# Pragmas that only describe: `PRAGMA table_info('issues')`, `PRAGMA show_tables`.
_READING_PRAGMAS = re.compile(
    r"(?is)^\s*pragma\s+(?:table_info|show_tables|show_tables_expanded|show|database_size"
    r"|database_list|version|platform|storage_info|functions)\b"
)


def _check_reading(statement: Any, query: str) -> None:
    """Refuse, before it runs, a statement that is not a read: one line naming it."""
    kind = statement.type
    reads = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)
    if kind in reads or (
        kind == duckdb.StatementType.PRAGMA and _READING_PRAGMAS.match(statement.query)
    ):
        return
    word = (re.findall(r"[A-Za-z_]+", statement.query) or ["this"])[0].upper()
    raise GhindexError(
        f"query: {word[:20]} statements are refused here: only reading ones run (SELECT, "
        "WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)"
    )


@dataclass
class _Ran:
    """The text DuckDB ran for the user's `query`: the query itself, or the statement
    wrapped under a limit. The user's `length` characters start at `start` of `text` and
    at `at` of `query`."""

    query: str
    text: str = ""
    start: int = 0
    at: int = 0
    length: int = -1

    def __post_init__(self) -> None:
        self.text = self.text or self.query
        self.length = len(self.query) if self.length < 0 else self.length

    def position(self, line: int, column: int) -> tuple[int, int] | None:
        """Line and column (from 1) in `query` of those in `text`; None outside it."""
        lines = self.text.split("\n")
        if not 1 <= line <= len(lines) or column < 1:
            return None
        offset = sum(len(text) + 1 for text in lines[: line - 1]) + column - 1 - self.start
        if not 0 <= offset <= self.length:  # one past the end: where more was expected
            return None
        offset += self.at
        start = self.query.rfind("\n", 0, offset) + 1
        return self.query.count("\n", 0, offset) + 1, offset - start + 1


def _execute(
    con: duckdb.DuckDBPyConnection,
    statement: Any,
    query: str,
    max_rows: int,
    offset: int = 0,
    ran: _Ran | None = None,
) -> duckdb.DuckDBPyConnection:
    """Run the statement; a SELECT under a LIMIT one past the row limit (from `offset`), so
    that DuckDB stops producing rows (and sorts only the top ones) instead of holding them
    all. `ran` is told what text DuckDB was given."""
    ran = ran or _Ran(query)
    if statement.type == duckdb.StatementType.SELECT:
        inner = statement.query.strip().rstrip(";")
        head = "SELECT * FROM (\n"
        wrapped = f"{head}{inner}\n) LIMIT {max_rows + 1} OFFSET {int(offset)}"
        # where the statement is in the query; DuckDB may have rewritten it: then none
        at = query.find(inner)
        ran.text, ran.start, ran.at = wrapped, len(head), max(at, 0)
        ran.length = len(inner) if at >= 0 else -1
        try:
            return con.execute(wrapped)
        except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException):
            pass  # run as written: a trailing comment, or an error to report as the user wrote it
    if offset:
        raise GhindexError("query: offset applies to SELECT statements only")
    ran.text, ran.start, ran.at, ran.length = query, 0, 0, len(query)
    return con.execute(query)


def _fit(row: list[Any], used: int, limit: int) -> tuple[list[Any], int]:
    """`row` and the bytes of JSON used after it; a value that would pass `limit` is cut
    (a list or struct becomes the start of its JSON text), so the answer stays in it."""
    size = _json_size(row)
    if used + size <= limit:
        return row, used + size
    room = max(limit - used, 0)
    fitted = []
    for value in row:
        if _json_size(value) > room:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            value = _cut(text, room)
        room = max(room - _json_size(value), 0)
        fitted.append(value)
    return fitted, limit


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=str))  # ASCII-escaped: bytes as sent, at most


def _cut(text: str, room: int) -> str:
    """The longest start of `text` whose JSON (with the mark of the cut) fits `room`."""
    low, high = 0, min(len(text), room)
    while low < high:
        middle = (low + high + 1) // 2
        if _json_size(text[:middle] + "…") <= room:
            low = middle
        else:
            high = middle - 1
    return text[:low] + "…"


def _sql_error(exc: duckdb.Error, ran: _Ran | str) -> str:
    """DuckDB's message on one line, with where in the user's statement it points (left
    out where that is not in the statement: the limit it ran under, or unknown)."""
    ran = ran if isinstance(ran, _Ran) else _Ran(ran)
    text = str(exc)
    first = first_line(exc)
    caret = re.search(r"^LINE (\d+): (.*)\n( *)\^", text, re.MULTILINE)
    if not caret:
        return first
    line, shown = int(caret.group(1)), caret.group(2)
    at = len(caret.group(3)) - len(f"LINE {caret.group(1)}: ")  # in the line as shown
    # DuckDB shows a long line cut around the error, between "..."s: find that part
    lines = ran.text.split("\n")
    whole = lines[line - 1] if 1 <= line <= len(lines) else ""
    cut = shown.startswith("...") and not whole.startswith("...")
    part = shown.removeprefix("...") if cut else shown
    if part.endswith("...") and not whole.endswith("..."):
        part = part.removesuffix("...")
    found = whole.find(part) if part else -1
    position = None
    if found >= 0 and whole.find(part, found + 1) < 0:  # one place only, or none is sure
        position = ran.position(line, found + at - (3 if cut else 0) + 1)
    if position is None:
        return f"{first}: fix the statement"
    return f"{first} (line {position[0]}, column {position[1]}): fix the statement"


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


def too_big(memory_mb: int) -> str:
    """What a statement that outgrew its memory limit is told (here or in its process)."""
    return (
        f"query: needs more than the {memory_mb} MB memory limit (GHINDEX_SQL_MEMORY_MB): "
        "build smaller values, or select fewer rows"
    )
