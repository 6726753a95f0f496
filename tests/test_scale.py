"""What keeps a large index fast and exact (issue #33): rows streamed to LanceDB a batch at
a time, scalar indexes on what filters read (kept right as rows change), the vector
index's probes growing with the table, and nearest lists from clusters above a size."""

from __future__ import annotations

import numpy as np
import pytest

from ghindex.errors import ConfigError
from ghindex.index import nearest
from ghindex.index import table as index
from ghindex.index.build import build
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

        def __getitem__(self, key):
            seen.append(consumed[0])
            return super().__getitem__(key)

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
    assert index.probes(1_000) == index.MIN_PROBES
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
