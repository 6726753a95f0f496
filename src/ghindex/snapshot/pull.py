"""`ghindex pull`: download a snapshot, verify every byte, switch to it atomically.

A store is hostile input: the pointer, the manifest and every blob are checked before
they are used (names, ids, sizes: see `layout.py`), and memory stays bounded by one
piece whatever the store claims. The snapshot is assembled in a staging directory
inside the destination, taking pieces the current copy already holds from disk and
downloading the rest; every piece and every file is checked against the manifest. Only
then does the destination switch to it, by one rename (see `local.py`). Anything that
fails leaves the destination as it was; nothing outside it is ever written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ghindex.errors import SnapshotError
from ghindex.progress import BYTES, Progress, Task
from ghindex.snapshot.layout import (
    MANIFEST,
    FileEntry,
    Manifest,
    Ref,
    blob_path,
    hash_file,
    relative,
    snapshot_files,
)
from ghindex.snapshot.local import (
    Destination,
    free_bytes,
    live_root,
    locked,
    stamp_matches,
    step,
    write_stamp,
)
from ghindex.snapshot.refs import latest_ref, read_manifest
from ghindex.snapshot.stores import Store, shown


@dataclass
class PullReport:
    snapshot_id: str
    store: str
    dest: str
    files: int
    bytes: int
    bytes_downloaded: int
    bytes_reused: int
    unchanged: bool
    seconds: float
    repaired: list[str] = field(default_factory=list)  # local files `verify` found changed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pull(
    store: Store,
    dest: Path,
    *,
    snapshot_id: str | None = None,
    ref: Ref | None = None,
    say: Callable[[str], None] | None = None,
    progress: Progress | None = None,
    verify: bool = False,
) -> PullReport:
    """Bring a snapshot (the latest, `snapshot_id`, or the one `ref` names) into `dest`.
    Pieces the current copy in `dest` holds are copied from disk, not downloaded;
    `progress` counts the bytes downloaded. `say` hears why the pull waits, if it does.

    A copy already current is trusted by its files' sizes and times; `verify` hashes
    them instead, and a copy that differs (a bit flipped on disk) is assembled again,
    from its pieces that still verify and the store's for the rest."""
    started = time.perf_counter()
    target = Destination(dest)
    target.check_usable()
    if ref is None:  # before DEST is made: a store that is missing or empty leaves no trace
        latest = latest_ref(store)
        if latest is None:
            raise SnapshotError(f"{shown(store.url)} holds no snapshot yet: publish one first")
        ref = latest if snapshot_id is None else None
    with locked(target.path, "pull", say):
        target.check_usable()
        target.repair()
        target.clear_staging()
        wanted = snapshot_id or (ref.snapshot_id if ref else "")
        report = PullReport(wanted, shown(store.url), str(target.path), 0, 0, 0, 0, False, 0.0)
        here = _present(target.path, wanted, ref if snapshot_id is None else None)
        if here is not None and verify:
            from ghindex.snapshot.verify import verify as verify_files

            report.repaired = [d.path for d in verify_files(target.path, progress=progress).differ]
            here = None if report.repaired else here
        if here is not None:  # nothing new: one pointer read, no manifest, no blob
            report.files, report.bytes = len(here.files), sum(f.size for f in here.files)
            report.unchanged, report.bytes_reused = True, report.bytes
        else:
            manifest = read_manifest(store, ref, snapshot_id)
            with (progress or Progress()).task("pull", unit=BYTES, verb="downloaded") as counted:
                _fetch(store, target, manifest, report, counted)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _fetch(
    store: Store, target: Destination, manifest: Manifest, report: PullReport, counted: Task
) -> None:
    report.files = len(manifest.files)
    report.bytes = sum(f.size for f in manifest.files)
    free = free_bytes(target.path)
    if report.bytes > free:
        raise SnapshotError(
            f"snapshot {manifest.snapshot_id} of {shown(store.url)} needs {report.bytes:,} "
            f"bytes and {target.path} has {free:,} free: free some space or pull elsewhere"
        )
    local = _local_pieces(live_root(target.path))
    pieces = [piece for entry in manifest.files for piece in entry.pieces]
    counted.set_total(sum(piece.size for piece in pieces if piece.sha256 not in local))
    staging = target.incoming()
    step("staging made")
    try:
        for entry in manifest.files:
            downloaded, reused = _assemble(store, entry, staging, local, counted)
            report.bytes_downloaded += downloaded
            report.bytes_reused += reused
            step(f"assembled {entry.path}")
        _check_usable(store, target, manifest, staging)
        (staging / MANIFEST).write_bytes(manifest.raw or manifest.to_bytes())
        write_stamp(staging, [MANIFEST, *(f.path for f in manifest.files)])
        step("manifest written")
        target.install(staging, manifest.snapshot_id)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _check_usable(store: Store, target: Destination, manifest: Manifest, staging: Path) -> None:
    """Open the verified copy read-only before switching to it: its bytes match the
    manifest, yet what they hold must be readable too (every state table, an index that
    opens, not a newer ghindex's state). A refusal keeps the current snapshot."""
    from ghindex.snapshot.verify import unusable

    reason = unusable(staging, manifest.body.get("counts") or {})
    if reason is None:
        return
    if "upgrade ghindex" not in reason:
        reason += ": the store is damaged; publish again"
    raise SnapshotError(
        f"snapshot {manifest.snapshot_id} of {shown(store.url)} was not switched to, "
        f"{target.path} keeps its current one: {reason}"
    )


def _present(dest: Path, snapshot_id: str, ref: Ref | None) -> Manifest | None:
    """The manifest of `dest`'s current copy when it is exactly this snapshot, unchanged
    since it was verified (its manifest's checksum is the pointer's, when there is one)."""
    root = live_root(dest)
    try:
        data = (root / MANIFEST).read_bytes()
        here = Manifest.from_bytes(data, str(root / MANIFEST))
    except (OSError, SnapshotError):
        return None
    if here.snapshot_id != snapshot_id:
        return None
    if ref is not None and hashlib.sha256(data).hexdigest() != ref.manifest_sha256:
        return None
    if not stamp_matches(root, [MANIFEST, *(f.path for f in here.files)]):
        return None
    return here


def _local_pieces(root: Path) -> dict[str, tuple[Path, int]]:
    """Pieces the current local copy should hold: sha256 -> (file, offset). Taken from
    its manifest where it has one (each piece is verified when copied anyway), else by
    hashing its files."""
    found: dict[str, tuple[Path, int]] = {}
    try:
        listed = Manifest.from_bytes((root / MANIFEST).read_bytes(), str(root)).files
    except (OSError, SnapshotError):
        try:
            listed = [hash_file(p, relative(root, p)) for p in snapshot_files(root)]
        except (OSError, SnapshotError):
            return found
    for entry in listed:
        for offset, piece in zip(entry.offsets(), entry.pieces, strict=True):
            found.setdefault(piece.sha256, (root / entry.path, offset))
    return found


def _assemble(
    store: Store,
    entry: FileEntry,
    staging: Path,
    local: dict[str, tuple[Path, int]],
    counted: Task,
) -> tuple[int, int]:
    """Write one file of the snapshot into `staging`, one verified piece at a time;
    `counted` counts the bytes downloaded (a local piece that fails its check adds its
    own to the total)."""
    target = staging / entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256()
    downloaded = reused = 0
    with open(target, "xb") as out:
        for piece in entry.pieces:
            data = _local_piece(local.get(piece.sha256), piece.size, piece.sha256)
            if data is not None:
                reused += piece.size
            else:
                if piece.sha256 in local:
                    counted.set_total((counted.total or 0) + piece.size)
                data = store.get(blob_path(piece.sha256), piece.size)
                downloaded += len(data)
                counted.advance(len(data))
                if len(data) != piece.size or hashlib.sha256(data).hexdigest() != piece.sha256:
                    raise SnapshotError(
                        f"{entry.path}: blob {piece.sha256[:12]}… from {shown(store.url)} fails "
                        "verification: the store is damaged; nothing was changed locally"
                    )
            whole.update(data)
            out.write(data)
        out.flush()
        os.fsync(out.fileno())
    if whole.hexdigest() != entry.sha256:
        raise SnapshotError(
            f"{entry.path} from {shown(store.url)} fails verification against the manifest: "
            "the store is damaged; nothing was changed locally"
        )
    return downloaded, reused


def _local_piece(source: tuple[Path, int] | None, size: int, sha256: str) -> bytes | None:
    """A piece read from the local copy, if it is really there."""
    if source is None:
        return None
    try:
        with open(source[0], "rb") as handle:
            handle.seek(source[1])
            data = handle.read(size)
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == sha256 else None
