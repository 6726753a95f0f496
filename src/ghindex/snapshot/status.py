"""What a snapshot holds: from a local directory or from a store's pointer. A local
snapshot's files are opened too (`verify.check_files`): a damaged one is an error."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ghindex.errors import SnapshotError
from ghindex.snapshot.layout import MANIFEST, NOT_BUILT, Manifest
from ghindex.snapshot.local import live_root
from ghindex.snapshot.refs import latest_ref, read_manifest
from ghindex.snapshot.stores import Store, shown
from ghindex.snapshot.verify import check_files
from ghindex.vocabulary.layout import local_manifest


def local_status(given: Path) -> dict[str, Any]:
    root = live_root(given)
    body = local_manifest(root / MANIFEST)
    if body is None:
        raise SnapshotError(NOT_BUILT.format(given))
    summary = manifest_summary(root, body, source=str(given))
    summary["checked"] = check_files(root, summary["counts"])
    return summary


def manifest_summary(root: Path, body: dict[str, Any], source: str) -> dict[str, Any]:
    """What the manifest `body` of the snapshot in `root` says it holds, opening no other
    file: its size is the manifest's file list's, or the directory's for a local build."""
    files = body.get("files")
    total = (
        sum(f["size"] for f in files if isinstance(f, dict) and isinstance(f.get("size"), int))
        if isinstance(files, list) and files
        else sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    )
    return _summary(body, total, source=source)


def store_status(store: Store) -> dict[str, Any]:
    ref = latest_ref(store)
    if ref is None:
        raise SnapshotError(f"{shown(store.url)} holds no snapshot yet: publish one first")
    manifest: Manifest = read_manifest(store, ref)
    summary = _summary(manifest.body, sum(f.size for f in manifest.files), source=shown(store.url))
    summary["generation"] = ref.generation
    return summary


def created_at(body: dict[str, Any]) -> str | None:
    """When a manifest's snapshot was published, or built if it never was."""
    return body.get("created_at") or body.get("built_at")


def age_seconds(body: dict[str, Any]) -> int | None:
    """Seconds since `created_at(body)`."""
    created = created_at(body)
    if not created:
        return None
    return int((datetime.now(UTC) - datetime.fromisoformat(created)).total_seconds())


def _summary(body: dict[str, Any], total: int, source: str) -> dict[str, Any]:
    created, age = created_at(body), age_seconds(body)
    return {
        "source": source,
        "snapshot_id": body.get("snapshot_id"),
        "created_at": created,
        "built_at": body.get("built_at"),
        "age_seconds": age,
        "repos": body.get("repos", {}),
        "counts": body.get("counts", {}),
        "redaction": body.get("redaction"),
        "model": body.get("model"),
        "total_bytes": total,
        "ghindex_version": body.get("ghindex_version"),
    }
