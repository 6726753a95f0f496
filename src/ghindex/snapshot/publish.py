"""`ghindex publish`: a workdir becomes a new immutable snapshot in a store.

Order matters, so that a reader never sees half a snapshot and a failure leaves
the previous one in place:

1. the manifest, written create-only under the new snapshot id (so `gc` running
   meanwhile sees which blobs the snapshot needs);
2. every blob the store does not hold yet (content-addressed: unchanged files and
   unchanged pieces of a large file are not uploaded again);
3. last, the pointer: generation N+1, created only if no one else created it. A
   publisher that loses that race fails with a message; nothing is lost.

Steps 1-2 are `stage`, step 3 is `Staged.commit`; `publish` does both.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ghindex import __version__
from ghindex.errors import SnapshotError, StateError, first_line
from ghindex.progress import BYTES, Progress, Task
from ghindex.snapshot.gc import MIN_GRACE
from ghindex.snapshot.layout import (
    FORMAT_VERSION,
    INDEX_DIR,
    LATEST,
    MANIFEST,
    STATE_FILE,
    FileEntry,
    Manifest,
    Ref,
    blob_path,
    hash_file,
    manifest_path,
    new_snapshot_id,
    ref_path,
    relative,
    snapshot_files,
)
from ghindex.snapshot.local import live_root
from ghindex.snapshot.refs import latest_ref, read_manifest
from ghindex.snapshot.stores import Entry, Store, shown
from ghindex.vocabulary.layout import local_manifest

# A blob already in the store but not part of the current snapshot is reused only if
# it is this recent: well inside gc's shortest grace, so gc never removes one reused.
REUSE_WINDOW = MIN_GRACE / 2


@dataclass
class PublishReport:
    snapshot_id: str
    generation: int
    store: str
    files: int
    bytes: int
    blobs: int
    blobs_uploaded: int
    bytes_uploaded: int
    seconds: float
    repaired: str | None = None  # why the pointer's snapshot was unusable and replaced

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def publish(
    workdir: Path, store: Store, *, now: datetime | None = None, progress: Progress | None = None
) -> PublishReport:
    """Stage the snapshot (manifest, then blobs) and commit it (move the pointer);
    `progress` counts the bytes uploaded."""
    return stage(workdir, store, now=now, progress=progress).commit()


@dataclass
class Staged:
    """A snapshot whose manifest and blobs are in the store, not yet the latest."""

    store: Store
    base: Ref | None
    manifest: Manifest
    manifest_bytes: bytes
    report: PublishReport
    started: float

    def commit(self) -> PublishReport:
        """Make this snapshot the latest, unless another publisher got there first."""
        generation = (self.base.generation if self.base else 0) + 1
        ref = Ref(
            generation,
            self.manifest.snapshot_id,
            hashlib.sha256(self.manifest_bytes).hexdigest(),
            self.manifest.body["created_at"],
        )
        encoded = (json.dumps(ref.as_dict(), indent=2, sort_keys=True) + "\n").encode()
        if self.store.head(manifest_path(self.manifest.snapshot_id)) is None:
            raise SnapshotError(
                f"the manifest of snapshot {self.manifest.snapshot_id} left "
                f"{shown(self.store.url)} before the pointer moved (a gc with a grace shorter "
                "than this publish took): nothing was published; publish again"
            )
        if not self.store.put(ref_path(generation), encoded, create_only=True):
            raise SnapshotError(
                f"another publisher moved {shown(self.store.url)} to generation {generation} "
                f"first: snapshot {self.manifest.snapshot_id} was not published and nothing "
                "was lost; pull the new snapshot and run again"
            )
        self.store.put(LATEST, f"{self.manifest.snapshot_id}\n".encode())  # advisory
        self.report.generation = generation
        self.report.seconds = round(time.perf_counter() - self.started, 3)
        return self.report


def stage(
    workdir: Path, store: Store, *, now: datetime | None = None, progress: Progress | None = None
) -> Staged:
    """Upload the manifest and every missing blob of a new snapshot of `workdir`;
    `progress` counts the bytes uploaded of those the store may lack."""
    started = time.perf_counter()
    workdir = live_root(workdir)
    build_manifest = _build_manifest(workdir)  # before the store is made: a refusal makes none
    _checkpoint(workdir / STATE_FILE)
    _check_usable(workdir, build_manifest)
    store.create()
    files = [hash_file(p, relative(workdir, p)) for p in snapshot_files(workdir)]
    current = latest_ref(store)
    stored = _stored_blobs(store)
    trusted, repaired = trusted_blobs(store, current)
    trusted &= set(stored)

    created = (now or datetime.now(UTC)).astimezone(UTC)
    snapshot_id = new_snapshot_id(created)
    manifest = Manifest(
        {
            **build_manifest,
            "format_version": FORMAT_VERSION,
            "snapshot_id": snapshot_id,
            "created_at": created.isoformat(timespec="seconds"),
            "ghindex_version": __version__,
            "parent": current.snapshot_id if current and trusted else None,
            "total_bytes": sum(f.size for f in files),
        },
        files,
    )
    body = manifest.to_bytes()
    if not store.put(manifest_path(snapshot_id), body, create_only=True):
        raise SnapshotError(f"snapshot {snapshot_id} already exists in {shown(store.url)}")
    with (progress or Progress()).task("publish", unit=BYTES, verb="uploaded") as counted:
        uploaded, uploaded_bytes = _upload_blobs(
            workdir, store, files, trusted, stored, created, counted
        )
    report = PublishReport(
        snapshot_id=snapshot_id,
        generation=0,
        store=shown(store.url),
        files=len(files),
        bytes=sum(f.size for f in files),
        blobs=len(manifest.blobs()),
        blobs_uploaded=uploaded,
        bytes_uploaded=uploaded_bytes,
        seconds=0.0,
        repaired=repaired,
    )
    return Staged(store, current, manifest, body, report, started)


def _upload_blobs(
    workdir: Path,
    store: Store,
    files: list[FileEntry],
    trusted: set[str],
    stored: dict[str, Entry],
    now: datetime,
    counted: Task,
) -> tuple[int, int]:
    """Upload the pieces the store lacks (`stored`: its blobs as listed); `counted` starts
    at the bytes of every piece the current snapshot does not hold, less each one the
    store turns out to have."""
    lacking = {p.sha256: p.size for e in files for p in e.pieces if p.sha256 not in trusted}
    counted.set_total(sum(lacking.values()))
    done: set[str] = set(trusted)
    uploaded = uploaded_bytes = 0
    for entry in files:
        path = workdir / entry.path
        for offset, piece in zip(entry.offsets(), entry.pieces, strict=True):
            if piece.sha256 in done:
                continue
            done.add(piece.sha256)
            found = stored.get(piece.sha256)
            if found and found.size == piece.size and now - found.last_modified < REUSE_WINDOW:
                counted.set_total((counted.total or 0) - piece.size)
                continue
            if len(entry.pieces) == 1:
                store.put(blob_path(piece.sha256), path)
            else:
                store.put(blob_path(piece.sha256), _read_piece(path, offset, piece.size))
            uploaded += 1
            uploaded_bytes += piece.size
            counted.advance(piece.size)
    return uploaded, uploaded_bytes


def _stored_blobs(store: Store) -> dict[str, Entry]:
    """Every blob the store holds, by sha256: one listing, not a request per piece."""
    return {entry.path.rsplit("/", 1)[-1]: entry for entry in store.list("blobs/")}


def trusted_blobs(store: Store, current: Ref | None) -> tuple[set[str], str | None]:
    """The blobs of the snapshot the pointer names, which need no upload. A pointer to a
    snapshot that is missing or damaged is published over: nothing of it is trusted, the
    new generation repairs the store, and why is said. One from a newer ghindex is refused."""
    if current is None:
        return set(), None
    try:
        return read_manifest(store, current).blobs(), None
    except SnapshotError as exc:
        if "upgrade ghindex" in str(exc):
            raise
        return set(), f"{first_line(exc)}; this publish replaces it"


def _read_piece(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read(size)
    if len(data) != size:
        raise SnapshotError(f"{path} changed while it was being published: run publish again")
    return data


def _build_manifest(workdir: Path) -> dict[str, Any]:
    body = local_manifest(workdir / MANIFEST)  # one that is not a manifest: one line
    if body is None:
        raise StateError(f"nothing to publish in {workdir}: run `ghindex build` first")
    body.pop("files", None)
    return body


def _check_usable(workdir: Path, body: dict[str, Any]) -> None:
    """Refuse a workdir whose state or index a reader could not open (what `status` calls
    damaged): published, it would be pulled and switched to, then fail every query."""
    from ghindex.snapshot.verify import unusable

    reason = unusable(workdir, body.get("counts") or {})
    if reason is None:
        return
    if "upgrade ghindex" not in reason:
        reason += (
            ": the workdir is damaged; `ghindex status` names it, `ghindex build --full` "
            "rebuilds the index and `ghindex fetch --full` the state"
        )
    raise SnapshotError(f"nothing was published from {workdir}: {reason}")


def _checkpoint(state: Path) -> None:
    """Fold DuckDB's write-ahead log into the file, so the file alone is the state."""
    if not state.exists():
        return
    import duckdb

    from ghindex.state import redaction
    from ghindex.state.database import open_state

    con = open_state(state)  # waits out a reader's short lock (a server copying it)
    try:
        try:
            stale = redaction.index_stale(con)
        except duckdb.CatalogException:  # a table is missing: `_check_usable` names it next
            stale = False
        if stale and (state.parent / INDEX_DIR).exists():
            raise StateError(
                "the stored text was redacted after the index was built, so the index may "
                "still hold the raw text: run `ghindex build`, then publish"
            )
        con.execute("CHECKPOINT")
    finally:
        con.close()
    wal = state.with_name(state.name + ".wal")
    if wal.exists() and wal.stat().st_size:
        raise StateError(f"{wal} is still in use: wait for the running ghindex command to finish")
