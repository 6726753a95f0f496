"""The names of what a workdir and a snapshot hold on disk, for every stage that writes
or reads them: the state database, the index directory, the manifest, and the format
version they are written in. Where things live in a *store* is `snapshot/layout.py`'s.
"""

from __future__ import annotations

import os
from pathlib import Path

FORMAT_VERSION = 1  # of a snapshot's files as a whole, recorded in its manifest
STATE_FILE = "state.duckdb"
INDEX_DIR = "lance"
MANIFEST = "manifest.json"
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
