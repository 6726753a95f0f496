"""Opening the state database and bringing its schema up to date.

The schema is the ordered list of SQL files in `store/migrations/`: the single
source of truth for every table. Each file runs once, in its own transaction,
and is recorded in `schema_migrations`; a database that has a migration this
ghindex does not know was written by a newer ghindex and is refused.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import duckdb

from ghindex.errors import StateError, first_line
from ghindex.vocabulary.tables import MIGRATION_LOG


def migrations() -> list[tuple[str, str]]:
    """(name, sql) of every migration, in the order they apply."""
    folder = resources.files("ghindex.state") / "migrations"
    files = sorted(f.name for f in folder.iterdir() if f.name.endswith(".sql"))
    return [(name.removesuffix(".sql"), (folder / name).read_text("utf-8")) for name in files]


def no_state(path: Path) -> StateError:
    """The one error for a state database that is not there."""
    return StateError(f"no state database at {path}: run `ghindex fetch` or `ghindex pull` first")


def check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a state database this ghindex cannot read as it is: one written by a newer
    ghindex, or one that needs a migration only a writer can apply (`ghindex fetch`).
    One behind only on views is read with the new views (`reader_views`)."""
    with named_damage(path):
        for view in reader_views(con, path):
            con.execute(view)


def reader_views(con: duckdb.DuckDBPyConnection, path: Path) -> list[str]:
    """What brings a reading connection to this ghindex's schema: nothing for a current
    state; for one whose missing migrations only redefine views (as 0007 does), those
    views as temporary ones (each connection or cursor runs them: they hide the stored
    views of the same name, and the file is left as it is). Any other missing migration
    needs a writer: refused with what to run."""
    with named_damage(path):
        pending = _pending(con, path)
    if not pending:
        return []
    statements = [_as_temp_views(sql) for _name, sql in pending]
    if any(group is None for group in statements):
        raise StateError(
            f"{path} needs a schema upgrade ({pending[0][0]}): run `ghindex fetch` to upgrade it"
        )
    return [view for group in statements for view in group or ()]


# Another process may hold the file for a moment (a server copying it, a reader):
# wait this long for it before giving up.
LOCK_WAIT = 60.0
# The storage format every state database is written in. DuckDB 2.0 writes a newer one by
# default, which the DuckDB 1.4 LTS and 1.5 command-line tools people have installed
# refuse ("version number 69 ... can only read 64 and 68"); they read this one.
STORAGE_VERSION = "v1.4.0"


def open_state(
    path: Path, *, read_only: bool = False, wait: float = LOCK_WAIT
) -> duckdb.DuckDBPyConnection:
    """Open (creating and migrating if needed) the state database at `path`. `wait`:
    seconds to wait for another process to let go of the file, then `StateBusy`. A
    damaged file is refused as such (`damaged`)."""
    if read_only and not path.exists():
        raise no_state(path)
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    con = _connect(path, read_only, wait)
    if not read_only and storage_version(con) != STORAGE_VERSION:
        con.close()  # written by an earlier ghindex in DuckDB's newer format: rewritten once
        compact(path)
        con = _connect(path, read_only, wait)
    try:
        with named_damage(path):
            con.execute("SET TimeZone = 'UTC'")
            _migrate(con, path, read_only=read_only)
    except BaseException:
        con.close()
        raise
    return con


def storage_version(con: duckdb.DuckDBPyConnection) -> str:
    """The storage format `con`'s database is written in: `v1.4.0`, `v2.0.0`, ..."""
    ((tags,),) = con.execute(
        "SELECT tags FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()
    return str((tags or {}).get("storage_version", "")).rstrip("+")


class StateBusy(StateError):
    """Another process holds the state database (a fetch or build writing it)."""


# What DuckDB says of a file that is not whole, by the short cause a person is told.
_DAMAGE = (
    ("not a valid duckdb database file", "not a DuckDB database file"),
    ("could not read enough bytes", "truncated"),
    ("corrupt database file", "a block fails its checksum"),
    ("does not match stored checksum", "a block fails its checksum"),
    ("failed to deserialize", "its contents cannot be read"),
)


def damaged(exc: BaseException, path: Path) -> StateError | None:
    """The one error for a damaged state database (truncated, overwritten, not a DuckDB
    file), when `exc`, raised while opening or reading the database at `path`, says it
    is; None for any other failure (a lock, a permission, a bad query), which stays the
    caller's. One line, with what to do, and never DuckDB's own text."""
    if not isinstance(exc, duckdb.Error):
        return None
    text = str(exc).lower()
    cause = next((short for found, short in _DAMAGE if found in text), None)
    if cause is None:
        return None
    return StateError(
        f"{path.name} is damaged ({cause}): restore it with `ghindex pull`, or move it "
        "away and rebuild it with `ghindex fetch --full`"
    )


@contextlib.contextmanager
def named_damage(path: Path) -> Iterator[None]:
    """Around opening or reading the state database at `path`: DuckDB's error for a
    damaged file becomes `damaged`'s; every other error passes unchanged."""
    try:
        yield
    except duckdb.Error as exc:
        error = damaged(exc, path)
        if error is None:
            raise
        raise error from None


def _connect(path: Path, read_only: bool, wait: float = LOCK_WAIT) -> duckdb.DuckDBPyConnection:
    """The one way ghindex opens a state database file (`tests/test_state_storage.py`
    holds every other door to read-only): a file it creates is written in
    STORAGE_VERSION."""
    deadline = time.monotonic() + wait
    delay = 0.05
    config = {} if read_only else {"storage_compatibility_version": STORAGE_VERSION}
    while True:
        try:
            with named_damage(path):
                return duckdb.connect(str(path), read_only=read_only, config=config)
        except duckdb.IOException as exc:
            locked = "lock" in str(exc).lower()
            if locked and time.monotonic() > deadline:
                raise StateBusy(
                    f"cannot open {path} (another process holds it): {first_line(exc)}; "
                    "retry when it is free"
                ) from None
            if not locked:
                raise StateError(
                    f"cannot open {path}: {first_line(exc)}; retry when it is free"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def compact(path: Path) -> None:
    """Rewrite the database file with only its live rows. DuckDB leaves the old values
    of updated rows in freed blocks of the file: after text was redacted in place, they
    are raw secrets, so the file is copied whole into a new one that replaces it."""
    fresh = path.with_name(path.name + ".compact")
    fresh.unlink(missing_ok=True)
    _connect(path, read_only=False).close()  # waits out a reader; replays a WAL
    con = _connect(fresh, read_only=False)  # written in STORAGE_VERSION, as every state
    try:
        con.execute(f"ATTACH '{_quoted(path)}' AS old (READ_ONLY)")
        (name,) = con.execute("SELECT current_database()").fetchone()
        con.execute(f'COPY FROM DATABASE old TO "{name}"')
        con.execute("DETACH old")
    finally:
        con.close()
    fresh.replace(path)
    path.with_name(path.name + ".wal").unlink(missing_ok=True)


_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.S)
_DROP_VIEW = re.compile(r"DROP\s+VIEW\s", re.I)
_CREATE_VIEW = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+", re.I)


def _as_temp_views(sql: str) -> list[str] | None:
    """A migration made only of `DROP VIEW` and `CREATE VIEW` statements, as the
    statements that give one connection the same views, temporary; None for any other."""
    views = []
    for statement in duckdb.extract_statements(sql):
        text = _COMMENTS.sub("", statement.query, count=1)
        if statement.type == duckdb.StatementType.DROP and _DROP_VIEW.match(text):
            continue  # the temporary view of the same name hides the stored one
        created = _CREATE_VIEW.match(text)
        if statement.type != duckdb.StatementType.CREATE or created is None:
            return None
        views.append("CREATE OR REPLACE TEMP VIEW " + text[created.end() :])
    return views


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Everything inside commits together or not at all."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _pending(con: duckdb.DuckDBPyConnection, path: Path) -> list[tuple[str, str]]:
    """The migrations `con`'s database lacks, in order; refused when it holds one this
    ghindex does not know (a newer ghindex wrote it)."""
    known = migrations()
    has_table = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [MIGRATION_LOG]
    ).fetchall()[0][0]
    applied = (
        {row[0] for row in con.execute(f"SELECT name FROM {MIGRATION_LOG}").fetchall()}
        if has_table
        else set()
    )
    unknown = applied - {name for name, _ in known}
    if unknown:
        raise StateError(
            f"{path} was written by a newer ghindex (migration {sorted(unknown)[-1]}): "
            "upgrade ghindex"
        )
    return [(name, sql) for name, sql in known if name not in applied]


def needs_writer(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Whether the state at `path` lacks a migration that only a writer applies (an older
    ghindex wrote it: the next fetch upgrades it); one of a newer ghindex is refused."""
    return any(_as_temp_views(sql) is None for _name, sql in _pending(con, path))


def _migrate(con: duckdb.DuckDBPyConnection, path: Path, *, read_only: bool) -> None:
    if read_only:
        check_schema(con, path)
        return
    pending = _pending(con, path)
    if not pending:
        return
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATION_LOG} "
        "(name VARCHAR PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)"
    )
    for name, sql in pending:
        with transaction(con):
            con.execute(sql)
            con.execute(f"INSERT INTO {MIGRATION_LOG} VALUES (?, now())", [name])


def holds_data(state: Path) -> bool:
    """Whether a state database holds anything fetched or read from git (False when there
    is no file). One that cannot be read (busy, damaged, newer) counts as data, so that
    its own error is what a reader meets."""
    if not state.exists():
        return False
    try:
        with duckdb.connect(str(state), read_only=True) as con:
            tables = {name for (name,) in con.execute("SHOW TABLES").fetchall()}
            return any(
                con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("repos", "docs", "commits")
                if table in tables
            )
    except duckdb.Error:
        return True
