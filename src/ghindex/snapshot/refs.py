"""Reading the pointer and manifests of a store."""

from __future__ import annotations

import hashlib
import json

from ghindex.errors import SnapshotError
from ghindex.snapshot.layout import REFS, Manifest, Ref, manifest_path
from ghindex.snapshot.stores import Store, shown


def refs(store: Store) -> list[Ref]:
    """Every pointer generation, oldest first."""
    found = []
    for entry in store.list(REFS):
        name = entry.path.rsplit("/", 1)[-1]
        if not name.endswith(".json") or not name[:-5].isdigit():
            continue
        found.append(_parse_ref(store, entry.path))
    return sorted(found, key=lambda r: r.generation)


def latest_ref(store: Store) -> Ref | None:
    """The newest generation of the pointer, or None for an empty store."""
    paths = [e.path for e in store.list(REFS) if e.path.rsplit("/", 1)[-1][:-5].isdigit()]
    if not paths:
        return None
    newest = max(paths, key=lambda p: int(p.rsplit("/", 1)[-1][:-5]))
    return _parse_ref(store, newest)


def read_manifest(store: Store, ref: Ref | None = None, snapshot_id: str | None = None) -> Manifest:
    """A snapshot's manifest, checked against the pointer when one is given."""
    wanted = snapshot_id or (ref.snapshot_id if ref else None)
    if wanted is None:
        raise SnapshotError(f"{shown(store.url)} holds no snapshot yet: publish one first")
    path = manifest_path(wanted)
    if store.head(path) is None:
        if ref is not None and snapshot_id is None:
            raise SnapshotError(
                f"the pointer of {shown(store.url)} names snapshot {wanted}, whose manifest is "
                "missing: the store is damaged; publish again, or pull an older --snapshot"
            )
        raise SnapshotError(f"no snapshot {wanted} in {shown(store.url)}: check the id")
    data = store.get(path)
    checked = ref is not None and wanted == ref.snapshot_id
    if checked and hashlib.sha256(data).hexdigest() != ref.manifest_sha256:
        raise SnapshotError(
            f"the manifest of snapshot {wanted} does not match the pointer's checksum: "
            "the store is damaged; publish again"
        )
    return Manifest.from_bytes(data, f"{shown(store.url)}/{path}")


def _parse_ref(store: Store, path: str) -> Ref:
    try:
        value = json.loads(store.get(path))
        return Ref(
            int(value["generation"]),
            value["snapshot_id"],
            value["manifest_sha256"],
            value["created_at"],
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(
            f"{path} in {shown(store.url)} is not a ghindex pointer ({exc})"
        ) from None
