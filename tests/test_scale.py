"""What keeps a large index fast and exact (issue #33): rows streamed to LanceDB a batch at
a time, scalar indexes on what filters read (kept right as rows change), the vector
index's probes growing with the table, and nearest lists from clusters above a size."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.errors import ConfigError
from ghindex.index import nearest
from ghindex.index import table as index
from ghindex.index.build import build
from ghindex.query import search as search_module
from ghindex.query.filters import Filters
from ghindex.query.search import Searcher
from testkit.embedders import hash_factory
from testkit.github_server import issue_node
from testkit.state import settings_for, store_issues

LABELS = ("bug", "docs", "ci")


def _issues(count: int, closed: set[int]) -> list[dict]:
    return [
        issue_node(
            n,
            title=f"Issue {n} about topic {n % 5}",
            body=f"Details of issue {n}, which is about topic {n % 5}.",
            state="CLOSED" if n in closed else "OPEN",
            labels={
                "nodes": [
                    {"name": name, "color": "f00", "description": None}
                    for i, name in enumerate(LABELS)
                    if n % (i + 2) == 0
                ]
            },
        )
        for n in range(1, count + 1)
    ]


def _expected(count: int, closed: set[int], label: str, state: str) -> set[str]:
    wanted = LABELS.index(label) + 2
    return {
        f"octo/hello#{n}"
        for n in range(1, count + 1)
        if n % wanted == 0 and (n in closed) == (state == "closed")
    }


def _filtered(workdir, label: str, state: str) -> set[str]:
    searcher = Searcher(workdir / "lance")
    try:
        found, more = searcher.scan(filters=Filters(states=(state,), labels=(label,)), k=1000)
        assert not more
        hybrid = searcher.search("topic", filters=Filters(states=(state,), labels=(label,)), k=1000)
        assert {h.entity for h in hybrid.results} <= {h.entity for h in found.results}
        return {h.entity for h in found.results}
    finally:
        searcher.close()


def test_filters_read_scalar_indexes_that_stay_true_as_items_change(isolated, monkeypatch):
    monkeypatch.setattr(index, "SCALAR_INDEX_ROWS", 10)
    settings = settings_for(isolated / "work")
    closed = {n for n in range(1, 41) if n % 3 == 0}
    store_issues(settings, _issues(40, closed))
    build(settings, embedder_factory=hash_factory())

    table = index.connect(settings.lance_path).open_table(index.CHUNKS)
    indexed = {c for i in table.list_indices() for c in i.columns}
    assert set(index.SCALAR_INDEXES) <= indexed
    plan = (
        table.search()
        .where("state = 'open' AND array_has_any(labels, ['bug']) AND repo = 'octo/hello'")
        .explain_plan(True)
    )
    assert "ScalarIndexQuery" in plan and "state_idx" in plan and "labels_idx" in plan
    assert _filtered(settings.workdir, "bug", "open") == _expected(40, closed, "bug", "open")

    # rows written after the indexes were made are searched too, and no stale row is
    closed = (closed | {2, 4}) - {6}
    store_issues(settings, _issues(40, closed))
    build(settings, embedder_factory=hash_factory())
    for label in LABELS:
        for state in ("open", "closed"):
            assert _filtered(settings.workdir, label, state) == _expected(40, closed, label, state)


def test_a_small_table_has_no_scalar_index_to_keep(isolated):
    settings = settings_for(isolated / "work")
    store_issues(settings, _issues(5, set()))
    build(settings, embedder_factory=hash_factory())
    table = index.connect(settings.lance_path).open_table(index.CHUNKS)
    assert {i.index_type for i in table.list_indices()} == {"FTS"}


def test_rows_stream_in_batches_from_any_iterable(isolated, monkeypatch):
    """`write_chunks` takes a generator (no list of the whole table), converts it a batch
    at a time, and counts what it wrote."""
    from testkit.embedders import HashEmbedder

    monkeypatch.setattr(index, "WRITE_BATCH", 7)
    settings = settings_for(isolated / "work")
    store_issues(settings, _issues(30, set()))
    report = build(settings, embedder_factory=hash_factory())
    db = index.connect(settings.lance_path)
    table = db.open_table(index.CHUNKS)
    rows = table.to_arrow().sort_by("id")
    assert report.inserted == rows.num_rows == report.chunks > 7

    from ghindex.index.chunking import ChunkSettings, chunk_document
    from ghindex.index.documents import iter_documents
    from ghindex.state.database import open_state

    con = open_state(settings.state_path, read_only=True)
    try:
        chunks = [c for d in iter_documents(con) for c in chunk_document(d, ChunkSettings())]
    finally:
        con.close()
    embedder = HashEmbedder()
    made = embedder.encode([c.text for c in chunks])
    vectors = dict(zip([c.content_hash for c in chunks], made, strict=True))
    consumed, seen = [0], []

    def generated():
        for chunk in chunks:
            consumed[0] += 1
            yield chunk

    class Watched(dict):
        """The vectors, noting how much of the stream was consumed at each lookup."""

        def get(self, key, default=None):
            seen.append(consumed[0])
            return super().get(key, default)

    other = index.connect(isolated / "other")
    written = index.write_chunks(
        other, report.model, generated(), Watched(vectors), embedder.dimension
    )
    assert written == {"inserted": len(chunks), "updated": 0, "deleted": 0}
    # converted as it streams: the first batch's vectors were read after one batch (7
    # rows) was taken from the stream, not after the whole stream
    assert len(seen) == len(chunks) and seen[0] <= 7 < len(chunks) == seen[-1]
    again = other.open_table(index.CHUNKS).to_arrow().sort_by("id")
    assert again.column("row_hash").equals(rows.column("row_hash"))
    assert again.column("id").equals(rows.column("id"))


def test_probes_grow_with_the_table():
    assert index.probes(1_000) == index.partitions(1_000) == 1  # all of a small index
    assert index.probes(300_000) == index.MIN_PROBES < index.partitions(300_000)
    sizes = [50_000, 300_000, 1_000_000, 5_000_000]
    probed = [index.probes(n) for n in sizes]
    assert probed == sorted(probed) and probed[-1] > probed[0]
    # the share of the index a query reads never falls below PROBED_SHARE
    shares = [p / index.partitions(n) for p, n in zip(probed, sizes, strict=True)]
    assert min(shares) >= index.PROBED_SHARE


def _clustered_means(count: int, dimension: int, spread: float, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, count // 50), dimension))
    means = centres[rng.integers(0, len(centres), count)]
    means = means + spread * rng.normal(size=(count, dimension))
    return (means / np.linalg.norm(means, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("spread", [0.3, 0.6])
def test_lists_from_clusters_keep_most_of_the_exact_top_ten(monkeypatch, spread):
    monkeypatch.setattr(nearest, "EXACT_ENTITIES", 1_000)
    means = _clustered_means(6_000, 32, spread)
    means[17] = np.nan  # a vector that is not one is nobody's neighbour, as exactly

    found, scores = nearest.neighbours(means)
    exact, exact_scores = nearest._scored(means, np.arange(len(means)), np.arange(len(means)), 10)

    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact, strict=True)])
    assert recall >= 0.95
    assert all(row not in found[row] for row in range(len(means)))
    assert all(len(set(row)) == 10 for row in found)
    assert np.all(np.diff(scores, axis=1) <= 0)
    assert 17 not in found[np.arange(len(means)) != 17]
    # an approximate list is never better than exact, and its scores are true cosines
    assert np.all(scores[:, 0] <= exact_scores[:, 0] + 1e-6)
    ok = np.arange(len(means)) != 17
    true = np.einsum("ij,ikj->ik", means[ok], means[found[ok]])
    assert np.allclose(scores[ok], true, atol=1e-5)
    # the same entities give the same lists on every build
    assert np.array_equal(nearest.neighbours(means)[0], found)


def test_a_few_changed_entities_are_still_scored_exactly(monkeypatch):
    monkeypatch.setattr(nearest, "EXACT_ENTITIES", 1_000)
    means = _clustered_means(3_000, 16, 1.5)
    rows = np.arange(0, 3_000, 7)[:900]  # fewer than EXACT_ENTITIES rows: scored against all
    found, _ = nearest.neighbours(means, rows=rows)
    exact, _ = nearest._scored(means, rows, np.arange(3_000), 10)
    assert np.array_equal(found, exact)


def test_every_connection_shares_one_bounded_cache(isolated, monkeypatch):
    index._session.cache_clear()
    for name in ("a", "b", "c"):
        index.connect(isolated / name)
    assert index._session.cache_info().misses == 1  # one session for the process

    index._session.cache_clear()
    monkeypatch.setenv("GHINDEX_INDEX_CACHE_MB", "lots")
    try:
        with pytest.raises(ConfigError, match="GHINDEX_INDEX_CACHE_MB") as refused:
            index.connect(isolated / "c")
        assert "\n" not in str(refused.value)
    finally:
        index._session.cache_clear()


def _file_versions(table_dir) -> set[tuple[int, int]]:
    """The Lance file format of each data file: the footer's last 8 bytes are its major
    and minor version (little-endian u16s) and the magic `LANC`."""
    found = set()
    for path in (table_dir / "data").glob("*.lance"):
        tail = path.read_bytes()[-8:]
        assert tail[4:] == b"LANC", path
        found.add((int.from_bytes(tail[:2], "little"), int.from_bytes(tail[2:4], "little")))
    return found


def test_the_chunks_table_is_written_in_the_format_whose_rows_read_fast(isolated):
    # Lance numbers its 2.0 format (0, 3) in the footer; 2.1 and later are (2, minor).
    # Search reads its hits by row id: 2.0 does that from little metadata (bench/README)
    settings = settings_for(isolated / "work")
    store_issues(settings, _issues(12, set()))
    build(settings, embedder_factory=hash_factory())
    table_dir = settings.lance_path / f"{index.CHUNKS}.lance"
    assert index.CHUNKS_FORMAT == "2.0"
    assert _file_versions(table_dir) == {(0, 3)}

    store_issues(settings, _issues(20, {3}))  # rows added and changed: merged in place
    build(settings, embedder_factory=hash_factory())
    assert _file_versions(table_dir) == {(0, 3)}
    assert index.connect(settings.lance_path).open_table(index.CHUNKS).count_rows() == 20


def test_an_index_in_lancedbs_default_format_keeps_it_until_a_full_build(isolated, monkeypatch):
    # an index written before keeps its format (and serves); `build --full` rewrites it
    settings = settings_for(isolated / "work")
    store_issues(settings, _issues(12, set()))
    with monkeypatch.context() as patched:
        patched.setattr(index, "CHUNKS_FORMAT", "2.2")
        build(settings, embedder_factory=hash_factory())
    table_dir = settings.lance_path / f"{index.CHUNKS}.lance"
    assert _file_versions(table_dir) == {(2, 2)}

    store_issues(settings, _issues(20, {3}))
    build(settings, embedder_factory=hash_factory())
    assert _file_versions(table_dir) == {(2, 2)}

    build(settings, embedder_factory=hash_factory(), full=True)
    assert _file_versions(table_dir) == {(0, 3)}
    assert index.connect(settings.lance_path).open_table(index.CHUNKS).count_rows() == 20


def test_a_build_holds_few_documents_at_once_and_indexes_every_one(isolated, monkeypatch):
    """A build streams: the documents it reads (and their chunks' text) are let go as it
    goes, in each of its passes, so its memory is the batch's and the vectors', not every
    text of the state. The index it writes holds every chunk, each with its vector."""
    import gc
    import weakref

    from ghindex.index import build as building
    from ghindex.index import documents
    from testkit.embedders import HashEmbedder

    monkeypatch.setattr(index, "WRITE_BATCH", 16)
    settings = settings_for(isolated / "work")
    store_issues(settings, _issues(400, {3, 6, 9}))
    alive: weakref.WeakSet = weakref.WeakSet()
    most = [0]
    real = documents.iter_documents

    def watched(con, doc_settings=None):
        for count, doc in enumerate(real(con, doc_settings)):
            alive.add(doc)
            if count % 25 == 0:
                gc.collect()
                most[0] = max(most[0], len(alive))
            yield doc

    monkeypatch.setattr(building, "iter_documents", watched)
    embedder = HashEmbedder()
    report = build(settings, embedder_factory=hash_factory(embedder))

    assert report.documents == report.chunks == report.embedded == 400
    assert sum(embedder.calls) == 400  # each text embedded once
    assert 0 < most[0] <= 3 * 16, most[0]  # a write batch's worth, not 400
    table = index.connect(settings.lance_path).open_table(index.CHUNKS)
    rows = table.to_arrow().sort_by("id").to_pylist()
    assert len(rows) == 400
    made = embedder.encode([r["text"] for r in rows[:5]])
    assert np.allclose([r["vector"] for r in rows[:5]], made, atol=1e-6)
    # the nearest lists were gathered from the same stream
    assert report.nearest == 400


@pytest.fixture(scope="module")
def filtered_table(tmp_path_factory):
    """120 issues, their words repeated a different number of times (few BM25 ties),
    labels and states in a pattern, with the scalar indexes of a large table."""
    path = tmp_path_factory.mktemp("planned") / "work"
    settings = settings_for(path)
    nodes = _issues(120, {n for n in range(1, 121) if n % 3 == 0})
    for node in nodes:
        n = node["number"]
        node["body"] = " ".join(
            ["crash"] * (n % 7 + 1) + ["timeout"] * (n % 5) + ["proxy"] * (n % 4) + [f"w{n}"] * 3
        )
    store_issues(settings, nodes)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(index, "SCALAR_INDEX_ROWS", 10)
        build(settings, embedder_factory=hash_factory())
    return path


@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    filters=st.builds(
        Filters,
        states=st.lists(st.sampled_from(["open", "closed", "OPEN"]), max_size=2).map(tuple),
        labels=st.lists(st.sampled_from(LABELS), max_size=2).map(tuple),
        any_labels=st.lists(st.sampled_from(LABELS), max_size=2).map(tuple),
        not_labels=st.lists(st.sampled_from(LABELS), max_size=1).map(tuple),
        types=st.lists(st.sampled_from(["issue", "pull_request"]), max_size=1).map(tuple),
    ),
    query=st.sampled_from(["crash", "timeout proxy", "crash proxy timeout", "w7 crash"]),
    depth=st.integers(1, 60),
)
def test_bm25_narrowed_by_one_filter_finds_what_every_filter_first_finds(
    filtered_table, monkeypatch, filters, query, depth
):
    """With two filters or more on a large table, BM25 is narrowed by the most selective
    and the rest are tested on what it ranks: the same rows, with the same scores, as
    when every filter narrows it first, whether enough pass or it has to ask again."""
    monkeypatch.setattr(index, "SCALAR_INDEX_ROWS", 10)
    monkeypatch.setattr(search_module, "SPARSE_MARGIN", 1.0)  # asks again now and then
    searcher = Searcher(filtered_table / "lance")
    try:
        groups = filters.groups(searcher._spelled(filters))
        planned = searcher._sparse(query, groups, depth)
        whole = searcher._bm25(query, " AND ".join(groups) or None, depth)
    finally:
        searcher.close()

    def above(rows, score):  # the rows ranked above the last score kept: no tie at the cut
        return {r["_rowid"] for r in rows if round(r["_score"], 5) > score}

    scores = [round(r["_score"], 5) for r in whole]
    assert [round(r["_score"], 5) for r in planned] == scores
    if scores:
        assert above(planned, scores[-1]) == above(whole, scores[-1])
    assert all(set(r) >= {"handle", "entity", "type", "_rowid"} for r in planned)


def test_bm25_is_narrowed_by_the_filter_that_lets_fewest_rows_through(filtered_table, monkeypatch):
    monkeypatch.setattr(index, "SCALAR_INDEX_ROWS", 10)
    searcher = Searcher(filtered_table / "lance")
    asked = []
    real = searcher._bm25
    monkeypatch.setattr(searcher, "_bm25", lambda q, w, d: asked.append((w, d)) or real(q, w, d))
    try:
        filters = Filters(states=("open",), labels=("ci",))  # ci: one issue in four
        groups = filters.groups(searcher._spelled(filters))
        found = searcher._sparse("crash", groups, 5)
        assert asked == [(groups[1], math.ceil(5 / (80 / 120) * search_module.SPARSE_MARGIN))]
        assert len(found) == 5
        asked.clear()
        # every row labelled ci was ranked: what passes is all there is
        assert len(searcher._sparse("crash", groups, 25)) == 20  # 30 labelled, 10 closed
        assert [w for w, _d in asked] == [groups[1]]
        asked.clear()
        # too few pass among the rows asked for (bug: 60 rows, 40 open): asked again
        monkeypatch.setattr(search_module, "SPARSE_MARGIN", 0.5)
        filters = Filters(states=("open",), labels=("bug",))
        groups = filters.groups(searcher._spelled(filters))
        found = searcher._sparse("crash", groups, 35)
        assert asked == [(groups[1], 27), (" AND ".join(groups), 35)]
        assert len(found) == 35
    finally:
        searcher.close()


def test_the_rows_a_filter_lets_through_are_listed_once_and_the_last_used_kept(
    filtered_table, monkeypatch
):
    """The narrowed BM25 tests the other filters against their passing row ids in memory:
    each predicate is listed from the table once per searcher, the PASSING_SETS used last
    are kept, and a listed set is exactly the rows the predicate lets through."""
    monkeypatch.setattr(index, "SCALAR_INDEX_ROWS", 10)
    monkeypatch.setattr(search_module, "PASSING_SETS", 2)
    searcher = Searcher(filtered_table / "lance")
    listed = []
    real = searcher.table.search

    def counting(*args, **kwargs):
        if not args:  # a plain scan: how `_passing` lists a predicate's rows
            listed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(searcher.table, "search", counting)
    try:
        open_bug = Filters(states=("open",), labels=("bug",)).groups()
        for _ in range(3):
            searcher._sparse("crash", open_bug, 5)
        assert len(listed) == 1  # the state's rows, listed by the first search only
        assert list(searcher._passing_sets) == ["(state = 'open')"]
        for predicate in ["(state = 'open')", "(state = 'closed')", "(array_has(labels, 'ci'))"]:
            ids = searcher._passing(predicate)
            rows = real().where(predicate).select(["id"]).with_row_id(True).limit(None).to_arrow()
            assert ids.tolist() == sorted(rows["_rowid"].to_pylist())
        assert list(searcher._passing_sets) == ["(state = 'closed')", "(array_has(labels, 'ci'))"]
    finally:
        searcher.close()


@given(
    allowed=st.lists(st.integers(0, 2**40), unique=True, max_size=50),
    ids=st.lists(st.integers(0, 2**40), unique=True, max_size=50),
)
def test_a_ranked_row_passes_when_its_id_is_among_the_listed(allowed, ids):
    ids += allowed[::2]  # some of each
    ids = list(dict.fromkeys(ids))
    found = search_module._among(
        np.array(ids, dtype=np.uint64), np.array(sorted(allowed), dtype=np.uint64)
    )
    assert found.tolist() == [i in set(allowed) for i in ids]
