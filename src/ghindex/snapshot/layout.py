"""Where things live in a store, and what a snapshot's manifest lists.

    <store>/blobs/sha256/<2 hex>/<64 hex>       file contents, by hash (shared by snapshots)
    <store>/snapshots/<id>/manifest.json         one snapshot: what it holds, every file
    <store>/refs/latest/<generation>.json        the pointer: the newest generation wins
    <store>/LATEST                               the newest snapshot id, for people (advisory)

A file larger than PIECE_SIZE is stored as several blobs ("pieces"), so a large file
that changed in a few places (the DuckDB database) uploads only the pieces that did.
Pieces are cut where the file's own blocks begin (`cuts`): the state database's after
DuckDB's file headers, so that each of its blocks is one piece and a changed block
changes one piece, not the two it would straddle on a grid from the file's start.
The pointer is a sequence of create-only objects: publishing generation N+1 succeeds
for exactly one publisher, on every backend, without a compare-and-swap API.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ghindex.errors import SnapshotError, first_line
from ghindex.vocabulary.layout import (  # noqa: F401  (the store's code reads them here)
    FORMAT_VERSION,
    INDEX_DIR,
    MANIFEST,
    NOT_BUILT,
    SNAPSHOT_NAMES,
    STATE_FILE,
    SnapshotFiles,
    encoder_file_cap,
    fsync_dir,
)

PIECE_SIZE = 256 * 1024  # DuckDB writes 256 KiB blocks: a changed block is a changed piece
# A DuckDB file starts with three 4 KiB headers (its own and two database headers, written
# in turn), and its blocks follow from there: the state database's first piece is the
# headers, and every later one a block.
DUCKDB_HEADERS = 3 * 4096
LATEST = "LATEST"
REFS = "refs/latest/"


# Limits on what a store may declare: everything read from a store is hostile input.
MAX_POINTER_BYTES = 64 * 1024
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
MAX_FILES = 100_000
MAX_FILE_BYTES = 1 << 40  # 1 TiB
MAX_PATH_CHARS = 512
MAX_PATH_DEPTH = 8

# Matched whole (fullmatch: a trailing newline is no match) and ASCII only.
SNAPSHOT_ID_RE = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{6}Z-[0-9a-f]{8}", re.ASCII)
_HEX64_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)
# A pointer generation's name (see `ref_name`): at most 100 digits, far past any count.
_REF_NAME_RE = re.compile(r"z{0,88}([0-9]{12,100})\.json", re.ASCII)
# One path segment: ASCII letters, digits, '_', '.', '=', '-', not starting with a dot
# (so never '.', '..' or a hidden name), which also rules out look-alikes of '..'.
_SEGMENT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=-]{0,254}", re.ASCII)


def check_snapshot_id(value: object, where: str) -> str:
    """A snapshot id as the publisher writes it; anything else is refused."""
    if not isinstance(value, str) or not SNAPSHOT_ID_RE.fullmatch(value):
        raise damaged(f"{where} names an invalid snapshot id {_quoted(value)}")
    return value


def check_digest(value: object, where: str) -> str:
    if not isinstance(value, str) or not _HEX64_RE.fullmatch(value):
        raise damaged(f"{where} has an invalid sha256 {_quoted(value)}")
    return value


def check_file_path(value: object, where: str) -> str:
    """A path a manifest lists: the state file or a file below `lance/`, relative, plain
    ASCII segments, never `..`, an absolute part, a backslash or a NUL."""
    if not isinstance(value, str):
        raise damaged(f"{where} names a file by a {type(value).__name__}, not a path")
    parts = value.split("/")
    safe = (
        0 < len(value) <= MAX_PATH_CHARS
        and len(parts) <= MAX_PATH_DEPTH
        and all(_SEGMENT_RE.fullmatch(part) for part in parts)
        and (value == STATE_FILE or (parts[0] == INDEX_DIR and len(parts) > 1))
    )
    if not safe:
        raise SnapshotError(f"{where} names a file outside the snapshot: {_quoted(value)}")
    return value


def damaged(what: str) -> SnapshotError:
    """A refusal of something read from a store."""
    return SnapshotError(f"{what}: the store is damaged")


def _quoted(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _count(value: object, limit: int, what: str, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise damaged(f"{where} declares {what} {_quoted(value)}, outside 0..{limit:,}")
    return value


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

    def offsets(self) -> list[int]:
        """Where each piece starts in the file."""
        starts, at = [], 0
        for piece in self.pieces:
            starts.append(at)
            at += piece.size
        return starts

    @classmethod
    def from_dict(cls, value: object, where: str) -> FileEntry:
        """Read and check one manifest entry: a safe path, sizes within the limits, and
        pieces that add up to the file's size, each PIECE_SIZE bytes but the first and the
        last (1 to PIECE_SIZE; an empty file is one empty piece)."""
        if not isinstance(value, dict):
            raise damaged(f"{where} lists a file that is not an object")
        path = check_file_path(value.get("path"), where)
        at = f"{where} ({path})"
        size = _count(value.get("size"), MAX_FILE_BYTES, "a file size", at)
        cap = encoder_file_cap(path)
        if cap is not None and size > cap:  # refused before a byte of it is downloaded
            raise damaged(
                f"{at} declares {size:,} bytes, over the {cap:,} a query encoder's file may hold"
            )
        sha256 = check_digest(value.get("sha256"), at)
        raw = value.get("pieces")
        not_adding_up = SnapshotError(
            f"{at} declares pieces that do not add up to its size {size:,}: the store is damaged"
        )
        # whole pieces but for the first (cut where the file's blocks begin, `first_piece`)
        # and the last: as many pieces as the file needs, or one more
        fewest = max(1, -(-size // PIECE_SIZE))
        if not isinstance(raw, list) or not fewest <= len(raw) <= fewest + 1:
            raise not_adding_up
        pieces = []
        for index, piece in enumerate(raw):
            if not isinstance(piece, dict):
                raise damaged(f"{at} lists a piece that is not an object")
            length = piece.get("size")
            whole = 0 < index < len(raw) - 1
            if not isinstance(length, int) or isinstance(length, bool):
                raise not_adding_up
            if not (length == PIECE_SIZE if whole else (1 if size else 0) <= length <= PIECE_SIZE):
                raise not_adding_up
            pieces.append(Piece(check_digest(piece.get("sha256"), at), length))
        if sum(p.size for p in pieces) != size:
            raise not_adding_up
        return cls(path, size, sha256, tuple(pieces))


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

    @classmethod
    def from_bytes(cls, data: bytes, generation: int, where: str) -> Ref:
        """Read and check a pointer generation named `generation` in the store."""
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise SnapshotError(f"{where} is not a ghindex pointer ({first_line(exc)})") from None
        if not isinstance(value, dict):
            raise SnapshotError(f"{where} is not a ghindex pointer (not an object)")
        if value.get("generation") != generation or isinstance(value.get("generation"), bool):
            raise SnapshotError(
                f"{where} says it is generation {_quoted(value.get('generation'))}: "
                "the store is damaged"
            )
        created = value.get("created_at")
        if not isinstance(created, str) or len(created) > 64:
            raise SnapshotError(f"{where} has no valid created_at: the store is damaged")
        return cls(
            generation,
            check_snapshot_id(value.get("snapshot_id"), where),
            check_digest(value.get("manifest_sha256"), where),
            created,
        )


@dataclass
class Manifest:
    """The published manifest: the workdir's build manifest plus identity and files."""

    body: dict[str, Any]
    files: list[FileEntry] = field(default_factory=list)
    raw: bytes = b""  # the bytes it was read from, when it was read

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
        """Read and check a manifest: version, id, and every file entry (see FileEntry)."""
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise damaged(f"{where} is not a ghindex manifest ({first_line(exc)})") from None
        if not isinstance(document, dict) or not isinstance(document.get("files"), list):
            raise SnapshotError(
                f"{where} is not a ghindex manifest (no list of files): the store is damaged"
            )
        version = document.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise SnapshotError(
                f"{where} has an invalid format version {_quoted(version)}: the store is damaged"
            )
        if version > FORMAT_VERSION:
            raise SnapshotError(
                f"{where} has format version {version}, newer than this ghindex reads "
                f"({FORMAT_VERSION}): upgrade ghindex"
            )
        check_snapshot_id(document.get("snapshot_id"), where)
        raw = document.pop("files")
        if len(raw) > MAX_FILES:
            raise SnapshotError(
                f"{where} lists {len(raw):,} files, more than {MAX_FILES:,}: the store is damaged"
            )
        files = [FileEntry.from_dict(entry, where) for entry in raw]
        seen: dict[str, str] = {}
        for entry in files:  # a file listed twice, also as a look-alike on a case-blind disk
            key = entry.path.casefold()
            if key in seen:
                raise SnapshotError(f"{where} lists {entry.path!r} twice: the store is damaged")
            seen[key] = entry.path
        folders = {"/".join(p.split("/")[:i]) for p in seen for i in range(1, p.count("/") + 1)}
        if STATE_FILE not in seen:
            raise damaged(f"{where} lists no {STATE_FILE}")
        clash = sorted(folders & set(seen))
        if clash:
            raise SnapshotError(
                f"{where} lists {seen[clash[0]]!r} both as a file and as a folder: "
                "the store is damaged"
            )
        return cls(document, files, data)


def blob_path(sha256: str) -> str:
    return f"blobs/sha256/{sha256[:2]}/{sha256}"


def manifest_path(snapshot_id: str) -> str:
    return f"snapshots/{snapshot_id}/{MANIFEST}"


def ref_path(generation: int) -> str:
    return f"{REFS}{ref_name(generation)}"


def ref_name(generation: int) -> str:
    """A pointer generation's name: 12 digits, or more after one 'z' per digit beyond 12,
    so that names list in their generations' order at any width (the 'z' sorts after
    every digit): 000000000042.json < 999999999999.json < z1000000000000.json."""
    digits = f"{generation:012d}"
    return f"{'z' * (len(digits) - 12)}{digits}.json"


def ref_generation(name: str) -> int | None:
    """The generation a pointer name stands for, or None for a name `ref_name` does not
    write (a stray file, leading zeros beyond 12 digits, a 'z' too many or too few)."""
    found = _REF_NAME_RE.fullmatch(name)
    if found is None:
        return None
    generation = int(found.group(1))
    return generation if ref_name(generation) == name else None


def new_snapshot_id(now: datetime | None = None) -> str:
    """Sortable by time, unique across publishers: 20261130T060000.123456Z-1a2b3c4d."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment.strftime('%Y%m%dT%H%M%S.%f')}Z-{secrets.token_hex(4)}"


def snapshot_files(root: Path) -> list[Path]:
    """The files a snapshot of `root` holds: the state database and the index.

    Refuses what a snapshot never holds instead of publishing it: a symlink, something
    that is not a regular file, or a name the layout does not allow (see
    `check_file_path`, the rule a reader applies to every manifest)."""
    found = []
    state = root / STATE_FILE
    if state.is_symlink() or (state.exists() and not state.is_file()):
        raise SnapshotError(f"{state} is not a regular file: a snapshot holds no links")
    if state.exists():
        found.append(state)
    lance = root / INDEX_DIR
    if lance.is_symlink():
        raise SnapshotError(f"{lance} is a symlink: a snapshot holds no links")
    index_files = []
    for folder, dirs, names in os.walk(lance):
        for name in sorted(dirs + names):
            path = Path(folder) / name
            where = relative(root, path)
            if path.is_symlink():
                raise SnapshotError(f"{path} is a symlink: a snapshot holds no links")
            try:
                check_file_path(where, str(root))
            except SnapshotError:
                raise SnapshotError(
                    f"{path} is not part of a snapshot (names are letters, digits, '_.=-', "
                    "not starting with a dot): remove it and build again"
                ) from None
            if name in names:
                if not path.is_file():
                    raise SnapshotError(f"{path} is not a regular file: remove it and build again")
                index_files.append(path)
    return found + sorted(index_files)


def first_piece(relative: str) -> int:
    """The size of a file's first piece: DuckDB's headers for the state database (its
    blocks then start on a piece), a whole piece for any other file."""
    return DUCKDB_HEADERS if relative == STATE_FILE else PIECE_SIZE


def hash_file(path: Path, relative: str) -> FileEntry:
    """The file's sha256, size and pieces (cut as `first_piece` says), read once."""
    whole = hashlib.sha256()
    pieces = []
    size = 0
    with open(path, "rb") as handle:
        want = first_piece(relative)
        while block := handle.read(want):
            whole.update(block)
            pieces.append(Piece(hashlib.sha256(block).hexdigest(), len(block)))
            size += len(block)
            want = PIECE_SIZE
    if not pieces:  # an empty file is one empty piece
        pieces.append(Piece(hashlib.sha256(b"").hexdigest(), 0))
    return FileEntry(relative, size, whole.hexdigest(), tuple(pieces))


def relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()
