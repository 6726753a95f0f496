"""A publish checks what it publishes, and a switch checks what it switches to (#49,
family 4). A snapshot whose bytes verify can still hold nothing a reader can open: an
index folder that is a file, a chunks table that is a file or lacks a column, a state
database with a table dropped or written by a newer ghindex. `publish` refuses such a
workdir; `pull` and `serve --store`'s sync open the new copy read-only before the
switch, refuse it in one line, and keep the previous snapshot current."""

from __future__ import annotations

import importlib
import os
import shutil
import uuid
from pathlib import Path

import duckdb
import lancedb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.errors import SnapshotError, first_line
from ghindex.serve import SnapshotHolder
from ghindex.snapshot import Store, publish, pull
from ghindex.snapshot.local import live_root
from ghindex.snapshot.refs import latest_ref
from ghindex.vocabulary.tables import MIGRATION_LOG, TABLES
from testkit.state import built_workdir

EXAMPLES = int(os.environ.get("GHINDEX_EXAMPLES", "6"))


@pytest.fixture(scope="session")
def template(tmp_path_factory):
    """A workdir with a few issues, fetched state and a built index (embedded once)."""
    return built_workdir(tmp_path_factory.mktemp("switch-template") / "work", 4, repeat=5)


def _index_a_file(work: Path, _table: str) -> str:
    shutil.rmtree(work / "lance")
    (work / "lance").write_bytes(b"not a folder\n")
    return "lance is a file, not a folder"


def _chunks_a_file(work: Path, _table: str) -> str:
    shutil.rmtree(work / "lance" / "chunks.lance")
    (work / "lance" / "chunks.lance").write_bytes(b"not a table\n")
    return "lance/chunks.lance is a file, not a table"


def _column_dropped(work: Path, _table: str) -> str:
    lancedb.connect(work / "lance").open_table("chunks").drop_columns(["row_hash"])
    return "lance/chunks.lance is not a ghindex index (no model, or no column ['row_hash'])"


def _table_dropped(work: Path, table: str) -> str:
    with duckdb.connect(str(work / "state.duckdb")) as con:
        con.execute(f"DROP TABLE {table} CASCADE")
    return f"state.duckdb lacks the table {table}"


def _newer_state(work: Path, _table: str) -> str:
    with duckdb.connect(str(work / "state.duckdb")) as con:
        con.execute(f"INSERT INTO {MIGRATION_LOG} VALUES ('9999_from_the_future', now())")
    return "state.duckdb was written by a newer ghindex (migration 9999_from_the_future)"


DAMAGE = {
    f.__name__.strip("_"): f
    for f in (_index_a_file, _chunks_a_file, _column_dropped, _table_dropped, _newer_state)
}
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def damaged_copy(template: Path, where: Path, damage: str, table: str) -> tuple[Path, str]:
    work = where / f"work-{uuid.uuid4().hex[:8]}"
    shutil.copytree(template, work)
    return work, DAMAGE[damage](work, table)


def advice(damage: str, what: str) -> str:
    return ": upgrade ghindex" if damage == "newer_state" else what


@pytest.mark.slow
@SETTINGS
@given(damage=st.sampled_from(sorted(DAMAGE)), table=st.sampled_from(TABLES))
def test_publish_refuses_a_workdir_a_reader_could_not_open(template, isolated, run, damage, table):
    store = isolated / f"store-{uuid.uuid4().hex[:8]}"
    first = publish(template, Store(str(store)))
    work, reason = damaged_copy(template, isolated, damage, table)
    before = sorted(p.relative_to(store) for p in store.rglob("*"))

    result = run("--workdir", str(work), "publish", "--store", str(store))

    assert result.exit_code == 1
    if damage == "newer_state":  # the writer that folds its log in refuses it first
        assert result.stderr == f"Error: {work}/{reason}" + (": upgrade ghindex\n")
    else:
        assert result.stderr == (
            f"Error: nothing was published from {work}: {reason}: the workdir is damaged; "
            "`ghindex status` names it, `ghindex build --full` rebuilds the index and "
            "`ghindex fetch --full` the state\n"
        )
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before
    assert latest_ref(Store(str(store))).snapshot_id == first.snapshot_id


@pytest.mark.slow
@SETTINGS
@given(damage=st.sampled_from(sorted(DAMAGE)), table=st.sampled_from(TABLES))
def test_pull_and_sync_refuse_an_unreadable_snapshot_before_the_switch(
    template, isolated, monkeypatch, damage, table
):
    """The damaged snapshot is published as an older ghindex would have (unchecked)."""
    store = Store(str(isolated / f"store-{uuid.uuid4().hex[:8]}"))
    good = publish(template, store).snapshot_id
    dest, cache = isolated / f"dest-{uuid.uuid4().hex[:8]}", isolated / f"serve-{uuid.uuid4().hex}"
    pull(store, dest)
    holder = SnapshotHolder(store=store, cache=cache, interval=300)
    assert holder.sync_once() is True
    work, reason = damaged_copy(template, isolated, damage, table)
    with monkeypatch.context() as unchecked:
        publishing = importlib.import_module("ghindex.snapshot.publish")
        unchecked.setattr(publishing, "_check_usable", lambda *_: None, raising=False)
        unchecked.setattr(publishing, "_checkpoint", lambda *_: None)
        bad = publish(work, store).snapshot_id

    with pytest.raises(SnapshotError) as refused:
        pull(store, dest)
    swapped = holder.sync_once()

    if damage == "index_a_file":  # published without it: the pulled copy has no index
        reason = "lance/chunks.lance is missing though the manifest counts chunks"
    expected = (
        f"snapshot {bad} of {store.url} was not switched to, {{}} keeps its current one: "
        f"{reason}" + advice(damage, ": the store is damaged; publish again")
    )
    assert str(refused.value) == expected.format(dest)
    assert live_root(dest).name == good
    assert swapped is False
    assert holder.current.snapshot_id == good and live_root(cache).name == good
    assert holder.sync.last_error == first_line(SnapshotError(expected.format(cache)))
    assert sorted(p.name for p in (dest / "snapshots").iterdir()) == [good]
    holder.stop()
