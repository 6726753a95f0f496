"""`ghindex pull`: download a snapshot, verify every byte, swap it into place.

Files are assembled in a staging directory beside the destination. A piece whose
sha256 the local copy already holds (an unchanged Lance file, an unchanged stretch
of the DuckDB file) is copied from disk instead of downloaded. Every piece and
every file is checked against the manifest; any mismatch or missing blob fails the
pull, removes the staging directory and leaves the destination untouched. Only
then is the destination replaced, by renames.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ghindex.errors import SnapshotError
from ghindex.snapshot.layout import (
    MANIFEST,
    PIECE_SIZE,
    FileEntry,
    Manifest,
    blob_path,
    fsync_dir,
    hash_file,
    relative,
    snapshot_files,
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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pull(
    store: Store, dest: Path, *, snapshot_id: str | None = None, reuse: Path | None = None
) -> PullReport:
    """Bring a snapshot into `dest`; pieces found in `dest` (or in `reuse`, another local
    snapshot) are copied from disk instead of downloaded."""
    started = time.perf_counter()
    ref = latest_ref(store)
    if ref is None and snapshot_id is None:
        raise SnapshotError(f"{shown(store.url)} holds no snapshot yet: publish one first")
    manifest = read_manifest(store, ref, snapshot_id)
    report = PullReport(
        snapshot_id=manifest.snapshot_id,
        store=shown(store.url),
        dest=str(dest),
        files=len(manifest.files),
        bytes=sum(f.size for f in manifest.files),
        bytes_downloaded=0,
        bytes_reused=0,
        unchanged=False,
        seconds=0.0,
    )
    if _already_there(dest, manifest):
        report.unchanged = True
        report.bytes_reused = report.bytes
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    dest = dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.pull-{manifest.snapshot_id}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        local = _local_pieces(reuse if reuse is not None else dest)
        for entry in manifest.files:
            downloaded, reused = _assemble(store, entry, staging / entry.path, local)
            report.bytes_downloaded += downloaded
            report.bytes_reused += reused
        (staging / MANIFEST).write_bytes(manifest.to_bytes())
        _swap(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _already_there(dest: Path, manifest: Manifest) -> bool:
    """The destination holds exactly this snapshot (checked by size and hash)."""
    path = dest / MANIFEST
    if not path.exists():
        return False
    try:
        here = Manifest.from_bytes(path.read_bytes(), str(path))
    except SnapshotError:
        return False
    if here.body.get("snapshot_id") != manifest.snapshot_id:
        return False
    present = {relative(dest, p): p for p in snapshot_files(dest)}
    if set(present) != {f.path for f in manifest.files}:
        return False
    return all(hash_file(present[f.path], f.path).sha256 == f.sha256 for f in manifest.files)


def _local_pieces(dest: Path) -> dict[str, tuple[Path, int]]:
    """Pieces the current local copy holds: sha256 -> (file, offset)."""
    found: dict[str, tuple[Path, int]] = {}
    if not dest.exists():
        return found
    for path in snapshot_files(dest):
        entry = hash_file(path, relative(dest, path))
        for index, piece in enumerate(entry.pieces):
            found.setdefault(piece.sha256, (path, index * PIECE_SIZE))
    return found


def _assemble(
    store: Store, entry: FileEntry, target: Path, local: dict[str, tuple[Path, int]]
) -> tuple[int, int]:
    target.parent.mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256()
    downloaded = reused = 0
    with open(target, "wb") as out:
        for piece in entry.pieces:
            source = local.get(piece.sha256)
            if source is not None:
                with open(source[0], "rb") as handle:
                    handle.seek(source[1])
                    data = handle.read(piece.size)
                reused += piece.size
            else:
                data = store.get(blob_path(piece.sha256))
                downloaded += len(data)
            if len(data) != piece.size or hashlib.sha256(data).hexdigest() != piece.sha256:
                raise SnapshotError(
                    f"{entry.path}: a piece from {shown(store.url)} fails verification "
                    f"(sha256 {piece.sha256[:12]}…): the store is damaged; nothing was changed "
                    "locally"
                )
            whole.update(data)
            out.write(data)
        out.flush()
        os.fsync(out.fileno())
    if whole.hexdigest() != entry.sha256 or target.stat().st_size != entry.size:
        raise SnapshotError(
            f"{entry.path} fails verification against the manifest: the store is damaged; "
            "nothing was changed locally"
        )
    return downloaded, reused


def _swap(staging: Path, dest: Path) -> None:
    """Put `staging` where `dest` is; keep what `dest` holds besides the snapshot."""
    if dest.exists():
        snapshot_names = {"state.duckdb", "state.duckdb.wal", "lance", MANIFEST}
        for item in dest.iterdir():
            if item.name not in snapshot_names and not (staging / item.name).exists():
                item.rename(staging / item.name)
        retired = dest.parent / f".{dest.name}.old-{os.getpid()}-{time.time_ns()}"
        dest.rename(retired)
        staging.rename(dest)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        staging.rename(dest)
    fsync_dir(dest.parent)
