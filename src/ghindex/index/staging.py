"""A `--full` build beside the serving index, switched in only when it is complete.

`build --full` writes its `chunks` table, its nearest-items lists and its manifest into
`lance/.next/`, while `lance/chunks.lance`, `lance/nearest/` and the manifest keep
serving the previous build. Only when all three are written does `switch` move them
into place: the table and the lists' folder each by one atomic exchange (Linux
`renameat2`; two renames elsewhere), then the manifest by `os.replace`. A build killed before the
switch leaves the previous index and its manifest exactly as they were; the next build
removes what it left. The embedding caches stay in `lance/` (vectors do not depend on
chunks), so a rerun embeds only what the killed one had not cached.

The staging folder's name starts with a dot: LanceDB never lists it as a table, and
publishing refuses it ("not part of a snapshot") rather than uploading half a build.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from pathlib import Path

from ghindex.index import nearest
from ghindex.index import table as index
from ghindex.vocabulary.layout import fsync_dir

STAGING = ".next"
_TABLE_DIR = f"{index.CHUNKS}.lance"  # where LanceDB keeps the table in its folder
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def path_in(lance_path: Path) -> Path:
    return Path(lance_path) / STAGING


def discard(lance_path: Path) -> bool:
    """Remove what a killed `--full` build left; True when there was something."""
    staged = path_in(lance_path)
    if not staged.exists():
        return False
    shutil.rmtree(staged)
    return True


def begin(lance_path: Path) -> Path:
    """An empty staging folder for a new index (a leftover one is discarded first)."""
    discard(lance_path)
    staged = path_in(lance_path)
    staged.mkdir(parents=True)
    return staged


def switch(lance_path: Path, manifest_path: Path) -> None:
    """Put the staged table, nearest lists and manifest in place of the serving ones,
    then remove the previous table and lists (now in the staging folder) with the folder."""
    lance_path = Path(lance_path)
    staged = path_in(lance_path)
    new_table, serving = staged / _TABLE_DIR, lance_path / _TABLE_DIR
    if not new_table.is_dir():
        raise FileNotFoundError(f"{new_table} is not a LanceDB table: nothing to switch to")
    if serving.exists():
        _exchange(new_table, serving)
    else:
        os.rename(new_table, serving)
    new_lists, lists = staged / nearest.NEAREST_DIR, lance_path / nearest.NEAREST_DIR
    if new_lists.is_dir():
        if lists.exists():
            _exchange(new_lists, lists)
        else:
            os.rename(new_lists, lists)
        (lance_path / nearest.NEAREST_FILE).unlink(missing_ok=True)  # an older ghindex's
    fsync_dir(lance_path)
    os.replace(staged / Path(manifest_path).name, manifest_path)
    fsync_dir(Path(manifest_path).parent)
    shutil.rmtree(staged)


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories: atomically where the kernel can, else by two renames (a
    reader in between finds no table for a moment; a kill there is repaired by hand)."""
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is not None:
        done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        if done == 0:
            return
    aside = a.with_name(a.name + ".previous")
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    except OSError:
        return None
