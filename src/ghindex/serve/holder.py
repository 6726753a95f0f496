"""The snapshot a server answers from, and how it is replaced while serving.

`SnapshotHolder.use()` hands a request the current snapshot and counts it as in
use. A sync pulls a newer snapshot into the cache (a pull destination: a verified
version directory of its own, unchanged pieces copied from the current one), opens
it, and swaps the holder's reference: requests already running finish on the old
snapshot, new requests see the new one. A served version is marked in use, so a pull
beside it (this server's next sync, or another server sharing the cache) removes it
only once it is released. A failed sync changes nothing and is reported by `status`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ghindex.config import DEFAULT_SYNC_INTERVAL
from ghindex.errors import GhindexError, SnapshotError, first_line
from ghindex.query.snapshot import Snapshot
from ghindex.serve.state_copy import StateCopy
from ghindex.snapshot.layout import MANIFEST, NOT_BUILT, STATE_FILE, Ref
from ghindex.snapshot.local import in_use, live_root
from ghindex.snapshot.stores import shown
from ghindex.vocabulary.layout import local_manifest

log = logging.getLogger(__name__)


class NoSnapshot(GhindexError):
    """The server has no snapshot to answer from yet."""


class ServedSnapshot(Snapshot):
    """A snapshot being served: how many requests use it, whether a newer one replaced
    it, what it holds (its in-use mark, a workdir's state copy) and, for a workdir that
    `build` may rewrite, where it is and its manifest's stamp when opened."""

    def __init__(
        self,
        root: Path,
        manifest: dict[str, Any],
        *,
        held: contextlib.ExitStack,
        served_from: Path | None = None,
        stamp: tuple[int, int] | None = None,
        copy: StateCopy | None = None,
    ) -> None:
        if copy is None:  # nothing writes to it: its state stays open between requests
            super().__init__(root, manifest, state="held")
        else:  # a workdir fetch and build may be writing: answer from a private copy
            super().__init__(root, manifest, connection=copy.connection)
        self.users = 0
        self.retired = False
        self.held = held
        self.served_from = served_from  # a workdir: reopened when it is rebuilt
        self.stamp = stamp
        self.copy = copy

    def rebuilt(self) -> bool:
        """Whether a workdir served here has a newer build than the one opened."""
        return self.served_from is not None and _stamp(self.manifest_path) != self.stamp


def open_snapshot(
    path: Path, *, immutable: bool = False, copy: StateCopy | None = None
) -> ServedSnapshot:
    """Open a snapshot directory (its current version, marked in use until closed).
    `immutable`: nothing will write to it while it is served (a pulled snapshot, not a
    workdir), so its state stays open between requests."""
    root = live_root(path)
    manifest_path = root / MANIFEST
    stamp = None if immutable else _stamp(manifest_path)  # before reading: a build may land
    if not manifest_path.exists():
        raise NoSnapshot(NOT_BUILT.format(path))
    held = contextlib.ExitStack()
    held.enter_context(in_use(root))
    try:
        manifest = local_manifest(manifest_path)
        if manifest is None:  # removed since it was seen
            raise NoSnapshot(NOT_BUILT.format(path))
        if not immutable:
            copy = copy or StateCopy(root / STATE_FILE)
            copy.acquire()
            held.callback(copy.release)
        served = ServedSnapshot(
            root,
            manifest,
            held=held,
            served_from=None if immutable else path,
            stamp=stamp,
            copy=None if immutable else copy,
        )
        served.searcher  # noqa: B018 - open the index now: a broken one fails here, not later
    except BaseException:
        held.close()
        raise
    return served


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size


@dataclass
class SyncState:
    """How syncing from the store goes: when its pointer was last read, whether that
    worked, and how many snapshots were swapped in."""

    last_check: datetime | None = None  # the last read of the pointer, or try at one
    last_success: datetime | None = None  # the last check that succeeded (new or not)
    last_error: str | None = None  # why the last check failed; None once one succeeds
    syncs: int = 0  # snapshots swapped in


@dataclass
class SnapshotHolder:
    """The current snapshot, safe to replace while requests use it."""

    current: ServedSnapshot | None = None
    store: Any = None  # ghindex.snapshot.Store, when syncing
    cache: Path | None = None  # where synced snapshots live, one directory each
    interval: float = DEFAULT_SYNC_INTERVAL
    sync: SyncState = field(default_factory=SyncState)
    ref: Ref | None = None  # the pointer generation whose snapshot is served
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reopening: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _failure: Exception | None = None  # why the last sync failed

    @contextlib.contextmanager
    def use(self) -> Iterator[ServedSnapshot]:
        self.follow_rebuilds()
        with self._lock:
            snapshot = self.current
            if snapshot is None:
                raise NoSnapshot(self.empty_reason())
            snapshot.users += 1
        try:
            yield snapshot
        finally:
            with self._lock:
                snapshot.users -= 1
                done = snapshot.retired and snapshot.users == 0
            if done:
                self._remove(snapshot)

    def follow_rebuilds(self) -> None:
        """A served workdir that `build` finished again is reopened (its new index and
        manifest); calls already running finish on the old one. A build still under way
        (no manifest yet, an index being written) leaves the current one in place."""
        current = self.current
        if current is None or not current.rebuilt():
            return
        with self._reopening:
            if self.current is not current:
                return  # another call reopened it meanwhile
            try:
                fresh = open_snapshot(current.served_from, copy=current.copy)
            except Exception as exc:  # mid-build: answer from what is open
                log.info("workdir not reopened yet: %s", first_line(exc))
                return
            self.replace(fresh)

    def replace(self, snapshot: ServedSnapshot) -> None:
        """Make `snapshot` the current one; retire the previous one."""
        with self._lock:
            old, self.current = self.current, snapshot
            if old is None:
                return
            old.retired = True
            idle = old.users == 0
        if idle:
            self._remove(old)

    def sync_once(self, *, report: bool = True) -> bool:
        """Pull the store's latest snapshot if it is new; True when it was swapped in.
        A check that finds nothing new lists the pointer's names from the generation
        served on (one small request, see `latest_ref`) and reads nothing else. A failure
        is logged (unless not `report`: the caller says it) and kept in `sync`."""
        from ghindex.snapshot import pull
        from ghindex.snapshot.refs import latest_ref

        now = datetime.now(UTC)
        self.sync.last_check = now
        try:
            ref = latest_ref(self.store, known=self.ref)
            current = self.current.manifest.get("snapshot_id") if self.current else None
            if ref is None or current == ref.snapshot_id:
                self.ref = ref
                self.sync.last_success, self.sync.last_error = now, None
                return False
            assert self.cache is not None
            pull(self.store, self.cache, ref=ref, say=log.warning)
            self.replace(open_snapshot(self.cache, immutable=True))
            self.ref = ref
        except Exception as exc:  # a failed sync must never stop serving
            self._failure = exc
            self.sync.last_error = first_line(exc)
            if report:
                self._say_failure(exc)
            return False
        self.sync.last_success, self.sync.last_error = now, None
        self.sync.syncs += 1
        log.warning("now serving snapshot %s", ref.snapshot_id)
        return True

    def sync_status(self) -> dict[str, Any] | None:
        """What `status` says about syncing (None for a server that does not sync): the
        store (without credentials), the interval, when the pointer was last checked and
        how long ago, the last success, the last error, and the swaps so far."""
        if self.store is None:
            return None
        checked = self.sync.last_check
        since = None if checked is None else int((datetime.now(UTC) - checked).total_seconds())
        return {
            "store": shown(self.store.url),
            "interval_seconds": self.interval,
            "last_check": _iso(checked),
            "seconds_since_last_check": since,
            "last_success": _iso(self.sync.last_success),
            "last_error": self.sync.last_error,
            "syncs": self.sync.syncs,
        }

    def start(self) -> None:
        """Sync now, then every `interval` seconds in a background thread. When the store
        cannot be read, the copy a previous run left in the cache is served meanwhile;
        with no such copy either, the store's error is raised (a typo in its URL, a
        missing bucket, no credentials): there would be nothing to serve. A store that
        holds no snapshot yet is served empty until one is published."""
        self._failure = None
        self.sync_once(report=False)  # a failure is raised, or said once serving goes on
        if self.current is None and self.cache is not None:
            with contextlib.suppress(NoSnapshot, GhindexError, OSError):
                self.replace(open_snapshot(self.cache, immutable=True))
        if self.current is None and self._failure is not None:
            failure = self._failure
            raise (
                failure
                if isinstance(failure, GhindexError)
                else SnapshotError(f"cannot read {shown(self.store.url)}: {first_line(failure)}")
            )
        if self._failure is not None:
            self._say_failure(self._failure)
        self._thread = threading.Thread(target=self._loop, name="ghindex-sync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop syncing and let go of the current snapshot (and a workdir's state copy)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            current, self.current = self.current, None
        if current is not None:
            self._remove(current)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sync_once()

    def _remove(self, snapshot: ServedSnapshot) -> None:
        """Close a retired snapshot; the next pull into the cache removes its files."""
        snapshot.close()
        snapshot.held.close()

    def _say_failure(self, exc: BaseException) -> None:
        serving = self._current_id()
        serving = f"still serving {serving}" if serving else "nothing to serve yet"
        log.warning("sync failed, %s: %s", serving, exc)

    def _current_id(self) -> str | None:
        return self.current.snapshot_id if self.current else None

    def empty_reason(self) -> str:
        """Why there is nothing to serve, as `status` and every tool say it."""
        if self.sync.last_error:
            return f"no snapshot yet: the last sync failed ({self.sync.last_error})"
        if self.store is not None:
            return "no snapshot yet: the store holds none; publish one, the server picks it up"
        return "no snapshot to serve"
