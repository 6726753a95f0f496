"""Damaged files are named, not crashed on: a truncated or overwritten state database,
an index table that cannot be opened and a flipped bit in a pulled snapshot, each met by
the real CLI with one line that says which file and what to do (issue #30)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.snapshot import Store, publish, pull
from ghindex.snapshot.local import live_root
from testkit.state import built_workdir

STATE_DAMAGED = (
    "Error: state.duckdb is damaged ({}): restore it with `ghindex pull`, or move it away "
    "and rebuild it with `ghindex fetch --full`\n"
)
DOORS = [
    ("status",),
    ("search", "topic 3", "--mode", "sparse"),
    ("show", "octo/hello#1"),
    ("sql", "SELECT count(*) FROM issues"),
]
NEVER = ("Error: unexpected", "Traceback", ".rs:", "IOException", "IO Error")
EXAMPLES = settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def pulled(tmp_path_factory) -> Path:
    """A pulled snapshot's version directory: six issues, built, published to a local
    store and pulled back (so its manifest lists every file)."""
    base = tmp_path_factory.mktemp("damage")
    work = built_workdir(base / "work", 6, repeat=2)
    publish(work, Store(str(base / "store")))
    pull(Store(str(base / "store")), base / "pulled")
    return live_root(base / "pulled")


def copy_of(pulled: Path, where: Path) -> Path:
    if where.exists():
        shutil.rmtree(where)
    shutil.copytree(pulled, where)
    return where


def one_clear_line(result, expected: str | None = None) -> None:
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not any(word in result.stderr for word in NEVER), result.stderr
    if expected is not None:
        assert result.stderr == expected


def flip_a_bit(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


def lance_data_file(root: Path) -> Path:
    return next((root / "lance" / "chunks.lance" / "data").glob("*.lance"))


def test_status_opens_what_it_reports(pulled, run, isolated):
    snap = copy_of(pulled, isolated / "snap")

    result = run("status", "--snapshot", str(snap))
    document = json.loads(run("status", "--snapshot", str(snap), "--json").stdout)

    assert result.exit_code == 0, result.output
    assert "checked   state opens, index opens (6 rows)\n" in result.stdout
    assert document["checked"] == {"state": "ok", "index": "ok", "index_rows": 6}


@pytest.mark.parametrize(
    ("damage", "cause"),
    [
        (lambda data: b"", "not a DuckDB database file"),
        (lambda data: data[:100], "truncated"),
        (lambda data: data[: len(data) // 2], "truncated"),
        (lambda data: data[:8] + b"NOPE" + data[12:], "not a DuckDB database file"),
        (lambda data: data[:8192] + b"\xff" * 100 + data[8292:], "a block fails its checksum"),
    ],
    ids=["emptied", "cut-at-100", "cut-in-half", "magic-overwritten", "header-overwritten"],
)
@pytest.mark.parametrize("door", DOORS, ids=lambda door: door[0])
def test_a_damaged_state_is_one_line_at_every_door(pulled, run, isolated, damage, cause, door):
    snap = copy_of(pulled, isolated / "snap")
    state = snap / "state.duckdb"
    state.write_bytes(damage(state.read_bytes()))

    result = run(*door, "--snapshot", str(snap))

    one_clear_line(result, STATE_DAMAGED.format(cause))


@EXAMPLES
@given(share=st.floats(min_value=0.0, max_value=0.5))
def test_a_truncated_state_is_named_by_status(pulled, run, isolated, share):
    snap = copy_of(pulled, isolated / "snap")
    state = snap / "state.duckdb"
    data = state.read_bytes()
    state.write_bytes(data[: int(len(data) * share)])

    result = run("status", "--snapshot", str(snap))

    assert result.exit_code == 1
    assert result.stderr in {
        STATE_DAMAGED.format(c) for c in ("truncated", "not a DuckDB database file")
    }


@EXAMPLES
@given(at=st.integers(min_value=0, max_value=3_000_000), length=st.integers(1, 65_536))
def test_overwritten_bytes_in_the_state_never_crash_status(pulled, run, isolated, at, length):
    """Overwritten bytes status's queries read are named; ones in blocks no query of
    status reads (row data, free blocks) leave it answering: either way, no crash."""
    snap = copy_of(pulled, isolated / "snap")
    state = snap / "state.duckdb"
    data = bytearray(state.read_bytes())
    at %= len(data)
    data[at : at + length] = b"\xa5" * len(data[at : at + length])
    state.write_bytes(bytes(data))

    result = run("status", "--snapshot", str(snap))

    if result.exit_code == 0:
        assert result.stdout.startswith("snapshot  ") and result.stderr == ""
    else:
        one_clear_line(result)
        assert result.stderr.startswith("Error: state.duckdb is damaged ("), result.stderr


def test_an_index_table_that_cannot_be_opened_is_named_by_status(pulled, run, isolated):
    snap = copy_of(pulled, isolated / "snap")
    manifest = next((snap / "lance" / "chunks.lance" / "_versions").glob("*.manifest"))
    manifest.write_bytes(manifest.read_bytes()[:100])

    result = run("status", "--snapshot", str(snap))

    one_clear_line(
        result,
        "Error: lance/chunks.lance is damaged (file size is too small): restore it with "
        "`ghindex pull`, or rebuild it with `ghindex build --full`\n",
    )


def test_verify_names_a_flipped_bit_in_an_index_file(pulled, run, isolated):
    snap = copy_of(pulled, isolated / "snap")
    data_file = lance_data_file(snap)
    flip_a_bit(data_file, data_file.stat().st_size // 3)
    path = data_file.relative_to(snap).as_posix()
    snapshot_id = json.loads((snap / "manifest.json").read_text())["snapshot_id"]

    unverified = run("status", "--snapshot", str(snap))  # opening it cannot tell
    result = run("status", "--snapshot", str(snap), "--verify")
    document = json.loads(run("status", "--snapshot", str(snap), "--verify", "--json").stdout)

    assert unverified.exit_code == 0, unverified.output
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{path}: sha256 ") and ", the manifest says " in lines[0]
    assert lines[1:] == [
        f"1 of {document['files']} files of {snapshot_id} differ from its manifest: "
        "restore them with `ghindex pull`"
    ]
    assert [(d["path"], d["problem"]) for d in document["differ"]] == [(path, "sha256")]
    assert (document["verified"], document["snapshot_id"]) == (True, snapshot_id)


def test_verify_names_a_cut_state_and_passes_a_whole_snapshot(pulled, run, isolated):
    snap = copy_of(pulled, isolated / "snap")
    whole = run("status", "--snapshot", str(snap), "--verify")
    state = snap / "state.duckdb"
    size = state.stat().st_size
    state.write_bytes(state.read_bytes()[:1000])

    cut = run("status", "--snapshot", str(snap), "--verify")

    assert whole.exit_code == 0, whole.output
    assert whole.stdout.startswith("all ") and whole.stdout.endswith(" match its manifest\n")
    assert cut.exit_code == 1
    assert cut.stdout.splitlines()[0] == f"state.duckdb: 1,000 bytes, the manifest says {size:,}"


def test_verify_of_a_workdir_never_pulled_says_there_is_nothing_to_compare(pulled, run, isolated):
    work = pulled.parents[2] / "work"

    result = run("status", "--snapshot", str(work), "--verify")
    document = json.loads(run("status", "--snapshot", str(work), "--verify", "--json").stdout)

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"{work}: manifest.json lists no files (a build of this workdir, never pulled): "
        "nothing to verify against\n"
    )
    assert (document["verified"], document["differ"]) == (False, [])


def test_verify_reads_local_files_only(run, isolated):
    result = run("status", "--store", str(isolated / "store"), "--verify")
    assert result.exit_code == 2
    assert "--verify reads a local snapshot: give --snapshot DIR" in result.stderr


def test_pull_verify_brings_back_a_file_changed_on_disk(pulled, run, isolated):
    """A flipped bit that keeps the file's size and time passes a plain pull (it trusts
    them); `pull --verify` hashes, and assembles that file again from the store."""
    base = pulled.parents[2]
    dest = isolated / "dest"
    store = str(base / "store")
    assert run("pull", "--store", store, "--dest", str(dest)).exit_code == 0
    data_file = lance_data_file(live_root(dest))
    times = data_file.stat()
    flip_a_bit(data_file, times.st_size // 2)
    os.utime(data_file, ns=(times.st_atime_ns, times.st_mtime_ns))
    path = data_file.relative_to(live_root(dest)).as_posix()

    trusted = run("pull", "--store", store, "--dest", str(dest), "--json")
    checked = run("pull", "--store", store, "--dest", str(dest), "--verify", "--json")
    again = run("pull", "--store", store, "--dest", str(dest), "--verify", "--json")

    assert json.loads(trusted.stdout)["unchanged"] is True
    report = json.loads(checked.stdout)
    assert (report["unchanged"], report["repaired"]) == (False, [path])
    assert report["bytes_downloaded"] < report["bytes"]  # the rest came from disk
    assert run("status", "--snapshot", str(dest), "--verify").exit_code == 0
    assert (json.loads(again.stdout)["unchanged"], json.loads(again.stdout)["repaired"]) == (
        True,
        [],
    )


# Every door that reads, with what each reaches: rows of every table, the index's
# vectors, its full-text index and its rows.
READING_DOORS = [
    ("search", "topic 3", "--mode", "sparse"),
    ("search",),
    ("show", "octo/hello#1"),
    ("related", "octo/hello#1"),
    ("sql", "SELECT count(*), max(length(body)) FROM issues"),
    ("sql", "SELECT count(*), max(length(body)) FROM comments"),
]


def _damaged_files(root: Path) -> list[Path]:
    return sorted(p for p in [root / "state.duckdb", *(root / "lance").rglob("*")] if p.is_file())


@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pick=st.integers(min_value=0),
    at=st.floats(min_value=0.0, max_value=1.0),
    length=st.integers(1, 4096),
)
def test_damage_met_by_a_read_is_one_line_at_every_door(pulled, run, isolated, pick, at, length):
    """Overwritten bytes anywhere in the state or the index, found only when a read
    reaches them (row data, a vector block, the full-text index): every reading door
    answers, or says in one line which file is damaged; never the library's words."""
    snap = copy_of(pulled, isolated / "snap")
    files = _damaged_files(snap)
    target = files[pick % len(files)]
    data = bytearray(target.read_bytes())
    start = int(at * max(len(data) - 1, 0))
    data[start : start + length] = b"\xa5" * len(data[start : start + length])
    target.write_bytes(bytes(data))

    for door in READING_DOORS:
        result = run(*door, "--snapshot", str(snap))
        if result.exit_code != 0:
            one_clear_line(result)
            named = " is damaged (" in result.stderr or "file ghindex can read" in result.stderr
            assert named, (door, target.name, result.stderr)


@EXAMPLES
@given(
    body=st.one_of(
        st.binary(max_size=40),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda inner: st.lists(inner, max_size=3),
            max_leaves=6,
        ).map(lambda value: json.dumps(value).encode()),
    )
)
@pytest.mark.parametrize("door", DOORS, ids=lambda door: door[0])
def test_a_manifest_that_is_no_json_object_is_one_line_at_every_door(
    pulled, run, isolated, door, body
):
    """One reader of local manifests (vocabulary/layout.local_manifest): bytes that are not
    JSON, and JSON that is not an object, are named the same way by every door that reads
    the manifest (status always does); a door that does not need it answers from the
    files it reads."""
    snap = copy_of(pulled, isolated / "bad-manifest")
    (snap / "manifest.json").write_bytes(body)
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return  # an object is a manifest's shape: its fields are checked elsewhere
    result = run(door[0], *door[1:], "--snapshot", str(snap))
    if door[0] == "status" or result.exit_code != 0:
        one_clear_line(result)
        assert "manifest.json is not" in result.stderr, result.stderr
