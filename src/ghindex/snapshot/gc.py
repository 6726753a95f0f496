"""`ghindex gc`: keep the newest N published snapshots, remove the rest and their blobs.

Safe beside publishes and pulls in flight:

- the snapshot the newest pointer names is never removed: the pointer is read again
  after the listings and before every delete, so a publish that moves it meanwhile
  keeps its snapshot and everything that snapshot uses;
- a manifest younger than the grace period (a publish in flight: it writes its manifest
  before its blobs) is kept, and so is a snapshot replaced as the newest less than the
  grace period ago (a reader may be pulling it);
- a blob is removed only when no kept manifest names it and it is older than the grace
  period. A publisher reuses a blob it did not upload only when it is younger than half
  the shortest grace (`publish.REUSE_WINDOW`), so gc never removes one it just reused.

The grace period is at least `MIN_GRACE`: a shorter one is raised to it, with a note.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ghindex.errors import SnapshotError
from ghindex.snapshot.layout import (
    REFS,
    SNAPSHOT_ID_RE,
    Ref,
    manifest_path,
    ref_generation,
    ref_path,
)
from ghindex.snapshot.refs import latest_ref, read_manifest, refs
from ghindex.snapshot.stores import Store, shown

GRACE = timedelta(hours=24)
MIN_GRACE = timedelta(hours=1)  # a publish or a pull takes less: never shorter


@dataclass
class GcReport:
    store: str
    kept: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    blobs_removed: int = 0
    bytes_removed: int = 0
    refs_removed: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def gc(
    store: Store, keep: int, *, grace: timedelta = GRACE, now: datetime | None = None
) -> GcReport:
    if keep < 1:
        raise SnapshotError(f"--keep must be at least 1, not {keep}: the newest snapshot stays")
    report = GcReport(store=shown(store.url))
    if grace < MIN_GRACE:
        report.notes.append(
            f"a grace of {grace.total_seconds() / 3600:g} hours was raised to "
            f"{MIN_GRACE.total_seconds() / 3600:g}: a publish or a pull in flight needs its files"
        )
        grace = MIN_GRACE
    now = (now or datetime.now(UTC)).astimezone(UTC)
    generations = refs(store)  # read before the manifests are listed, as the pointer is
    replaced = _replaced_at(store, generations)
    manifests = {
        entry.path.split("/")[1]: entry
        for entry in store.list("snapshots/")
        if entry.path == manifest_path(entry.path.split("/")[1])
        and SNAPSHOT_ID_RE.fullmatch(entry.path.split("/")[1])  # anything else is not ours
    }
    published = [r.snapshot_id for r in reversed(generations)]  # newest generation first
    kept = set(list(dict.fromkeys(published))[:keep])
    newest = _Newest(store, generations[-1] if generations else None)
    for snapshot_id in sorted(manifests, reverse=True):  # ids sort by creation time
        young = now - manifests[snapshot_id].last_modified < grace
        recent = snapshot_id in replaced and now - replaced[snapshot_id] < grace
        if snapshot_id in kept or young or recent or newest.names(snapshot_id):
            report.kept.append(snapshot_id)
            continue
        store.delete(manifest_path(snapshot_id))
        report.removed.append(snapshot_id)

    needed: set[str] = set()
    for snapshot_id in report.kept:
        needed |= read_manifest(store, snapshot_id=snapshot_id).blobs()
    for entry in store.list("blobs/"):
        digest = entry.path.rsplit("/", 1)[-1]
        if digest in needed or now - entry.last_modified < grace:
            continue
        needed |= newest.blobs_if_moved()
        if digest in needed:
            continue
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


class _Newest:
    """The newest pointer generation, read again on every question (one small listing
    when it has not moved, see `latest_ref`)."""

    def __init__(self, store: Store, ref: Ref | None) -> None:
        self.store = store
        self.ref = ref
        self.seen = ref.snapshot_id if ref else None

    def names(self, snapshot_id: str) -> bool:
        self.ref = latest_ref(self.store, known=self.ref)
        return self.ref is not None and self.ref.snapshot_id == snapshot_id

    def blobs_if_moved(self) -> set[str]:
        """The blobs of the newest pointer's snapshot when it moved since last asked."""
        self.ref = latest_ref(self.store, known=self.ref)
        if self.ref is None or self.ref.snapshot_id == self.seen:
            return set()
        self.seen = self.ref.snapshot_id
        try:
            return read_manifest(self.store, self.ref).blobs()
        except SnapshotError:  # a pointer to a missing manifest: the next publish repairs it
            return set()


def _replaced_at(store: Store, generations: list[Ref]) -> dict[str, datetime]:
    """Snapshot id -> when a later generation replaced it as the newest: the time the
    generation after its last one was written."""
    written = {
        ref_generation(entry.path.rsplit("/", 1)[-1]): entry.last_modified
        for entry in store.list(REFS)
    }
    replaced: dict[str, datetime] = {}
    for ref, after in itertools.pairwise(generations):
        if after.snapshot_id != ref.snapshot_id and after.generation in written:
            replaced[ref.snapshot_id] = written[after.generation]
    return replaced
