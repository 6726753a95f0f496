"""The names of what a workdir and a snapshot hold on disk, for every stage that writes
or reads them: the state database, the index directory, the manifest, and the format
version they are written in. Where things live in a *store* is `snapshot/layout.py`'s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ghindex.errors import SnapshotError

FORMAT_VERSION = 2  # of a snapshot's files as a whole, recorded in its manifest
STATE_FILE = "state.duckdb"
INDEX_DIR = "lance"
MANIFEST = "manifest.json"
DEMO_DIR = "demo"  # where `ghindex demo` builds, inside WORKDIR
# Inside INDEX_DIR: the query encoder the index's vectors were made with (ONNX file,
# tokenizer, their metadata), so that a reader needs no model package, hub or torch
# (index/carried_encoder.py). Each file's name, and the most bytes it may hold: a store's
# copy is untrusted input, refused above these before it is downloaded or read.
ENCODER_DIR = "query_encoder"
ENCODER_MODEL = "model.onnx"
ENCODER_TOKENIZER = "tokenizer.json"
ENCODER_META = "encoder.json"
ENCODER_FILES = {ENCODER_MODEL: 1 << 30, ENCODER_TOKENIZER: 32 << 20, ENCODER_META: 64 << 10}
# In a directory that pulls: the link naming the version in use (see snapshot/local.py).
CURRENT = "current"
# What a snapshot directory holds at its top level, and nothing else.
SNAPSHOT_NAMES = (STATE_FILE, INDEX_DIR, MANIFEST)
NOT_BUILT = (
    "no snapshot in {}: run `ghindex demo` for the sample, `ghindex fetch` and `ghindex "
    "build` for your repositories, or `ghindex pull --store URL`"
)


class SnapshotFiles:
    """The files of a snapshot directory, for a class that says where its `root` is."""

    root: Path

    @property
    def state_path(self) -> Path:
        return self.root / STATE_FILE

    @property
    def lance_path(self) -> Path:
        return self.root / INDEX_DIR

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST


def local_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at `path` (a local snapshot's or workdir's `manifest.json`), or None
    when there is none; one that is not a JSON object is one line naming the file. The
    one reader of local manifests: a store's are checked by `snapshot/layout.py`."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnapshotError(
            f"{path} is not valid JSON ({exc}): build again with `ghindex build`, or pull "
            "the snapshot again"
        ) from None
    if not isinstance(body, dict):
        raise SnapshotError(
            f"{path} is not a manifest (a JSON {type(body).__name__}, not an object): build "
            "again with `ghindex build`, or pull the snapshot again"
        )
    return body


def encoder_file_cap(path: str) -> int | None:
    """The most bytes the snapshot file at `path` ('/'-separated, from the snapshot's
    root) may hold when it is part of the query encoder (0 for a name an encoder never
    holds); None for any other file."""
    folder, _, name = path.rpartition("/")
    if folder != f"{INDEX_DIR}/{ENCODER_DIR}":
        return None
    return ENCODER_FILES.get(name, 0)


def live_root(path: Path) -> Path:
    """The directory holding `path`'s current snapshot: the version `current` names,
    resolved once (so one reader sees one version), or `path` itself."""
    link = path / CURRENT
    if link.is_symlink():
        return link.resolve()
    return path


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
