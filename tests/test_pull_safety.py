"""A pull survives being killed at any step, concurrent pulls, a working directory
inside the destination, and a destination that is not ours; publish refuses what a
snapshot never holds. Real `ghindex pull` processes, killed with SIGKILL at each step
(GHINDEX_FAULT_KILL_AT), real DuckDB and LanceDB files."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import lancedb
import pytest

from ghindex.errors import SnapshotError
from ghindex.index.build import build
from ghindex.snapshot import Store, publish, pull
from ghindex.snapshot.layout import MANIFEST, Manifest
from ghindex.snapshot.local import live_root
from testkit.github_server import issue_node
from testkit.state import settings_for, store_issues

pytestmark = pytest.mark.slow  # built snapshots, and `ghindex pull` processes killed at each step


@pytest.fixture(scope="session")
def two_snapshots(tmp_path_factory):
    """A store holding an old snapshot (5 issues) and a newer one (6, one edited), and a
    flat workdir holding the old build."""
    base = tmp_path_factory.mktemp("two")
    work = base / "work"
    settings = settings_for(work)
    store_issues(
        settings, [issue_node(n, title=f"Issue {n}", body="words " * 40) for n in range(1, 6)]
    )
    build(settings)
    store = Store(str(base / "store"))
    old = publish(work, store).snapshot_id
    flat = base / "flat"
    shutil.copytree(work, flat)
    store_issues(
        settings,
        [
            issue_node(2, title="Issue 2, edited", body="other words"),
            issue_node(6, title="Issue 6", body="new words " * 30),
        ],
    )
    build(settings)
    new = publish(work, store).snapshot_id
    pulled = base / "pulled"
    pull(store, pulled, snapshot_id=old)
    return {
        "store": base / "store",
        "old": old,
        "new": new,
        "flat": flat,
        "pulled": pulled,
        "counts": {old: 5, new: 6},
    }


def readable(dest: Path, counts: dict[str, int]) -> str:
    """The snapshot `dest` holds, checked whole: every file against its manifest (or the
    flat build), the state through the fixed link, the index. Returns its id."""
    root = live_root(dest)
    body = json.loads((root / MANIFEST).read_text())
    snapshot_id = body.get("snapshot_id")
    if "files" in body:
        manifest = Manifest.from_bytes((root / MANIFEST).read_bytes(), str(root))
        for entry in manifest.files:
            digest = hashlib.sha256((root / entry.path).read_bytes()).hexdigest()
            assert digest == entry.sha256, entry.path
    con = duckdb.connect(str(root / "state.duckdb"), read_only=True)
    try:
        issues = con.execute("SELECT count(*) FROM issues").fetchone()[0]
    finally:
        con.close()
    assert lancedb.connect(str(root / "lance")).open_table("chunks").count_rows() > 0
    if snapshot_id is not None:
        assert issues == counts[snapshot_id]
    else:
        assert issues == 5  # the flat workdir's own build
    return snapshot_id or "flat"


def ghindex(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run(
        [sys.executable, "-m", "ghindex", *args],
        env={**os.environ, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def steps_of_a_pull(two, start: Path, tmp: Path) -> list[str]:
    dest = tmp / "traced"
    shutil.copytree(start, dest, symlinks=True)
    trace = tmp / "trace.txt"
    done = ghindex(
        "pull",
        "--store",
        str(two["store"]),
        "--dest",
        str(dest),
        env={"GHINDEX_FAULT_TRACE": str(trace)},
    )
    assert done.returncode == 0, done.stderr
    return trace.read_text().splitlines()


@pytest.mark.parametrize("start", ["pulled", "flat"])
def test_a_pull_killed_at_any_step_leaves_a_readable_snapshot(two_snapshots, start, isolated):
    two = two_snapshots
    steps = steps_of_a_pull(two, two[start], isolated)
    labels = [line.split(" ", 1)[1] for line in steps]
    assert labels[0] == "staging made" and "switched" in labels
    if start == "flat":  # the workdir's own files become a retired version, then links
        assert {"retired state.duckdb", "linked lance", "linked manifest.json"} <= set(labels)
    seen = set()
    for number in range(1, len(steps) + 1):
        dest = isolated / f"killed-{number}"
        shutil.copytree(two[start], dest, symlinks=True)

        killed = ghindex(
            "pull",
            "--store",
            str(two["store"]),
            "--dest",
            str(dest),
            env={"GHINDEX_FAULT_KILL_AT": str(number)},
        )

        assert killed.returncode == -signal.SIGKILL, (steps[number - 1], killed.stderr)
        seen.add(readable(dest, two["counts"]))  # old or new, whole
        again = pull(Store(str(two["store"])), dest)
        assert again.snapshot_id == two["new"]
        assert readable(dest, two["counts"]) == two["new"]
        assert not [p for p in (dest / "snapshots").iterdir() if p.name.startswith(".")]
        assert os.readlink(dest / "state.duckdb") == "current/state.duckdb"
        shutil.rmtree(dest)
    assert seen == {"flat" if start == "flat" else two["old"], two["new"]}


@pytest.mark.parametrize("count", [2, 4])
def test_concurrent_pulls_into_one_destination_take_turns(two_snapshots, count, isolated):
    two = two_snapshots
    dest = isolated / "shared"
    shutil.copytree(two["pulled"], dest, symlinks=True)
    results = [None] * count

    def one(index):
        results[index] = ghindex("pull", "--store", str(two["store"]), "--dest", str(dest))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [r.returncode for r in results] == [0] * count, [r.stderr for r in results]
    said = [r.stdout for r in results]
    assert sum("downloaded" in s for s in said) == 1  # one did the work ...
    assert sum("already up to date" in s for s in said) == count - 1  # ... the rest found it
    assert readable(dest, two["counts"]) == two["new"]


def test_a_waiting_pull_says_what_it_waits_for(two_snapshots, isolated):
    two = two_snapshots
    from ghindex.snapshot.local import locked

    dest = isolated / "held"
    shutil.copytree(two["pulled"], dest, symlinks=True)
    with locked(dest, "update"):
        waiting = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ghindex",
                "pull",
                "--store",
                str(two["store"]),
                "--dest",
                str(dest),
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = waiting.stderr.readline()
        assert waiting.poll() is None  # still waiting while the lock is held
    waiting.communicate(timeout=120)
    assert first == f"waiting for ghindex update (pid {os.getpid()}) to finish with {dest}\n"
    assert waiting.returncode == 0
    assert readable(dest, two["counts"]) == two["new"]


def test_a_pull_never_removes_the_directory_it_stands_in(two_snapshots, isolated, monkeypatch):
    two = two_snapshots
    dest = isolated / "here"
    shutil.copytree(two["pulled"], dest, symlinks=True)
    old_version = live_root(dest)
    monkeypatch.chdir(old_version)

    pull(Store(str(two["store"])), dest)
    pull(Store(str(two["store"])), dest, snapshot_id=two["old"])  # and back: a third version
    pull(Store(str(two["store"])), dest)

    assert Path.cwd() == old_version and old_version.is_dir()  # kept while we stand in it
    assert readable(dest, two["counts"]) == two["new"]


def test_a_destination_holding_other_things_is_refused(two_snapshots, isolated, run):
    project = isolated / "project"
    project.mkdir()
    (project / "README.md").write_text("my notes")
    before = sorted(p.name for p in project.iterdir())

    result = run("pull", "--store", str(two_snapshots["store"]), "--dest", str(project))

    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {project} holds other files (README.md…) and no snapshot: pull into an "
        "empty or new directory\n"
    )
    assert sorted(p.name for p in project.iterdir()) == before


def test_files_beside_the_snapshot_stay_where_they_are(two_snapshots, isolated):
    two = two_snapshots
    dest = isolated / "kept"
    shutil.copytree(two["flat"], dest)
    (dest / "demo").mkdir()
    (dest / "demo" / "notes.txt").write_text("kept")
    (dest / "ghindex.toml").write_text("# mine")

    pull(Store(str(two["store"])), dest)
    pull(Store(str(two["store"])), dest, snapshot_id=two["old"])

    assert (dest / "demo" / "notes.txt").read_text() == "kept"
    assert (dest / "ghindex.toml").read_text() == "# mine"
    assert readable(dest, two["counts"]) == two["old"]


def test_publish_refuses_links_and_strays_in_the_index(two_snapshots, isolated):
    store = Store(str(isolated / "store"))
    work = isolated / "work"
    shutil.copytree(two_snapshots["flat"], work)
    secret = isolated / "secret.txt"
    secret.write_text("not for the bucket")
    data = next((work / "lance").glob("chunks.lance/data"))
    (data / "evil.lance").symlink_to(secret)

    with pytest.raises(SnapshotError) as linked:
        publish(work, store)
    (data / "evil.lance").unlink()
    (work / "lance" / ".DS_Store").write_text("x")
    with pytest.raises(SnapshotError) as stray:
        publish(work, store)

    assert str(linked.value) == f"{data / 'evil.lance'} is a symlink: a snapshot holds no links"
    assert str(stray.value) == (
        f"{work / 'lance' / '.DS_Store'} is not part of a snapshot (names are letters, digits, "
        "'_.=-', not starting with a dot): remove it and build again"
    )
    assert store.list("") == []  # nothing was uploaded


def test_update_works_from_inside_its_own_workdir(github, isolated, monkeypatch, run):
    github.add_repo("octo/hello", issues=[issue_node(1, title="One")])
    store = str(isolated / "store")
    assert run("update", "--repo", "octo/hello", "--store", store).exit_code == 0
    work = isolated / "work"
    monkeypatch.delenv("GHINDEX_WORKDIR")
    github.repos["octo/hello"]["issues"][0].update(
        title="One, edited", updatedAt="2030-01-01T00:00:00Z"
    )
    for where in (work, work / "snapshots"):
        monkeypatch.chdir(where)
        relative = os.path.relpath(work, where)

        result = run(
            "--workdir", relative, "update", "--repo", "octo/hello", "--store", store, "--json"
        )

        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["pulled"]["dest"] == str(work)
    assert report["published"]["generation"] == 3
    con = duckdb.connect(str(work / "state.duckdb"), read_only=True)
    assert con.execute("SELECT title FROM issues").fetchall() == [("One, edited",)]
    con.close()


@pytest.mark.parametrize("craft", ["escape", "oversized-blob"])
def test_a_hostile_snapshot_on_s3_is_refused_too(two_snapshots, craft, s3_store_url, isolated):
    from ghindex.snapshot.layout import PIECE_SIZE, blob_path, manifest_path, new_snapshot_id
    from ghindex.snapshot.refs import latest_ref

    store = Store(s3_store_url)
    publish(two_snapshots["flat"], store)
    dest = isolated / "dest"
    good = pull(store, dest)
    canary = isolated / "canary.txt"
    canary.write_text("untouched")
    old = json.loads((live_root(dest) / MANIFEST).read_text())
    piece = os.urandom(PIECE_SIZE)
    digest = hashlib.sha256(piece).hexdigest()
    if craft == "escape":
        path, expected = "../canary.txt", "names a file outside the snapshot: '../canary.txt'"
        store.put(blob_path(digest), piece)
    else:
        path, expected = "lance/big.bin", f"{blob_path(digest)} in {s3_store_url}"
        store.put(blob_path(digest), piece * 12)  # 3 MiB where one 256 KiB piece is declared
    entry = {
        "path": path,
        "size": PIECE_SIZE,
        "sha256": digest,
        "pieces": [{"sha256": digest, "size": PIECE_SIZE}],
    }
    snapshot_id = new_snapshot_id()
    body = json.dumps({**old, "snapshot_id": snapshot_id, "files": [*old["files"], entry]})
    store.put(manifest_path(snapshot_id), body.encode())
    pointer = {
        "generation": 2,
        "snapshot_id": snapshot_id,
        "created_at": "2026-12-01T00:00:00",
        "manifest_sha256": hashlib.sha256(body.encode()).hexdigest(),
    }
    store.put("refs/latest/000000000002.json", json.dumps(pointer).encode())
    assert latest_ref(store).snapshot_id == snapshot_id

    with pytest.raises(SnapshotError) as refused:
        pull(store, dest)

    assert expected in str(refused.value) and "\n" not in str(refused.value)
    if craft == "oversized-blob":
        assert str(refused.value).endswith(
            "is larger than the 262,144 bytes it may be: the store is damaged"
        )
    assert canary.read_text() == "untouched"
    assert readable(dest, {good.snapshot_id: 5}) == good.snapshot_id
