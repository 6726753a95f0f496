"""Nearest items listed at build time (`index/nearest.py`): exact lists, the files a
snapshot carries (one per bucket, rewritten only when their lists change), `related`
answered from them without LanceDB, and what happens when they are missing, stale or not
what they claim to be."""

from __future__ import annotations

import itertools
import json
import subprocess
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.errors import SnapshotError
from ghindex.index import nearest
from ghindex.index.chunking import Chunk
from ghindex.index.documents import Document
from ghindex.query.snapshot import Snapshot
from ghindex.snapshot import Store, publish, pull
from ghindex.snapshot.local import live_root
from testkit.process import fresh_python
from testkit.state import settings_for, store_issues


def brute_force(means: np.ndarray, k: int) -> list[list[int]]:
    sims = means @ means.T
    out = []
    for row in range(len(means)):
        others = [j for j in range(len(means)) if j != row]
        others.sort(key=lambda j: (-sims[row, j], j))
        out.append(others[:k])
    return out


def test_lists_are_exact_across_blocks_and_never_hold_the_item_itself(monkeypatch):
    rng = np.random.default_rng(7)
    means = rng.standard_normal((53, 16)).astype(np.float32)
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    monkeypatch.setattr(nearest, "_BLOCK_CELLS", 53 * 5)  # blocks of 5 rows, the last of 3

    found, scores = nearest.neighbours(means, k=10)

    assert found.tolist() == brute_force(means, 10)
    assert all(row not in found[row] for row in range(53))
    assert np.all(np.diff(scores, axis=1) <= 0)
    expected = np.take_along_axis(means @ means.T, found, axis=1)
    assert np.allclose(scores, expected, atol=1e-6)


def test_few_items_give_short_lists_and_ties_go_to_the_earlier_item():
    same = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    found, _scores = nearest.neighbours(same, k=10)
    assert found.shape == (4, 3)
    assert found[0].tolist() == [1, 2, 3] and found[2].tolist() == [0, 1, 3]
    assert nearest.neighbours(same[:1], k=10)[0].shape == (1, 0)
    assert nearest.neighbours(np.zeros((0, 2), dtype=np.float32))[0].shape == (0, 0)


def test_a_vector_that_is_not_one_ranks_last_and_breaks_nothing():
    means = np.eye(5, dtype=np.float32)[:, :4]
    means[4] = np.nan  # e.g. a damaged cache brought by a snapshot
    found, scores = nearest.neighbours(means, k=4)
    assert found.shape == (5, 4) and found[0, -1] == 4 and scores[0, -1] == nearest.NOT_A_VECTOR
    assert all(row not in found[row] for row in range(5))


def document(handle, entity, title="", entity_type="issue"):
    return Document(
        handle=handle,
        entity=entity,
        entity_type=entity_type,
        repo="o/r",
        type="issue",
        number=None,
        title=title,
        body="",
        preamble="",
        state="open",
        labels=(),
        author=None,
        author_association=None,
        assignees=(),
        milestone=None,
        path=None,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        updated_at=None,
        url=f"https://github.com/{handle.replace('#', '/issues/')}",
    )


def chunk(doc, text):
    return Chunk(id=f"{doc.handle}:{text}", document=doc, index=0, text=text, content_hash=text)


def test_an_item_is_the_mean_of_its_chunks_and_shown_by_its_own_document():
    issue = document("o/r#1", "o/r#1", "The issue")
    comment = replace(document("o/r#1/comment/9", "o/r#1", "a comment"), type="issue_comment")
    other = document("o/r#2", "o/r#2", "Other")
    vectors = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0]), "c": np.array([3.0, 4.0])}
    chunks = [chunk(comment, "a"), chunk(other, "c"), chunk(issue, "b")]

    found = nearest.entities(chunks, vectors)

    assert found.handles == ["o/r#1", "o/r#2"]
    assert [h.title for h in found.heads] == ["The issue", "Other"]
    assert np.allclose(found.means, [[2**-0.5, 2**-0.5], [0.6, 0.8]])
    assert found.digests[0] != nearest.entities(chunks[:2], vectors).digests[0]  # lost a chunk
    lists, scores = nearest.neighbours(found.means)
    rows = nearest._table(found, lists, scores).to_pylist()
    assert rows[0] == {
        "entity": "o/r#1",
        "rank": 1,
        "neighbour": "o/r#2",
        "score": pytest.approx(0.98995, 1e-4),
        "type": "issue",
        "title": "Other",
        "url": "https://github.com/o/r/issues/2",
        "digest": found.digests[0],
    }


def random_build(rng, handles, dims=8):
    """Chunks of `handles` (one to three each, random vectors): chunks and vectors."""
    chunks, vectors = [], {}
    for handle in handles:
        for n in range(int(rng.integers(1, 4))):
            text = f"{handle}:{n}:{rng.integers(1 << 30)}"
            chunks.append(chunk(document(handle, handle, handle), text))
            vectors[text] = rng.standard_normal(dims).astype(np.float32)
    return chunks, vectors


def test_the_file_is_sorted_by_item_so_a_reader_opens_one_row_group(monkeypatch, tmp_path):
    monkeypatch.setattr(nearest, "ROW_GROUP", 40)
    chunks, vectors = random_build(np.random.default_rng(3), [f"o/r#{n}" for n in range(30)])

    assert nearest.write(tmp_path, nearest.entities(chunks, vectors), "model:fp32") == 30

    path = tmp_path / "nearest" / "0000.parquet"  # 30 items: one bucket
    assert sorted(p.name for p in (tmp_path / "nearest").iterdir()) == ["0000.parquet"]
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == 8  # 300 rows, 40 a group
    ranges = [
        (g.column(0).statistics.min, g.column(0).statistics.max)
        for g in (meta.row_group(i) for i in range(meta.num_row_groups))
    ]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))
    assert [n["handle"] for n in nearest.read(path, "o/r#7", 3)] == [
        ("o/r#" + str(j))
        for j in nearest.neighbours(nearest.entities(chunks, vectors).means, 3)[0][7]
    ]


def previous_of(built: nearest.Entities, lists: np.ndarray):
    return {
        h: (d, [built.handles[j] for j in row])
        for h, d, row in zip(built.handles, built.digests, lists.tolist(), strict=True)
    }


@pytest.mark.parametrize("seed", range(6))
def test_an_incremental_update_lists_exactly_what_a_whole_computation_does(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(nearest, "_BLOCK_CELLS", 400)  # several blocks even here
    handles = [f"o/r#{n}" for n in range(1, 81)]
    chunks, vectors = random_build(rng, handles)
    before = nearest.entities(chunks, vectors)
    lists, _scores = nearest.neighbours(before.means)
    # some items change, some leave, some arrive; the rest keep their chunks
    leaving = set(rng.choice(handles, 4, replace=False).tolist())
    changing = set(rng.choice(handles, 5, replace=False).tolist()) - leaving
    kept = [c for c in chunks if c.document.entity not in leaving | changing]
    more, more_vectors = random_build(rng, [*sorted(changing), "o/r#100", "o/r#101"])
    after = nearest.entities(kept + more, {**vectors, **more_vectors})

    found, scores = nearest.update(after, previous_of(before, lists))
    whole, whole_scores = nearest.neighbours(after.means)

    assert found.tolist() == whole.tolist()
    assert np.allclose(scores, whole_scores, atol=1e-6)


def test_nothing_changed_means_nothing_scored_again(monkeypatch):
    rng = np.random.default_rng(1)
    chunks, vectors = random_build(rng, [f"o/r#{n}" for n in range(1, 40)])
    built = nearest.entities(chunks, vectors)
    lists, scores = nearest.neighbours(built.means)
    scored = []
    monkeypatch.setattr(nearest, "neighbours", lambda *a, **k: scored.append(a) or (None, None))

    found, again = nearest.update(built, previous_of(built, lists))

    assert scored == [] and found.tolist() == lists.tolist()
    assert np.allclose(again, scores, atol=1e-6)


SUBJECTS = [
    "The connection pool times out when the server closes idle keep-alive sockets",
    "Backslashes in Windows file paths are not escaped in the generated config",
    "Memory keeps growing while the YAML parser reads very large documents",
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Twelve issues on three subjects: #1, #4, #7, #10 on the first, and so on."""
    from ghindex.index.build import build
    from testkit.github_server import issue_node

    path = tmp_path_factory.mktemp("nearest") / "work"
    settings = settings_for(path)
    store_issues(
        settings,
        [
            issue_node(
                n, title=f"Report {n}", body=f"{SUBJECTS[(n - 1) % 3]}. Seen in version {n}."
            )
            for n in range(1, 13)
        ],
    )
    build(settings)
    return path


@pytest.mark.slow
def test_a_build_lists_every_items_nearest_and_related_answers_from_the_list(workdir):
    manifest = json.loads((workdir / "manifest.json").read_text())
    assert manifest["nearest"] == {"dir": "lance/nearest", "buckets": 1, "k": 10, "entities": 12}
    snapshot = Snapshot(workdir)
    try:
        found = snapshot.related("octo/hello#4").nearest
        live = snapshot.searcher.nearest("octo/hello#4", 10)
    finally:
        snapshot.close()

    assert len(found) == 10 and "octo/hello#4" not in [n["handle"] for n in found]
    assert set(found[0]) == {"handle", "type", "title", "url", "score"}
    # the same subject first, as the index's own vector search has it
    same_subject = {"octo/hello#1", "octo/hello#7", "octo/hello#10"}
    assert {n["handle"] for n in found[:3]} == same_subject
    assert {n["handle"] for n in live[:3]} == same_subject


@pytest.mark.slow
def test_search_reads_the_same_lists_and_answers_without_them_when_they_are_damaged(
    workdir, tmp_path
):
    """Search lifts its best hit's nearest items from the lists `related` reads; a list
    file that is not one costs the lift (a one-line note), not the answer."""
    from ghindex.query.search import Searcher

    snapshot = Snapshot(workdir)
    try:
        listed = snapshot.related("octo/hello#4").nearest
        searched = snapshot.searcher.listed_near("octo/hello#4")
    finally:
        snapshot.close()
    assert [(h, round(s, 6)) for h, _t, s in searched] == [
        (n["handle"], n["score"]) for n in listed
    ]
    assert {t for _h, t, _s in searched} == {"issue"}

    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(workdir), str(copy)], check=True)
    (copy / "lance" / "nearest" / "0000.parquet").write_bytes(b"PAR1 but nothing else")
    huge = tmp_path / "huge.parquet"
    with huge.open("wb") as out:  # sparse: no disk is spent
        out.truncate(nearest.LIST_FILE_MOST + 1)
    with pytest.raises(SnapshotError, match="more than a list file ever holds"):
        nearest.lists(huge)
    damaged = Searcher(copy / "lance")
    plain = Searcher(copy / "lance", near_weight=0.0)
    try:
        answer = damaged.search("connection pool keep-alive sockets", k=5)
        without = plain.search("connection pool keep-alive sockets", k=5)
    finally:
        damaged.close()
        plain.close()
    assert [h.entity for h in answer.results] == [h.entity for h in without.results]
    (note,) = answer.notes
    assert note.startswith("ranked without the best hit's nearest items: ")
    assert "is not a nearest-items file ghindex can read" in note and "\n" not in note


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", None]),
            st.one_of(st.none(), st.integers(-5, 20)),
            st.sampled_from(["a", "b", "c", None]),
            st.one_of(st.none(), st.text(max_size=8)),
            st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
        ),
        max_size=30,
    )
)
def test_search_takes_from_a_list_file_only_real_neighbours(tmp_path_factory, rows):
    """A list file came with the snapshot: whatever its rows hold, search takes only
    neighbours other than the item, with a cosine in (0, 1], nearest first."""
    path = tmp_path_factory.mktemp("lists") / "0000.parquet"
    columns = ["entity", "rank", "neighbour", "type", "score"]
    types = [pa.string(), pa.int32(), pa.string(), pa.string(), pa.float32()]
    pq.write_table(
        pa.table(
            {
                c: pa.array([r[i] for r in rows], t)
                for i, (c, t) in enumerate(zip(columns, types, strict=True))
            }
        ),
        path,
    )
    found = nearest.lists(path)
    stored = pq.read_table(path).to_pylist()  # the values as the file holds them
    for entity in ["a", "b", "c", "x"]:
        valid = sorted(
            (r["rank"], r["neighbour"], r["type"] or "", r["score"])
            for r in stored
            if r["entity"] == entity
            and r["neighbour"] not in (None, entity)
            and r["rank"] is not None
            and r["score"] is not None
            and 0.0 < r["score"] <= 1.0 + 1e-6
        )
        assert found.of(entity) == [(n, t, c) for _r, n, t, c in valid]


@pytest.mark.slow
def test_related_needs_neither_lancedb_nor_the_model(workdir):
    script = (
        "import sys\n"
        "from ghindex.query.snapshot import Snapshot\n"
        "found = Snapshot(sys.argv[1]).related('octo/hello#4')\n"
        "print(len(found.nearest), 'lancedb' in sys.modules, 'onnxruntime' in sys.modules)\n"
    )
    assert fresh_python(script, str(workdir)).split() == ["10", "False", "False"]


@pytest.mark.slow
def test_a_snapshot_built_before_the_lists_is_answered_from_the_index(workdir, tmp_path):
    older = tmp_path / "older"
    subprocess.run(["cp", "-r", str(workdir), str(older)], check=True)
    manifest = json.loads((older / "manifest.json").read_text())
    del manifest["nearest"]  # an older ghindex wrote this manifest: the file, if any, is stale
    (older / "manifest.json").write_text(json.dumps(manifest))
    (older / "lance" / "nearest.parquet").write_bytes(b"left over")
    snapshot = Snapshot(older)
    try:
        found = snapshot.related("octo/hello#4").nearest
    finally:
        snapshot.close()
    assert {n["handle"] for n in found[:3]} == {"octo/hello#1", "octo/hello#7", "octo/hello#10"}


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["not parquet", "other columns"])
def test_a_nearest_file_that_is_not_one_is_refused_in_one_line(workdir, tmp_path, run, damage):
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(workdir), str(copy)], check=True)
    path = copy / "lance" / "nearest" / "0000.parquet"
    if damage == "not parquet":
        path.write_bytes(b"PAR1 but nothing else")
    else:
        pq.write_table(pa.table({"entity": ["octo/hello#4"], "payload": ["x"]}), path)

    with pytest.raises(SnapshotError, match="is not a nearest-items file ghindex can read"):
        Snapshot(copy).related("octo/hello#4")
    done = run("related", "octo/hello#4", "--snapshot", str(copy))
    assert done.exit_code == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"Error: {path} is not a nearest")


@pytest.mark.slow
def test_a_published_snapshot_carries_the_lists(workdir, tmp_path):
    store = Store(str(tmp_path / "store"))
    publish(workdir, store)
    pull(store, tmp_path / "pulled")
    snapshot = Snapshot(live_root(tmp_path / "pulled"))
    try:
        assert snapshot.manifest["nearest"]["entities"] == 12
        found = snapshot.related("octo/hello#4").nearest
    finally:
        snapshot.close()
    assert {n["handle"] for n in found[:3]} == {"octo/hello#1", "octo/hello#7", "octo/hello#10"}


def lists_of(path):
    rows = [r for f in files_of(path) for r in pq.read_table(f).to_pylist()]
    return {(r["entity"], r["rank"]): (r["neighbour"], round(r["score"], 4)) for r in rows}


def files_of(path):
    return sorted((path / "lance" / "nearest").glob("*.parquet"))


@pytest.mark.slow
def test_a_later_build_updates_the_lists_as_a_whole_build_would(workdir, tmp_path):
    from ghindex.index.build import build
    from testkit.github_server import issue_node

    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(workdir), str(copy)], check=True)
    settings = settings_for(copy)
    store_issues(
        settings,
        [
            issue_node(13, title="Report 13", body=f"{SUBJECTS[0]}. Seen again in version 13."),
            issue_node(5, title="Report 5", body=f"{SUBJECTS[0]}. Now about pools, not paths."),
        ],
    )

    assert build(settings).nearest == 13
    updated = lists_of(copy)
    build(settings, full=True)

    assert updated == lists_of(copy)
    first = {updated[("octo/hello#1", rank)][0] for rank in range(1, 6)}
    assert {"octo/hello#13", "octo/hello#5"} <= first


@pytest.mark.slow
def test_a_previous_file_that_is_not_one_is_recomputed_by_the_next_build(workdir, tmp_path):
    from ghindex.index.build import build

    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(workdir), str(copy)], check=True)
    expected = lists_of(copy)
    (copy / "lance" / "nearest" / "0000.parquet").write_bytes(b"PAR1 not really")

    assert build(settings_for(copy)).nearest == 12
    assert lists_of(copy) == expected


def test_lists_are_split_into_buckets_and_a_small_change_rewrites_few_of_them(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(nearest, "BUCKET_ENTITIES", 8)
    rng = np.random.default_rng(11)
    handles = [f"o/r#{n}" for n in range(1, 201)]
    chunks, vectors = random_build(rng, handles)
    lance = tmp_path / "lance"

    assert nearest.write(lance, nearest.entities(chunks, vectors), "m:fp32") == 200
    files = sorted((lance / "nearest").glob("*.parquet"))
    assert [f.name for f in files] == [f"{b:04d}.parquet" for b in range(32)]  # 200 / 8 -> 32
    before = {f.name: (f.read_bytes(), f.stat().st_mtime_ns) for f in files}
    # every entity's list is in its bucket's file, and nowhere else
    for path in files:
        bucket = int(path.stem)
        assert {nearest.bucket_of(e, 32) for e in pq.read_table(path)["entity"].to_pylist()} == {
            bucket
        }
    listed = nearest.reader(lance, nearest.manifest_entry(200))
    means = nearest.entities(chunks, vectors).means
    assert [n["handle"] for n in listed("o/r#17", 10)] == [
        handles[j] for j in brute_force(means, 10)[16]
    ]

    # one item gains a comment: the files of the lists that changed are rewritten, and
    # only those; the others keep their bytes
    lists_before = rows_in(lance)
    changed, more = random_build(rng, ["o/r#17"])
    changed = [replace(c, document=replace(c.document, handle="o/r#17/comment/1")) for c in changed]
    after = chunks + changed
    assert nearest.write(lance, nearest.entities(after, {**vectors, **more}), "m:fp32") == 200
    now = {f.name: (f.read_bytes(), f.stat().st_mtime_ns) for f in (lance / "nearest").glob("*")}
    assert set(now) == set(before)  # no temporary file left
    lists_after = rows_in(lance)
    moved = {e for e in lists_after if lists_after[e] != lists_before[e]}
    assert "o/r#17" in moved and len(moved) < 60
    rewritten = {name for name in now if now[name] != before[name]}
    assert rewritten == {f"{nearest.bucket_of(e, 32):04d}.parquet" for e in moved}
    assert len(rewritten) < 32

    whole = tmp_path / "whole"
    nearest.write(whole, nearest.entities(after, {**vectors, **more}), "m:fp32", reuse=False)
    assert neighbours_in(lance) == neighbours_in(whole)


def rows_in(lance):
    """Each entity's rows (rank, neighbour, score), from every file."""
    found = {}
    for path in sorted((lance / "nearest").glob("*")):
        for r in pq.read_table(path).to_pylist():
            found.setdefault(r["entity"], []).append((r["rank"], r["neighbour"], r["score"]))
    return found


def neighbours_in(lance):
    rows = [r for f in sorted((lance / "nearest").glob("*")) for r in pq.read_table(f).to_pylist()]
    return {(r["entity"], r["rank"]): r["neighbour"] for r in rows}


def test_the_single_file_of_an_older_ghindex_is_read_and_replaced_by_buckets(monkeypatch, tmp_path):
    rng = np.random.default_rng(5)
    chunks, vectors = random_build(rng, [f"o/r#{n}" for n in range(1, 31)])
    built = nearest.entities(chunks, vectors)
    lists, scores = nearest.neighbours(built.means)
    lance = tmp_path / "lance"
    lance.mkdir()
    old = nearest._table(built, lists, scores).replace_schema_metadata(
        {nearest.META_KEY: json.dumps({"format": 1, "k": 10, "basis": "m:fp32"}).encode()}
    )
    pq.write_table(old, lance / "nearest.parquet")
    entry = {"file": "lance/nearest.parquet", "k": 10, "entities": 30}

    found = nearest.reader(lance, entry)("o/r#3", 10)
    assert [n["handle"] for n in found] == [built.handles[j] for j in lists[2]]

    # the next build takes its lists as the previous ones (nothing scored again)
    scored = []
    monkeypatch.setattr(nearest, "neighbours", lambda *a, **k: scored.append(a) or (None, None))
    assert nearest.write(lance, nearest.entities(chunks, vectors), "m:fp32") == 30
    assert scored == []
    assert not (lance / "nearest.parquet").exists()
    assert nearest.reader(lance, nearest.manifest_entry(30))("o/r#3", 10) == found


def _valid_entry(value) -> bool:
    count = value.get("buckets")
    return (
        value.get("dir") == "lance/nearest"
        and type(count) is int
        and 1 <= count <= nearest.MAX_BUCKETS
        and count & (count - 1) == 0
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entry=st.one_of(
        _JSON,
        st.fixed_dictionaries(
            {"dir": st.sampled_from(["lance/nearest", "lance/../x", "/etc", 7]), "buckets": _JSON}
        ),
        st.fixed_dictionaries(
            {"dir": st.just("lance/nearest"), "buckets": st.integers(-3, 10_000)}
        ),
        st.fixed_dictionaries({"file": st.sampled_from(["lance/nearest.parquet", "../x", None])}),
    )
)
def test_a_manifest_entry_of_neither_layout_is_refused_in_one_line(tmp_path, entry):
    """The manifest's `nearest` came with the snapshot: any value is either read as one of
    the two layouts, or ignored (not an object), or refused in one line."""
    lance = tmp_path / "lance"
    if not isinstance(entry, dict):
        assert nearest.reader(lance, entry) is None
        return
    legacy = "buckets" not in entry and entry.get("file") == "lance/nearest.parquet"
    if legacy:
        assert nearest.reader(lance, entry) is None  # no such file here
    elif _valid_entry(entry):
        assert callable(nearest.reader(lance, entry))
    else:
        with pytest.raises(SnapshotError) as refused:
            nearest.reader(lance, entry)
        message = str(refused.value)
        assert "\n" not in message and len(message) < 240
        assert "nearest-items entry is not one ghindex reads" in message
