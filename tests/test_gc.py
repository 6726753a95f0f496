"""`ghindex gc` on a directory store: what it removes leaves no empty folders behind,
and what it prints names what it removed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.cli.snapshots import gc_text
from ghindex.errors import SnapshotError
from ghindex.snapshot import gc, publish, pull, stage
from ghindex.snapshot.gc import GcReport
from ghindex.snapshot.layout import blob_path, manifest_path, ref_generation, ref_name, ref_path
from ghindex.snapshot.refs import latest_ref, read_manifest
from ghindex.snapshot.stores import Store
from testkit.github_server import issue_node
from testkit.state import built_workdir, settings_for, store_issues


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


# ------------------------------------------------- a store that gc cannot destroy (#49, 3)

GC_EXAMPLES = int(os.environ.get("GHINDEX_EXAMPLES", "5"))


@pytest.fixture(scope="session")
def gc_template(tmp_path_factory):
    """A workdir with a few issues, fetched state and a built index (embedded once)."""
    return built_workdir(tmp_path_factory.mktemp("gc-template") / "work", 5, topics=3, repeat=10)


@pytest.fixture(params=["local", "s3"])
def store_base(request, isolated):
    """Where each example makes a fresh store, on each backend."""
    if request.param == "local":
        return str(isolated / "stores")
    return request.getfixturevalue("s3_store_url")


def fresh(base: str) -> Store:
    return Store(f"{base}/{uuid.uuid4().hex[:10]}")


def edited(template: Path, where: Path, note: str) -> Path:
    """A copy of the template whose state holds one more edit (new pieces to publish)."""
    work = where / f"work-{uuid.uuid4().hex[:8]}"
    shutil.copytree(template, work)
    store_issues(settings_for(work), [issue_node(2, title=f"Issue 2 edited: {note}")])
    return work


class DeletesMeanwhile(Store):
    """A real store on which something else happens just before the Nth delete: the
    way a publish lands while gc is at work."""

    def __init__(self, url: str, at: int, meanwhile) -> None:
        super().__init__(url)
        self.at, self.meanwhile, self.deletes = at, meanwhile, 0

    def delete(self, path: str) -> None:
        self.deletes += 1
        if self.deletes == self.at:
            self.meanwhile()
        super().delete(path)


@pytest.mark.slow
@settings(
    max_examples=GC_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    older=st.integers(1, 3),
    keep=st.integers(1, 3),
    grace_hours=st.sampled_from([0.0, 0.01, 1.0, 24.0]),
    hours_old=st.sampled_from([0, 2, 30, 24 * 7]),
    commit_at=st.integers(1, 40),
)
def test_gc_never_removes_what_the_newest_pointer_names(
    gc_template, store_base, isolated, older, keep, grace_hours, hours_old, commit_at
):
    """Whatever the grace, however old the earlier snapshots are (a local store's files
    are dated back), and whichever of gc's deletes a publish lands before: the newest
    pointer's snapshot is kept and pulls whole afterwards."""
    base = fresh(store_base)
    for n in range(older):
        publish(edited(gc_template, isolated, f"old {n}"), base)
    if base.local_root is not None and hours_old:
        then = (datetime.now(UTC) - timedelta(hours=hours_old)).timestamp()
        for path in base.local_root.rglob("*"):
            os.utime(path, (then, then))
    staged = stage(edited(gc_template, isolated, "new"), base)
    landed: list[str] = []
    store = DeletesMeanwhile(
        base.url, commit_at, lambda: landed.append(staged.commit().snapshot_id)
    )

    report = gc(store, keep, grace=timedelta(hours=grace_hours))

    newest = latest_ref(base)
    assert newest.snapshot_id not in report.removed
    assert staged.report.snapshot_id in report.kept  # younger than any grace: in flight
    if not landed:  # gc deleted less than commit_at things: the publish lands after it
        landed.append(staged.commit().snapshot_id)
    assert latest_ref(base).snapshot_id == landed[0] == staged.report.snapshot_id
    pulled = pull(base, isolated / f"pulled-{uuid.uuid4().hex[:8]}")
    assert pulled.snapshot_id == staged.report.snapshot_id
    if hours_old > max(grace_hours, 1) and base.local_root is not None:  # beyond keep go
        assert len(report.removed) == max(0, older - keep)
    if grace_hours < 1:
        assert report.notes == [
            f"a grace of {grace_hours:g} hours was raised to 1: a publish or a pull in "
            "flight needs its files"
        ]


def test_a_grace_of_zero_is_raised_with_one_line(gc_template, isolated, run):
    store = isolated / "store"
    publish(gc_template, Store(str(store)))
    result = run("gc", "--store", str(store), "--keep", "1", "--grace-hours", "0")
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "note: a grace of 0 hours was raised to 1: a publish or a pull in flight needs its files\n"
    )


@given(st.lists(st.integers(0, 10**40), min_size=2, max_size=6, unique=True))
def test_generation_names_sort_and_parse_at_any_width(generations):
    names = [ref_name(g) for g in generations]
    assert [ref_generation(n) for n in names] == generations
    assert sorted(names) == [ref_name(g) for g in sorted(generations)]
    for name in names:  # a name ref_name does not write is not a generation
        assert ref_generation("0" + name) is None
        assert ref_generation("z" + name) is None
        assert ref_generation(name.removesuffix(".json")) is None


@settings(
    max_examples=GC_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    generation=st.one_of(
        st.sampled_from([10**12 - 2, 10**12 - 1, 10**13 - 1]),
        st.integers(10**12, 10**30),
    )
)
def test_publishes_go_on_past_any_generation_width(gc_template, isolated, generation):
    """A pointer whose generation is wider than 12 digits, or becomes so, is read, and the
    publishes after it are the newest."""
    store = fresh(str(isolated / "stores"))
    first = publish(gc_template, store)
    raw = (store.local_root / manifest_path(first.snapshot_id)).read_bytes()
    pointer = {
        "generation": generation,
        "snapshot_id": first.snapshot_id,
        "manifest_sha256": hashlib.sha256(raw).hexdigest(),
        "created_at": "2026-12-01T00:00:00+00:00",
    }
    store.put(ref_path(generation), json.dumps(pointer).encode())
    assert latest_ref(store).generation == generation

    second = publish(edited(gc_template, isolated, "second"), store)
    third = publish(edited(gc_template, isolated, "third"), store)

    assert (second.generation, third.generation) == (generation + 1, generation + 2)
    assert latest_ref(store).snapshot_id == third.snapshot_id
    assert latest_ref(store, known=latest_ref(store)).generation == generation + 2
    assert pull(store, isolated / f"pulled-{uuid.uuid4().hex[:8]}").snapshot_id == (
        third.snapshot_id
    )


_DAMAGE = {
    "the manifest is gone": lambda store, manifest: store.delete(
        manifest_path(manifest.snapshot_id)
    ),
    "the manifest and every blob are gone": lambda store, manifest: [
        store.delete(path)
        for path in [manifest_path(manifest.snapshot_id)] + [blob_path(b) for b in manifest.blobs()]
    ],
    "a blob is gone": lambda store, manifest: store.delete(blob_path(min(manifest.blobs()))),
    "the manifest was changed": lambda store, manifest: store.put(
        manifest_path(manifest.snapshot_id), manifest.raw + b" "
    ),
}


@pytest.mark.slow
@settings(
    max_examples=GC_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(damage=st.sampled_from(sorted(_DAMAGE)), same_files=st.booleans())
def test_publish_repairs_a_pointer_to_a_missing_or_damaged_snapshot(
    gc_template, store_base, isolated, run, damage, same_files
):
    """However the pointer's snapshot went missing (a gc of old, a hand), publish writes a
    new generation that pulls whole, saying what it replaced; pulls work again."""
    store = fresh(store_base)
    first = publish(gc_template, store)
    _DAMAGE[damage](store, read_manifest(store, latest_ref(store)))
    work = gc_template if same_files else edited(gc_template, isolated, "repair")

    result = run("--workdir", str(work), "publish", "--store", store.url)

    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    if damage == "a blob is gone":  # uploaded again: the store's listing lacks it
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].endswith("; this publish replaces it")
    newest = latest_ref(store)
    assert newest.generation == 2 and newest.snapshot_id != first.snapshot_id
    assert pull(store, isolated / f"pulled-{uuid.uuid4().hex[:8]}").snapshot_id == (
        newest.snapshot_id
    )


@pytest.mark.slow
def test_gc_publish_and_pulls_together_fail_no_pull(gc_template, isolated):
    """gc (asked for no grace at all), a publisher and two pullers run together on one
    store for a bounded time, over snapshots of days ago: every pull succeeds, and the
    store ends whole."""
    store = fresh(str(isolated / "stores"))
    work = edited(gc_template, isolated, "start")
    for n in range(3):
        store_issues(settings_for(work), [issue_node(3, title=f"Issue 3, version {n}")])
        publish(work, store)
    then = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    for path in store.local_root.rglob("*"):
        os.utime(path, (then, then))
    until = time.monotonic() + float(os.environ.get("GHINDEX_RACE_SECONDS", "6"))
    done: dict[str, int] = {"published": 0, "collected": 0, "pulled": 0}
    failed: list[str] = []

    def publisher() -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            store_issues(settings_for(work), [issue_node(4, title=f"Issue 4, edit {n}")])
            publish(work, store)
            done["published"] += 1

    def collector() -> None:
        while time.monotonic() < until:
            done["collected"] += len(gc(store, 1, grace=timedelta(0)).removed)

    def puller(index: int) -> None:
        while time.monotonic() < until:
            try:
                pull(store, isolated / f"dest-{index}")
                done["pulled"] += 1
            except SnapshotError as exc:
                failed.append(str(exc))

    with ThreadPoolExecutor(4) as pool:
        running = [pool.submit(publisher), pool.submit(collector)]
        running += [pool.submit(puller, i) for i in range(2)]
        for future in running:
            future.result()

    assert failed == []
    assert done["published"] >= 2 and done["pulled"] >= 2
    assert done["collected"] >= 2  # the old snapshots beyond the newest went
    assert pull(store, isolated / "last").snapshot_id == latest_ref(store).snapshot_id
