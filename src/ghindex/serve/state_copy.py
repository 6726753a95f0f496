"""The state of a workdir that `fetch` and `build` may be writing while it is served.

DuckDB lets one process write a file, and a reader's lock stops the writer (and a
writer's lock stops readers). So a server never answers from the workdir's
`state.duckdb` itself: it answers from a private copy, taken while it holds a read lock
for the length of one file copy, and taken again when the workdir's file has changed.
While a writer holds the file, requests keep getting the last complete copy; a writer
that meets the read lock of a copy in progress waits for it (`store.state.open_state`
retries), it never fails. Only a server that has no copy yet, and finds the file
locked, answers that the workdir is being rebuilt.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

import duckdb

from ghindex.errors import GhindexError
from ghindex.query.sql import connect

BUSY = (
    "the workdir is being rebuilt (fetch or build holds its state): retry in a moment, "
    "or serve a published snapshot"
)


class StateCopy:
    """Read-only connections to the last complete copy of `source`."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self._folder = Path(tempfile.mkdtemp(prefix="ghindex-serve-"))
        self._lock = threading.Lock()
        self._seen: tuple[int, ...] | None = None
        self._generation = 0
        self._con: duckdb.DuckDBPyConnection | None = None
        self._old: list[duckdb.DuckDBPyConnection] = []
        self._users = 0

    def acquire(self) -> None:
        """One more snapshot answers from this copy (a rebuild keeps the copy it had)."""
        with self._lock:
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users <= 0
        if last:
            self.close()

    def connection(self) -> duckdb.DuckDBPyConnection:
        """A cursor on the newest copy, taking a new copy first when the file changed."""
        with self._lock:
            self._refresh()
            if self._con is None:
                raise GhindexError(BUSY)
            return self._con.cursor()

    def close(self) -> None:
        with self._lock:
            for con in [*self._old, *([self._con] if self._con else [])]:
                con.close()
            self._con, self._old = None, []
        shutil.rmtree(self._folder, ignore_errors=True)

    def _refresh(self) -> None:
        try:
            stat = self.source.stat()
        except FileNotFoundError:
            return
        wal = self.source.with_name(self.source.name + ".wal")
        wal_stat = wal.stat() if wal.exists() else None
        seen = (
            stat.st_mtime_ns,
            stat.st_size,
            *((wal_stat.st_mtime_ns, wal_stat.st_size) if wal_stat else ()),
        )
        if seen == self._seen:
            return
        try:
            # A read lock for the length of the copy: no writer is half-way through it.
            reader = duckdb.connect(str(self.source), read_only=True)
        except duckdb.Error:
            return  # a writer has it: keep answering from the last copy
        self._generation += 1
        target = self._folder / str(self._generation) / self.source.name
        target.parent.mkdir()
        try:
            shutil.copyfile(self.source, target)
            wal = self.source.with_name(self.source.name + ".wal")
            if wal.exists():
                shutil.copyfile(wal, target.with_name(target.name + ".wal"))
        finally:
            reader.close()
        fresh = connect(target)
        if self._con is not None:
            self._old.append(self._con)
        self._con, self._seen = fresh, seen
        while len(self._old) > 2:  # cursors of older copies have long finished
            stale = self._old.pop(0)
            stale.close()
            shutil.rmtree(self._folder / str(self._generation - 3), ignore_errors=True)
