"""What a snapshot holds: from a local directory or from a store's pointer."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ghindex.errors import SnapshotError
from ghindex.snapshot.layout import MANIFEST, Manifest
from ghindex.snapshot.refs import latest_ref, read_manifest
from ghindex.snapshot.stores import Store, shown


def local_status(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.exists():
        raise SnapshotError(
            f"no snapshot or build in {root}: run `ghindex build` or `ghindex pull`"
        )
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SnapshotError(f"{path} is not valid JSON ({exc})") from None
    files = body.get("files")
    total = (
        sum(f["size"] for f in files)
        if files
        else sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    )
    return _summary(body, total, source=str(root))


def store_status(store: Store) -> dict[str, Any]:
    ref = latest_ref(store)
    if ref is None:
        raise SnapshotError(f"{shown(store.url)} holds no snapshot yet: publish one first")
    manifest: Manifest = read_manifest(store, ref)
    summary = _summary(manifest.body, sum(f.size for f in manifest.files), source=shown(store.url))
    summary["generation"] = ref.generation
    return summary


def _summary(body: dict[str, Any], total: int, source: str) -> dict[str, Any]:
    created = body.get("created_at") or body.get("built_at")
    age = None
    if created:
        moment = datetime.fromisoformat(created.replace("Z", "+00:00"))
        age = int((datetime.now(UTC) - moment).total_seconds())
    return {
        "source": source,
        "snapshot_id": body.get("snapshot_id"),
        "created_at": created,
        "built_at": body.get("built_at"),
        "age_seconds": age,
        "repos": body.get("repos", {}),
        "counts": body.get("counts", {}),
        "model": body.get("model"),
        "total_bytes": total,
        "ghindex_version": body.get("ghindex_version"),
    }
