"""`ghindex gc` on a directory store: what it removes leaves no empty folders behind,
and what it prints names what it removed."""

from __future__ import annotations

from ghindex.cli.snapshots import gc_text
from ghindex.snapshot.gc import GcReport
from ghindex.snapshot.stores import Store


def test_a_local_delete_removes_the_folders_it_empties_but_never_the_root(tmp_path):
    root = tmp_path / "store"
    store = Store(str(root))
    store.create()
    store.put("snapshots/20261203T000000Z-a/manifest.json", b"{}")
    store.put("snapshots/20261203T000000Z-b/manifest.json", b"{}")
    store.put("snapshots/20261203T000000Z-b/other.json", b"{}")

    store.delete("snapshots/20261203T000000Z-a/manifest.json")
    store.delete("snapshots/20261203T000000Z-b/manifest.json")

    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "snapshots",
        "snapshots/20261203T000000Z-b",
        "snapshots/20261203T000000Z-b/other.json",
    ]
    store.delete("snapshots/20261203T000000Z-b/other.json")
    assert root.is_dir() and list(root.iterdir()) == []


def test_gc_says_which_snapshots_and_how_many_blobs_it_removed():
    report = GcReport(
        store="store",
        kept=["20261203T000000Z-b"],
        removed=["20261202T000000Z-a"],
        blobs_removed=3,
        bytes_removed=4_500,
    )
    assert gc_text(report) == (
        "kept 1 snapshot (20261203T000000Z-b); removed 1 snapshot (20261202T000000Z-a) "
        "and 3 unused blobs (4.5 kB)"
    )
    nothing = GcReport(store="store", kept=["20261203T000000Z-b"])
    assert gc_text(nothing) == (
        "kept 1 snapshot (20261203T000000Z-b); removed 0 snapshots and 0 unused blobs (0 bytes)"
    )
