"""`ghindex gc`: keep the newest N published snapshots, remove the rest and their blobs.

Safe beside a publish in flight: a publisher writes its manifest before its blobs,
manifests younger than the grace period are never removed, and a blob is removed
only when no remaining manifest names it and it is older than the grace period.
The snapshot the pointer names is always kept, whatever N is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ghindex.errors import SnapshotError
from ghindex.snapshot.layout import SNAPSHOT_ID_RE, manifest_path, ref_path
from ghindex.snapshot.refs import read_manifest, refs
from ghindex.snapshot.stores import Store, shown

GRACE = timedelta(hours=24)


@dataclass
class GcReport:
    store: str
    kept: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    blobs_removed: int = 0
    bytes_removed: int = 0
    refs_removed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def gc(
    store: Store, keep: int, *, grace: timedelta = GRACE, now: datetime | None = None
) -> GcReport:
    if keep < 1:
        raise SnapshotError(f"--keep must be at least 1, not {keep}: the newest snapshot stays")
    now = (now or datetime.now(UTC)).astimezone(UTC)
    report = GcReport(store=shown(store.url))
    generations = refs(store)  # read before the manifests are listed, as the pointer is
    pointer = generations[-1] if generations else None
    manifests = {
        entry.path.split("/")[1]: entry
        for entry in store.list("snapshots/")
        if entry.path == manifest_path(entry.path.split("/")[1])
        and SNAPSHOT_ID_RE.fullmatch(entry.path.split("/")[1])  # anything else is not ours
    }
    newest_first = sorted(manifests, reverse=True)  # ids sort by creation time
    published = [r.snapshot_id for r in reversed(generations)]  # newest generation first
    kept = set(list(dict.fromkeys(published))[:keep])
    if pointer is not None:
        kept.add(pointer.snapshot_id)
    for snapshot_id in newest_first:
        young = now - manifests[snapshot_id].last_modified < grace
        if snapshot_id in kept or (young and _newer_than(snapshot_id, pointer)):
            report.kept.append(snapshot_id)
            continue
        store.delete(manifest_path(snapshot_id))
        report.removed.append(snapshot_id)

    needed: set[str] = set()
    for snapshot_id in report.kept:
        needed |= read_manifest(store, snapshot_id=snapshot_id).blobs()
    for entry in store.list("blobs/"):
        digest = entry.path.rsplit("/", 1)[-1]
        if digest not in needed and now - entry.last_modified >= grace:
            store.delete(entry.path)
            report.blobs_removed += 1
            report.bytes_removed += entry.size

    # Pointer generations of removed snapshots (the newest generation always stays; read
    # again, since a publish may have added one meanwhile).
    removed = set(report.removed)
    for ref in refs(store)[:-1]:
        if ref.snapshot_id in removed:
            store.delete(ref_path(ref.generation))
            report.refs_removed += 1
    return report


def _newer_than(snapshot_id: str, pointer) -> bool:
    """A manifest newer than the pointer's may belong to a publish in flight."""
    return pointer is None or snapshot_id > pointer.snapshot_id
