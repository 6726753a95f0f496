"""A snapshot on local disk: versioned directories and one atomic switch.

A directory that snapshots are pulled into (`--dest`, the workdir, the server's cache)
looks like this:

    DEST/
      current -> snapshots/<id>        the one switch: a symlink, replaced by a rename
      snapshots/<id>/                   a verified snapshot: state.duckdb, lance/, manifest.json
      snapshots/.incoming-<random>/     a pull in progress (cleared by the next one)
      state.duckdb -> current/state.duckdb    fixed links, so `duckdb DEST/state.duckdb`
      lance -> current/lance                  and `lancedb.connect("DEST/lance")` work
      manifest.json -> current/manifest.json
      .ghindex.lock                      held by the one pull, sync or update at work here

A new snapshot is assembled and verified in `snapshots/.incoming-…`, renamed to its
version directory, and made current by renaming a new `current` link over the old one.
A rename is atomic, so a reader (and a `kill -9` at any instant) sees the old snapshot
or the new one, never a mix; the step that died is finished or undone by the next run.
Nothing else in DEST is touched: a `demo/` folder or a user's notes stay where they are.

A directory where `ghindex fetch` and `build` wrote directly (no `current` link) is a
snapshot too; the first pull into it turns its files into the previous version.

`live_root(DEST)` is where the current snapshot's files are: every reader and writer
asks it, so they all see the same version.

A reading command given `--store URL` pulls into its own destination in the user's cache,
`reading_copy(store)`: reading never writes in the working directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ghindex.config import env
from ghindex.errors import SnapshotError
from ghindex.vocabulary.layout import (
    CURRENT,
    SNAPSHOT_NAMES,
    STATE_FILE,
    fsync_dir,
    live_root,
)

if TYPE_CHECKING:
    from ghindex.snapshot.stores import Store

VERSIONS = "snapshots"
LOCK = ".ghindex.lock"
STAMP = ".pulled"  # in a version directory: each file's size and mtime when verified
IN_USE = ".in-use"  # in a version directory: a shared lock held by whoever serves it
INCOMING = ".incoming-"
RETIRED = ".retired-"
WAL = STATE_FILE + ".wal"
# Names ghindex itself keeps in a destination, beside the snapshot.
OWN_NAMES = {*SNAPSHOT_NAMES, CURRENT, VERSIONS, LOCK, WAL, "demo", "serve"}

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: one writer at a time is up to the user
    fcntl = None  # type: ignore[assignment]


def absolute(path: Path) -> Path:
    """`path` from the root, `..` folded away: the caller may stand anywhere, even inside."""
    return Path(os.path.abspath(path))


def reading_copy(store: Store) -> Path:
    """Where a reading command (`search`, `sql`, `export`, … with `--store URL`) pulls
    `store` to: one destination per store in the user's cache (`config.store_cache`),
    keyed by the store's address (a local store by its absolute path, a bucket by its URL
    without credentials), never the working directory or the workdir."""
    from ghindex.config import store_cache
    from ghindex.snapshot.stores import shown

    local = store.local_root
    return store_cache(local.as_uri() if local is not None else shown(store.url))


# ------------------------------------------------------------------------------- faults

_steps = [0]


def step(label: str) -> None:
    """A point where a test may kill this process (GHINDEX_FAULT_KILL_AT=N kills at the
    Nth step; GHINDEX_FAULT_TRACE=FILE lists the steps). Does nothing otherwise."""
    trace = env("GHINDEX_FAULT_TRACE")
    kill_at = env("GHINDEX_FAULT_KILL_AT")
    if not trace and not kill_at:
        return
    _steps[0] += 1
    if trace:
        with open(trace, "a", encoding="utf-8") as out:
            out.write(f"{_steps[0]} {label}\n")
    if kill_at == _steps[0]:
        os.kill(os.getpid(), signal.SIGKILL)


# ------------------------------------------------------------------------------ locking

_held: dict[Path, int] = {}  # destinations this process holds the lock of -> depth


@contextlib.contextmanager
def locked(dest: Path, what: str, say: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold DEST's lock: pulls, syncs and updates on one destination take turns. A
    second one says what it waits for. Re-entrant within a process (update → pull)."""
    dest = absolute(dest)
    if dest in _held:
        _held[dest] += 1
        try:
            yield
        finally:
            _held[dest] -= 1
        return
    dest.mkdir(parents=True, exist_ok=True)
    fd = os.open(dest / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another"
                message = f"waiting for {holder} to finish with {dest}"
                (say or (lambda text: print(text, file=sys.stderr)))(message)
                fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"ghindex {what} (pid {os.getpid()})\n".encode(), 0)
        _held[dest] = 1
        try:
            yield
        finally:
            del _held[dest]
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def in_use(root: Path) -> Iterator[None]:
    """Mark a pulled version as being read (a server answering from it), so a pull
    beside it leaves it on disk. A workdir's own files need no mark."""
    if root.parent.name != VERSIONS or fcntl is None:
        yield
        return
    fd = os.open(root / IN_USE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _busy(version: Path) -> bool:
    """Someone holds `in_use` on this version, or stands in it (the working directory)."""
    with contextlib.suppress(OSError):
        cwd = Path.cwd().resolve()
        if cwd == version or version in cwd.parents:
            return True
    if fcntl is None or not (version / IN_USE).exists():
        return False
    fd = os.open(version / IN_USE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# -------------------------------------------------------------------------- destination


class Destination:
    """A directory snapshots are pulled into. Call its methods under `locked(path)`."""

    def __init__(self, path: Path) -> None:
        self.path = absolute(path)
        self.versions = self.path / VERSIONS

    def check_usable(self) -> None:
        """Refuse a file, or a folder holding other things and no snapshot (a home
        directory, a source tree): nothing there is ours to add to."""
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_dir()):
            raise SnapshotError(f"{self.path} is not a directory: choose another --dest")
        if not self.path.exists():
            return
        names = {p.name for p in self.path.iterdir()}
        if names and not names & (OWN_NAMES - {"demo", "serve"}) and not names <= OWN_NAMES:
            shown = ", ".join(sorted(names)[:3])
            raise SnapshotError(
                f"{self.path} holds other files ({shown}…) and no snapshot: pull into an "
                "empty or new directory"
            )

    def current(self) -> Path | None:
        """The current version directory, if this destination has one."""
        return live_root(self.path) if (self.path / CURRENT).is_symlink() else None

    def incoming(self) -> Path:
        """A new, empty directory to assemble a snapshot in."""
        self.versions.mkdir(parents=True, exist_ok=True)
        staging = self.versions / f"{INCOMING}{secrets.token_hex(6)}"
        staging.mkdir()
        return staging

    def install(self, staged: Path, name: str) -> Path:
        """Make the verified snapshot in `staged` current: one rename of the link."""
        previous = self.current()
        version = self._free_name(name)
        staged.rename(version)
        fsync_dir(self.versions)
        step("version in place")
        link = self.path / f".{CURRENT}.new"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        os.symlink(f"{VERSIONS}/{version.name}", link)
        step("new link made")
        os.replace(link, self.path / CURRENT)  # the switch
        fsync_dir(self.path)
        step("switched")
        self.repair()
        self._clean(keep={version, previous})
        return version

    def repair(self) -> None:
        """Finish what a killed run left: the fixed links to `current` (turning a
        workdir's own files into a retired version), and staging leftovers."""
        with contextlib.suppress(FileNotFoundError):
            (self.path / f".{CURRENT}.new").unlink()
        if not (self.path / CURRENT).is_symlink():
            return
        retired: Path | None = None
        for name in SNAPSHOT_NAMES:
            place = self.path / name
            target = f"{CURRENT}/{name}"
            if place.is_symlink() and os.readlink(place) == target:
                continue
            if place.exists() or place.is_symlink():
                if retired is None:
                    retired = self.versions / f"{RETIRED}{secrets.token_hex(6)}"
                    retired.mkdir(parents=True)
                if name == STATE_FILE and (self.path / WAL).exists():
                    (self.path / WAL).rename(retired / WAL)  # the log goes with its file
                place.rename(retired / name)
                step(f"retired {name}")
            link = self.path / f".{name}.new"
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            os.symlink(target, link)
            os.replace(link, place)
            step(f"linked {name}")
        fsync_dir(self.path)

    def clear_staging(self) -> None:
        """Remove what interrupted pulls left: staging, and a workdir's own files once
        retired (never a version directory)."""
        if not self.versions.is_dir():
            return
        for item in self.versions.iterdir():
            if item.name.startswith((INCOMING, RETIRED)) and not _busy(item):
                shutil.rmtree(item, ignore_errors=True)

    def _clean(self, keep: set[Path | None]) -> None:
        """Remove versions other than `keep` (the current and the one before it, which
        a reader may still be finishing with), unless someone is using them."""
        for item in sorted(self.versions.iterdir()):
            if item in keep or not item.is_dir() or _busy(item):
                continue
            shutil.rmtree(item, ignore_errors=True)
            step(f"removed {item.name}")

    def _free_name(self, name: str) -> Path:
        """`snapshots/<name>`, or `<name>.2`, … when a modified copy of it is current."""
        candidate, n = self.versions / name, 1
        current = self.current()
        while candidate.exists():
            if candidate != current and not _busy(candidate):
                shutil.rmtree(candidate)  # a leftover version nobody reads
                break
            n += 1
            candidate = self.versions / f"{name}.{n}"
        return candidate


# ------------------------------------------------------------------------------- stamps


def write_stamp(root: Path, paths: list[str]) -> None:
    """Record each file's size and mtime once verified, so a later pull of the same
    snapshot can tell, by `stat` alone, that nothing changed since."""
    seen = {p: _signature(root / p) for p in paths}
    (root / STAMP).write_text(json.dumps(seen, sort_keys=True), encoding="utf-8")


def stamp_matches(root: Path, paths: list[str]) -> bool:
    try:
        recorded = json.loads((root / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(recorded, dict) or set(recorded) != set(paths):
        return False
    try:
        return all(recorded[p] == _signature(root / p) for p in paths)
    except OSError:
        return False


def _signature(path: Path) -> list[Any]:
    info = path.lstat()
    return [info.st_size, info.st_mtime_ns]


def free_bytes(path: Path) -> int:
    """Free space where `path` (an existing directory: the destination) lives."""
    return shutil.disk_usage(path).free
