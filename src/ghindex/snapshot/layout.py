"""Where things live in a store, and what a snapshot's manifest lists.

    <store>/blobs/sha256/<2 hex>/<64 hex>       file contents, by hash (shared by snapshots)
    <store>/snapshots/<id>/manifest.json         one snapshot: what it holds, every file
    <store>/refs/latest/<generation>.json        the pointer: the newest generation wins
    <store>/LATEST                               the newest snapshot id, for people (advisory)

A file larger than PIECE_SIZE is stored as several blobs ("pieces"), so a large file
that changed in a few places (the DuckDB database) uploads only the pieces that did.
The pointer is a sequence of create-only objects: publishing generation N+1 succeeds
for exactly one publisher, on every backend, without a compare-and-swap API.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ghindex.errors import SnapshotError

FORMAT_VERSION = 1
PIECE_SIZE = 256 * 1024  # DuckDB writes 256 KiB blocks: a changed block is a changed piece
MANIFEST = "manifest.json"
LATEST = "LATEST"
REFS = "refs/latest/"


@dataclass(frozen=True)
class Piece:
    sha256: str
    size: int


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the snapshot root, '/'-separated
    size: int
    sha256: str
    pieces: tuple[Piece, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "pieces": [{"sha256": p.sha256, "size": p.size} for p in self.pieces],
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> FileEntry:
        pieces = tuple(Piece(p["sha256"], int(p["size"])) for p in value["pieces"])
        return cls(value["path"], int(value["size"]), value["sha256"], pieces)


@dataclass(frozen=True)
class Ref:
    generation: int
    snapshot_id: str
    manifest_sha256: str
    created_at: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "snapshot_id": self.snapshot_id,
            "manifest_sha256": self.manifest_sha256,
            "created_at": self.created_at,
        }


@dataclass
class Manifest:
    """The published manifest: the workdir's build manifest plus identity and files."""

    body: dict[str, Any]
    files: list[FileEntry] = field(default_factory=list)

    @property
    def snapshot_id(self) -> str:
        return self.body["snapshot_id"]

    def blobs(self) -> set[str]:
        return {piece.sha256 for f in self.files for piece in f.pieces}

    def to_bytes(self) -> bytes:
        document = {**self.body, "files": [f.as_dict() for f in self.files]}
        return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Manifest:
        try:
            document = json.loads(data)
            files = [FileEntry.from_dict(f) for f in document.pop("files")]
            version = document["format_version"]
        except (ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(
                f"{where} is not a ghindex manifest ({exc}): the store is damaged"
            ) from None
        if version > FORMAT_VERSION:
            raise SnapshotError(
                f"{where} has format version {version}, newer than this ghindex reads "
                f"({FORMAT_VERSION}): upgrade ghindex"
            )
        return cls(document, files)


def blob_path(sha256: str) -> str:
    return f"blobs/sha256/{sha256[:2]}/{sha256}"


def manifest_path(snapshot_id: str) -> str:
    return f"snapshots/{snapshot_id}/{MANIFEST}"


def ref_path(generation: int) -> str:
    return f"{REFS}{generation:012d}.json"


def new_snapshot_id(now: datetime | None = None) -> str:
    """Sortable by time, unique across publishers: 20261130T060000.123456Z-1a2b3c4d."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment.strftime('%Y%m%dT%H%M%S.%f')}Z-{secrets.token_hex(4)}"


def snapshot_files(root: Path) -> list[Path]:
    """The files a snapshot of `root` holds: the state database and the index."""
    found = []
    state = root / "state.duckdb"
    if state.exists():
        found.append(state)
    lance = root / "lance"
    if lance.exists():
        found.extend(p for p in sorted(lance.rglob("*")) if p.is_file())
    return found


def hash_file(path: Path, relative: str) -> FileEntry:
    """The file's sha256, size and pieces, read once."""
    whole = hashlib.sha256()
    pieces = []
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(PIECE_SIZE):
            whole.update(block)
            pieces.append(Piece(hashlib.sha256(block).hexdigest(), len(block)))
            size += len(block)
    if not pieces:  # an empty file is one empty piece
        pieces.append(Piece(hashlib.sha256(b"").hexdigest(), 0))
    return FileEntry(relative, size, whole.hexdigest(), tuple(pieces))


def relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (best effort where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
