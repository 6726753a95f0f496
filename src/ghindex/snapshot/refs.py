"""Reading the pointer and manifests of a store, checked as the hostile input they are."""

from __future__ import annotations

import hashlib

from ghindex.errors import SnapshotError
from ghindex.snapshot.layout import (
    MAX_MANIFEST_BYTES,
    MAX_POINTER_BYTES,
    REFS,
    Manifest,
    Ref,
    check_snapshot_id,
    manifest_path,
    ref_generation,
    ref_path,
)
from ghindex.snapshot.stores import Store, shown


def _generations(store: Store, after: str | None = None) -> dict[int, str]:
    """Pointer generation -> its path (only names after `after`, when given); names
    that are not a generation are ignored."""
    found = {}
    for entry in store.list(REFS, offset=after):
        name = entry.path.rsplit("/", 1)[-1]
        generation = ref_generation(name) if entry.path == REFS + name else None
        if generation is not None:
            found[generation] = entry.path
    return found


def refs(store: Store) -> list[Ref]:
    """Every pointer generation, oldest first."""
    return [_read_ref(store, g, p) for g, p in sorted(_generations(store).items())]


def latest_ref(store: Store, known: Ref | None = None) -> Ref | None:
    """The newest generation of the pointer, or None for an empty store.

    Given `known` (a generation read before), only the names from its own on are
    listed: when nothing is newer that is one request, whose answer is one name
    however many generations the store keeps, and `known` itself is returned unread
    (a generation is written once, never changed). Should `known`'s generation be gone
    (a store emptied and published to again), the whole pointer is read."""
    if known is not None:
        listed = _generations(store, after=ref_path(known.generation - 1))
        if known.generation in listed:
            newest = max(listed)
            if newest == known.generation:
                return known
            return _read_ref(store, newest, listed[newest])
    generations = _generations(store)
    if not generations:
        return None
    newest = max(generations)
    return _read_ref(store, newest, generations[newest])


def read_manifest(store: Store, ref: Ref | None = None, snapshot_id: str | None = None) -> Manifest:
    """A snapshot's manifest, checked: against the pointer's checksum when one is given,
    and always against the id it was asked for."""
    wanted = snapshot_id or (ref.snapshot_id if ref else None)
    if wanted is None:
        raise SnapshotError(f"{shown(store.url)} holds no snapshot yet: publish one first")
    check_snapshot_id(wanted, "--snapshot" if snapshot_id else f"the pointer of {shown(store.url)}")
    path = manifest_path(wanted)
    if store.head(path) is None:
        if ref is not None and snapshot_id is None:
            raise SnapshotError(
                f"the pointer of {shown(store.url)} names snapshot {wanted}, whose manifest is "
                "missing: the store is damaged; publish again, or pull an older --snapshot"
            )
        raise SnapshotError(f"no snapshot {wanted} in {shown(store.url)}: check the id")
    data = store.get(path, MAX_MANIFEST_BYTES)
    checked = ref is not None and wanted == ref.snapshot_id
    if checked and hashlib.sha256(data).hexdigest() != ref.manifest_sha256:
        raise SnapshotError(
            f"the manifest of snapshot {wanted} does not match the pointer's checksum: "
            "the store is damaged; publish again"
        )
    where = f"{shown(store.url)}/{path}"
    manifest = Manifest.from_bytes(data, where)
    if manifest.snapshot_id != wanted:
        raise SnapshotError(
            f"{where} says it is snapshot {manifest.snapshot_id}, not {wanted}: "
            "the store is damaged"
        )
    return manifest


def _read_ref(store: Store, generation: int, path: str) -> Ref:
    data = store.get(path, MAX_POINTER_BYTES)
    return Ref.from_bytes(data, generation, f"{path} in {shown(store.url)}")
