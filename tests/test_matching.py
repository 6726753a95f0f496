"""What a person types is matched as they mean it (issue #31): labels and states in any
case through every door (the CLI, a real MCP client session, the Python API), a hint
when SQL compares a state with a lower-case value, SQL errors that point into the
statement as written, `show` of a bare number and of a comment that does not exist,
and `show`'s text without `:?` or `none`."""

from __future__ import annotations

import json
import shutil
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ghindex.api as gh
from ghindex.errors import GhindexError
from ghindex.index.build import build
from ghindex.query.filters import Filters, fold
from ghindex.serve import SnapshotHolder, create_server, open_snapshot
from ghindex.state import items
from ghindex.state.database import open_state, transaction
from testkit.github_server import (
    as_response,
    comment_node,
    issue_node,
    pull_request_node,
    review_comment_node,
    thread_node,
)
from testkit.mcp_calls import answer, failure
from testkit.state import settings_for, store_issues

R = "octo/hello"
# label -> the items carrying it in any spelling (octo/hello#1 'Bug', octo/other#1 'bug')
LABELS = {
    "Bug": {"octo/hello#1", "octo/other#1"},
    "Straße": {"octo/hello#2"},
    "won't fix": {"octo/hello#2"},
    "Ünïcode": {"octo/hello#3"},
    "help wanted": {"octo/hello#3"},
}
STATES = {
    "open": {"octo/hello#2", "octo/hello#3", "octo/hello#4", "octo/other#1"},
    "closed": {"octo/hello#1"},
    "merged": {"octo/hello#5"},
}


def labelled(*names):
    return {"nodes": [{"name": n, "color": "ededed", "description": None} for n in names]}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Four issues and a merged pull request in octo/hello, one issue in octo/other."""
    config = settings_for(tmp_path_factory.mktemp("matching") / "work")
    crash = issue_node(
        1,
        title="Crash on startup",
        body="The app crashes on startup.",
        labels=labelled("Bug"),
        state="CLOSED",
        closedAt="2015-01-05T00:00:00Z",
        comments=[comment_node(11, body="Same here.", authorAssociation="NONE")],
    )
    street = issue_node(
        2,
        title="Street names break the parser",
        body="Straße",
        labels=labelled("Straße", "won't fix"),
    )
    accents = issue_node(
        3, title="Accents in labels", body="Unicode", labels=labelled("Ünïcode", "help wanted")
    )
    plain = issue_node(4, title="Nothing to see", body="No labels here.")
    store_issues(config, [crash, street, accents, plain])
    store_issues(
        config,
        [issue_node(1, repo="octo/other", title="Widget crash", labels=labelled("bug"))],
        repo="octo/other",
    )
    fix = pull_request_node(
        5,
        title="Fix the crash on startup",
        body="Fixes the crash.",
        state="MERGED",
        merged=True,
        mergedAt="2015-01-05T00:00:00Z",
        comments=[comment_node(41, body="Thanks!", authorAssociation="NONE")],
        reviewThreads=[
            thread_node(
                "t1",
                [review_comment_node(31, body="On the whole change.", path=None, line=None)],
                path=None,
            ),
            thread_node(
                "t2",
                [review_comment_node(32, body="This line went.", line=None, originalLine=None)],
            ),
        ],
    )
    con = open_state(config.state_path)
    try:
        with transaction(con):
            items.save_pull_requests(con, R, as_response([fix]))
    finally:
        con.close()
    build(config)
    return config.workdir


@pytest.fixture(scope="module")
def reader(workdir, tmp_path_factory):
    """The Python API on a copy (its connection is not sandboxed, the CLI's are: DuckDB
    refuses both on one file in one process)."""
    copy = tmp_path_factory.mktemp("api") / "work"
    shutil.copytree(workdir, copy)
    opened = gh.open(copy)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def server(workdir):
    holder = SnapshotHolder(current=open_snapshot(workdir, immutable=True))
    yield create_server(holder)
    holder.current.close()


def entities(hits) -> set[str]:
    return {h.entity for h in hits}


def recased(text: str, uppers: list[bool]) -> str:
    return "".join(c.upper() if up else c.lower() for c, up in zip(text, uppers, strict=True))


def spelt(values):
    """A value of `values` and the same value in some other casing."""
    return st.sampled_from(sorted(values)).flatmap(
        lambda v: st.tuples(st.just(v), st.lists(st.booleans(), min_size=len(v), max_size=len(v)))
    )


# --------------------------------------------------------------------------- filters


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spelt(LABELS))
def test_any_casing_of_a_stored_label_finds_the_same_items(reader, case):
    label, uppers = case
    typed = recased(label, uppers)

    assert entities(reader.scan(label=typed, k=50)) == LABELS[label]
    assert entities(reader.scan(not_labels=[typed], k=50)).isdisjoint(LABELS[label])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spelt(STATES))
def test_any_casing_of_a_state_finds_the_same_items(reader, case):
    state, uppers = case

    assert entities(reader.scan(state=recased(state, uppers), k=50)) == STATES[state]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_any_label_text_is_quoted_never_read_as_a_clause(reader, typed):
    # quotes, brackets, backslashes, SQL: a label matches as a value or the filters refuse it
    try:
        hits = reader.scan(label=typed, any_labels=[typed, "x') OR true OR ('"], k=50)
    except GhindexError as exc:
        assert "\n" not in str(exc)
        return
    for hit in hits:
        assert fold(typed) in {fold(label) for label in hit.labels}


def test_labels_fold_beyond_ascii_and_stay_stored_as_written(reader):
    decomposed = unicodedata.normalize("NFD", "ÜNÏCODE")

    assert entities(reader.scan(label="STRASSE", k=50)) == {"octo/hello#2"}
    assert entities(reader.scan(label=decomposed, k=50)) == {"octo/hello#3"}
    assert entities(reader.scan(label="WON'T FIX", k=50)) == {"octo/hello#2"}
    assert {tuple(h.labels) for h in reader.scan(label="bug", k=50)} == {("Bug",), ("bug",)}
    rows = reader.sql("SELECT DISTINCT label FROM issue_labels ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == ["Bug", "Straße", "bug", "help wanted", "won't fix", "Ünïcode"]


def test_the_python_api_search_and_context_fold_their_filters(reader):
    assert entities(reader.search("crash", label="BUG", mode="sparse")) == LABELS["Bug"]
    assert entities(reader.search("crash", state="CLOSED", mode="sparse")) == {"octo/hello#1"}
    packed = reader.context("crash on startup", labels=["bUg"], state="Open")
    assert {p["handle"].split("/comment/")[0] for p in packed["passages"]} == {"octo/other#1"}


@pytest.mark.parametrize("query", [None, "", "   "])
def test_the_python_api_search_without_a_query_scans_as_every_door_does(reader, query):
    scanned = reader.scan(label="bug", k=50)

    assert [h.entity for h in reader.search(query, label="bug", k=50)] == [
        h.entity for h in scanned
    ]
    assert scanned


def test_a_label_no_item_carries_in_any_case_is_named_unmatched(reader):
    response = reader.snapshot.scan(Filters(labels=("BUG", "no-such")), k=50)

    assert response.results == []
    assert response.filters_unmatched == ["label=no-such"]


def test_the_cli_folds_label_and_state(workdir, run):
    scanned = run(
        "search", "--snapshot", str(workdir), "--label", "BUG", "--state", "OPEN", "--json"
    )
    searched = run("search", "--snapshot", str(workdir), "crash", "--label", "bug", "--json")

    assert scanned.exit_code == 0, scanned.output
    assert {r["handle"] for r in json.loads(scanned.stdout)["results"]} == {"octo/other#1"}
    assert {r["entity"] for r in json.loads(searched.stdout)["results"]} == LABELS["Bug"]


def test_mcp_search_folds_labels(server):
    scanned = answer(server, "search", labels=["BUG"], top_k=20)
    searched = answer(server, "search", query="crash", labels=["sTRASSE"], state="open")

    assert {r["handle"] for r in scanned["results"]} == LABELS["Bug"]
    assert scanned["filters_unmatched"] == []
    assert {r["handle"] for r in searched["results"]} == {"octo/hello#2"}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spelt(STATES))
def test_mcp_search_takes_a_state_in_any_case(server, case):
    state, uppers = case
    typed = recased(state, uppers)

    scanned = answer(server, "search", state=typed, top_k=50)
    packed = answer(server, "context", query="crash on startup", state=typed)

    assert {r["handle"] for r in scanned["results"]} == STATES[state]
    assert {p["handle"].split("/comment/")[0] for p in packed["passages"]} <= STATES[state]


def test_mcp_refuses_a_state_that_is_none_in_any_case(server):
    refused = failure(server, "search", state="OPENED")

    assert "state" in refused and "\n" not in refused


# --------------------------------------------------------------------------- sql


def test_sql_that_finds_nothing_for_a_lower_case_state_says_how_states_are_stored(reader, workdir):
    snapshot = reader.snapshot
    hint = "states are stored upper-case: OPEN, CLOSED, MERGED"

    assert snapshot.sql("SELECT handle FROM issues WHERE state = 'open'").hint == hint
    assert (
        snapshot.sql("SELECT count(*) FROM pull_requests p WHERE p.state IN ('merged')").hint
        == hint
    )
    assert (
        snapshot.sql("SELECT handle FROM issues WHERE state = 'OPEN' AND number < 0").hint is None
    )
    assert snapshot.sql("SELECT handle FROM issues WHERE state = 'OPEN'").hint is None
    assert snapshot.sql("SELECT 'open' AS state WHERE false").hint is None


def test_the_state_hint_reaches_the_cli_and_mcp(workdir, run, server):
    printed = run(
        "sql", "--snapshot", str(workdir), "SELECT handle FROM issues WHERE state = 'closed'"
    )
    asked = answer(server, "sql", query="SELECT count(*) AS n FROM issues WHERE state = 'open'")

    assert printed.exit_code == 0
    assert printed.stderr == "note: states are stored upper-case: OPEN, CLOSED, MERGED\n"
    assert asked["rows"] == [[0]]
    assert asked["hint"] == "states are stored upper-case: OPEN, CLOSED, MERGED"
    assert "hint" not in answer(server, "sql", query="SELECT count(*) FROM issues")


@pytest.mark.parametrize(
    ("statement", "error"),
    [
        (
            "SELECT * FRM issues",
            'Parser Error: syntax error at or near "issues" (line 1, column 14)',
        ),
        (
            "SELECT nosuch FROM issues",
            'Binder Error: Referenced column "nosuch" not found in FROM clause! (line 1, column 8)',
        ),
        (
            "SELECT number FROM issues WHERE number = 'abc'",
            "Conversion Error: Could not convert string 'abc' to INT32 (line 1, column 42)",
        ),
        (
            "SELECT 1,\n  'x'::INT",
            "Conversion Error: Could not convert string 'x' to INT32 (line 2, column 6)",
        ),
    ],
)
def test_sql_errors_point_into_the_statement_as_written(reader, server, statement, error):
    with pytest.raises(GhindexError) as caught:
        reader.snapshot.sql(statement)

    assert str(caught.value) == f"query: {error}: fix the statement"
    assert failure(server, "sql", query=statement).endswith(f"{error}: fix the statement")


def test_a_long_line_cut_in_the_error_still_gets_its_column(reader):
    statement = "SELECT " + "number, " * 30 + "nosuch FROM issues"

    with pytest.raises(GhindexError) as caught:
        reader.snapshot.sql(statement)

    assert f"(line 1, column {statement.index('nosuch') + 1})" in str(caught.value)


# --------------------------------------------------------------------------- show


def test_show_takes_a_bare_number_that_one_item_has(workdir, run):
    for typed in ("#2", "2", " #2 "):
        shown = run("show", "--snapshot", str(workdir), typed, "--json")
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["handle"] == "octo/hello#2"


def test_show_refuses_a_number_several_items_have_listing_them(workdir, run, server):
    shown = run("show", "--snapshot", str(workdir), "#1")
    missing = run("show", "--snapshot", str(workdir), "#99")

    assert shown.exit_code == 1
    assert shown.stderr == (
        "Error: #1 names 2 items (octo/hello#1, octo/other#1): give the repository, "
        "as in octo/hello#1\n"
    )
    assert missing.stderr.startswith("Error: no item #99 in the snapshot")
    assert answer(server, "fetch", handles=["#1", "#4"])["not_found"] == ["#1"]


def test_show_of_a_comment_the_item_does_not_have_is_an_error_naming_it(workdir, run, server):
    comment = run("show", "--snapshot", str(workdir), "octo/hello#1/comment/99")
    review = run("show", "--snapshot", str(workdir), "Octo/Hello#5/review-comment/7")
    there = run("show", "--snapshot", str(workdir), "octo/hello#1/comment/11", "--json")

    assert comment.exit_code == 1
    assert comment.stderr == "Error: no comment 99 on octo/hello#1: it has 1 comment\n"
    assert review.stderr == "Error: no review comment 7 on octo/hello#5: it has 2 review comments\n"
    assert json.loads(there.stdout)["handle"] == "octo/hello#1"
    fetched = answer(server, "fetch", handles=["octo/hello#1/comment/99"])
    assert fetched["not_found"] == ["octo/hello#1/comment/99"]


def test_show_prints_a_thread_without_a_place_and_no_association_plainly(workdir, run):
    shown = run("show", "--snapshot", str(workdir), "octo/hello#5")

    assert shown.exit_code == 0
    heads = [line for line in shown.stdout.splitlines() if line.startswith("---")]
    assert heads == [
        "--- octocat, contributor on 2015-01-01",
        "--- octocat on 2015-01-02",  # association NONE
        "--- thread (no file)",
        "--- reviewer, member on 2015-01-02",
        "--- thread on src/app.py",
        "--- reviewer, member on 2015-01-02",
    ]
    assert ":?" not in shown.stdout and ", none" not in shown.stdout
