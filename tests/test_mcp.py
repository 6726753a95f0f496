"""The MCP server through real MCP client sessions from the mcp SDK: in-process on a
small built snapshot, over stdio against a `ghindex serve` subprocess, and over
streamable HTTP on 127.0.0.1 (with and without a bearer token), 127.0.0.2 and 0.0.0.0.
The tool surface is compared with a checked-in snapshot, and snapshots are swapped
while clients query."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import mcp
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ghindex.errors import GhindexError
from ghindex.index.build import build
from ghindex.query.snapshot import Snapshot
from ghindex.serve import SnapshotHolder, budget, create_server, open_snapshot, tools
from ghindex.snapshot import Store, publish
from ghindex.snapshot.layout import blob_path
from ghindex.snapshot.local import live_root
from ghindex.snapshot.refs import latest_ref, read_manifest
from ghindex.state import items
from ghindex.state.database import open_state, transaction
from testkit.github_server import (
    as_response,
    comment_node,
    issue_node,
    pull_request_node,
    ref,
    review_comment_node,
    review_node,
    thread_node,
)
from testkit.mcp_calls import answer, failure
from testkit.state import settings_for, store_issues

pytestmark = pytest.mark.slow  # a built snapshot, and `ghindex serve` subprocesses

TOOLS = ["search", "fetch", "related", "context", "sql", "status"]
RESULT_FIELDS = (
    "handle",
    "type",
    "repo",
    "number",
    "title",
    "state",
    "url",
    "updated_at",
    "snippet",
    "score",
    "dense_rank",
    "sparse_rank",
)
SURFACE = Path(__file__).with_name("mcp_tools.json")
# Read at import: the autouse `isolated` fixture clears GHINDEX_* variables per test.
UPDATE_SURFACE = os.environ.get("GHINDEX_UPDATE_MCP_SNAPSHOT") == "1"
R = "octo/hello"
LONG = "Startup takes eleven seconds on a cold cache. " * 60


# --------------------------------------------------------------------------- data


def labelled(*names):
    return {"nodes": [{"name": n, "color": "ededed", "description": None} for n in names]}


def issues():
    """#1 a closed crash report with two comments, #3 a feature request, #4 a long body,
    #5-#12 look-alike questions (#6 updated last)."""
    crash = issue_node(
        1,
        title="Crash on startup when the config file is missing",
        body="The app crashes on startup with a KeyError when config.toml is missing.",
        labels=labelled("bug"),
        state="CLOSED",
        closedAt="2015-01-05T00:00:00Z",
        comments=[
            comment_node(11, body="I see the same crash on startup on Linux, KeyError: 'config'."),
            comment_node(12, body="Workaround: create an empty config.toml before starting."),
        ],
    )
    dark = issue_node(
        3,
        title="Add a dark mode to the settings page",
        body="Please add a dark theme toggle.",
        labels=labelled("enhancement"),
    )
    slow = issue_node(4, title="Slow startup on a cold cache", body=LONG)
    questions = [
        issue_node(
            n,
            title=f"Question {n} about plugin loading",
            body=f"How do I load plugin number {n} from a custom directory?",
        )
        for n in range(5, 13)
    ]
    questions[1]["updatedAt"] = "2016-06-01T00:00:00Z"
    return [crash, dark, slow, *questions]


def fix_pull():
    """#2 fixes #1 (and mentions #5), with a comment, two reviews and a review thread."""
    return pull_request_node(
        2,
        title="Fix crash on startup when config is missing",
        body="Fixes #1 by falling back to defaults when config.toml is missing. See also #5.",
        state="MERGED",
        merged=True,
        mergedAt="2015-01-05T00:00:00Z",
        closingIssuesReferences=[ref(R, 1)],
        comments=[comment_node(41, body="CI passed on all platforms.")],
        reviews=[
            review_node(21, "CHANGES_REQUESTED", body="Please add a regression test."),
            review_node(22, "APPROVED", body="Looks good, thanks for the regression test."),
        ],
        reviewThreads=[
            thread_node(
                "t1",
                [
                    review_comment_node(31, body="Use pathlib here instead of os.path."),
                    review_comment_node(
                        32, body="Done, switched to pathlib.", replyTo={"databaseId": 31}
                    ),
                ],
            )
        ],
    )


def edit_issue_7(workdir: Path, version: int) -> None:
    settings = settings_for(workdir)
    edited = issue_node(7, title=f"Question 7, edited {version}", body=f"Version {version}.")
    store_issues(settings, [edited])
    build(settings)


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory):
    """A built workdir: 11 issues and a pull request in octo/hello, one issue in octo/other."""
    settings = settings_for(tmp_path_factory.mktemp("mcp") / "work")
    store_issues(settings, issues())
    widget = issue_node(1, repo="octo/other", title="Widget colours", body="Which colours?")
    store_issues(settings, [widget], repo="octo/other")
    con = open_state(settings.state_path)
    try:
        with transaction(con):
            items.save_pull_requests(con, R, as_response([fix_pull()]))
    finally:
        con.close()
    build(settings)
    return settings.workdir


@pytest.fixture(scope="module")
def holder(snapshot_dir):
    return SnapshotHolder(current=open_snapshot(snapshot_dir))


@pytest.fixture(scope="module")
def server(holder):
    return create_server(holder)


@pytest.fixture(scope="module")
def held(snapshot_dir):
    """The same snapshot opened as a pulled one: its state stays open between requests."""
    holder = SnapshotHolder(current=open_snapshot(snapshot_dir, immutable=True))
    yield holder
    holder.current.close()


@pytest.fixture(scope="module")
def held_server(held):
    return create_server(held)


@pytest.fixture
def workdir(snapshot_dir, isolated):
    """A copy of the built workdir this test may change."""
    target = isolated / "work"
    shutil.copytree(snapshot_dir, target)
    return target


# --------------------------------------------------------------------------- calling


def surface(listed) -> list[dict]:
    """What an agent sees of each tool."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.input_schema,
            "annotations": tool.annotations.model_dump(
                mode="json", by_alias=True, exclude_none=True
            ),
        }
        for tool in listed
    ]


def list_tools(server) -> list:
    async def go():
        async with mcp.Client(server) as client:
            return (await client.list_tools()).tools

    return asyncio.run(go())


# --------------------------------------------------------------------------- surface


def test_the_tool_surface_matches_the_checked_in_snapshot(server):
    # tests/mcp_tools.json is what agents see: names, descriptions, input schemas and
    # annotations. After a deliberate change, rewrite it and review the diff:
    #   GHINDEX_UPDATE_MCP_SNAPSHOT=1 pytest tests/test_mcp.py -k surface
    found = surface(list_tools(server))
    if UPDATE_SURFACE:
        SURFACE.write_text(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
    assert found == json.loads(SURFACE.read_text()), (
        "the MCP tool surface changed: if that was meant, refresh tests/mcp_tools.json "
        "with GHINDEX_UPDATE_MCP_SNAPSHOT=1"
    )


def test_every_tool_is_annotated_read_only_idempotent_and_closed(server):
    listed = list_tools(server)

    assert [t.name for t in listed] == TOOLS
    for tool in listed:
        hints = tool.annotations
        assert (hints.read_only_hint, hints.destructive_hint) == (True, False), tool.name
        assert (hints.idempotent_hint, hints.open_world_hint) == (True, False), tool.name


def test_every_tool_answers_with_the_snapshot_id_and_age(server, holder):
    calls = {
        "search": {"query": "crash"},
        "fetch": {"handles": ["octo/hello#1"]},
        "related": {"handle": "octo/hello#1"},
        "context": {"query": "crash"},
        "sql": {"query": "SELECT 1"},
        "status": {},
    }
    assert list(calls) == TOOLS
    for tool, arguments in calls.items():
        body = answer(server, tool, **arguments)
        assert body["snapshot_id"] == holder.current.snapshot_id
        assert body["snapshot_id"].startswith("local-")
        assert isinstance(body["snapshot_age_seconds"], int)
        assert body["snapshot_age_seconds"] >= 0


# --------------------------------------------------------------------------- search


def test_search_returns_whole_items_with_what_matched(server):
    body = answer(server, "search", query="crash on startup config missing", top_k=3)

    assert (body["mode"], body["filters_unmatched"], body["truncated"]) == ("hybrid", [], False)
    crash, fix, _ = body["results"]
    assert {k: crash[k] for k in ("handle", "type", "repo", "number", "title", "state")} == {
        "handle": "octo/hello#1",
        "type": "issue",
        "repo": R,
        "number": 1,
        "title": "Crash on startup when the config file is missing",
        "state": "closed",
    }
    for result in body["results"]:
        assert set(RESULT_FIELDS) <= set(result)
        assert result["url"].startswith(f"https://github.com/{R}/")
        assert result["score"] > 0 and result["snippet"]
    assert (crash["dense_rank"], crash["sparse_rank"]) == (1, 1)
    # the issue and its comments matched: one result, the other rows under same_entity
    rows = {crash.get("matched", {}).get("handle", crash["handle"])}
    rows |= {r["handle"] for r in crash["same_entity"]}
    assert rows == {R + "#1", R + "#1/comment/11", R + "#1/comment/12"}
    assert crash["fixed_by"] == [R + "#2"]
    assert (fix["handle"], fix["type"], fix["state"]) == (R + "#2", "pull_request", "merged")
    assert fix["closes"] == [R + "#1"]


def test_filter_values_that_match_nothing_are_named(server):
    bare = answer(server, "search", query="crash", repo="hello")
    full = answer(server, "search", query="crash", repo=R, labels=["bug", "nope"])
    fine = answer(server, "search", query="crash", repo="octo/other")

    assert (bare["results"], bare["filters_unmatched"]) == ([], ["repo=hello"])
    assert (full["results"], full["filters_unmatched"]) == ([], ["label=nope"])
    assert fine["filters_unmatched"] == []
    assert [r["handle"] for r in fine["results"]] == ["octo/other#1"]


def test_search_without_a_query_scans_newest_first(server):
    newest = answer(server, "search", top_k=3)
    created = answer(server, "search", top_k=3, sort="created_desc")
    everything = answer(server, "search", top_k=50)
    pulls = answer(server, "search", type="pull_request")
    closed = answer(server, "search", state="closed", repo=R)

    assert (newest["mode"], newest["truncated"]) == ("scan", True)
    assert [r["handle"] for r in newest["results"]] == [R + "#6", R + "#12", R + "#11"]
    assert [r["handle"] for r in created["results"]] == [R + "#12", R + "#11", R + "#10"]
    assert everything["truncated"] is False
    assert len(everything["results"]) == 13  # 11 issues and a PR in octo/hello, 1 in octo/other
    assert all(r["dense_rank"] is None and r["sparse_rank"] is None for r in newest["results"])
    assert [r["handle"] for r in pulls["results"]] == [R + "#2"]
    assert [r["handle"] for r in closed["results"]] == [R + "#1"]
    assert (pulls["truncated"], closed["truncated"]) == (False, False)


def test_search_results_can_be_sorted_by_time(server):
    by_relevance = answer(server, "search", query="plugin loading", top_k=5)
    updated = answer(server, "search", query="plugin loading", top_k=5, sort="updated_desc")
    created = answer(server, "search", query="plugin loading", top_k=5, sort="created_desc")

    handles = {r["handle"] for r in by_relevance["results"]}
    assert {r["handle"] for r in updated["results"]} == handles
    assert {r["handle"] for r in created["results"]} == handles
    stamps = [r["updated_at"] for r in updated["results"]]
    assert stamps == sorted(stamps, reverse=True)
    newest = max(by_relevance["results"], key=lambda r: r["updated_at"])
    assert updated["results"][0]["handle"] == newest["handle"]
    numbers = [r["number"] for r in created["results"]]  # issue n was created at hour n
    assert numbers == sorted(numbers, reverse=True)


def test_graph_expansion_lists_linked_items_without_a_score(server):
    one = answer(
        server, "search", query="crash on startup", type="issue", top_k=1, graph_expand=True
    )
    two = answer(
        server,
        "search",
        query="crash on startup",
        type="issue",
        top_k=1,
        graph_expand=True,
        graph_hops=2,
    )
    plain = answer(server, "search", query="crash on startup", type="issue", top_k=1)

    assert [r["handle"] for r in one["results"]] == [R + "#1"]
    closes = {
        "handle": R + "#2",
        "type": "pull_request",
        "title": "Fix crash on startup when config is missing",
        "url": f"https://github.com/{R}/pull/2",
        "hop": 1,
        "from": R + "#1",
        "kind": "closes",
        "direction": "in",
    }
    assert one["graph_results"] == [closes]
    assert two["graph_results"][0] == closes
    assert {k: two["graph_results"][1][k] for k in ("handle", "hop", "from", "kind")} == {
        "handle": R + "#5",
        "hop": 2,
        "from": R + "#2",
        "kind": "mentions",
    }
    assert all("score" not in g for g in two["graph_results"])
    assert "graph_results" not in plain


# --------------------------------------------------------------------------- fetch


def test_fetch_gives_an_issue_with_its_comments_in_order(server):
    body = answer(server, "fetch", handles=[R + "#1"])

    (issue,) = body["items"]
    assert body["not_found"] == []
    assert (issue["handle"], issue["type"], issue["state"], issue["labels"]) == (
        R + "#1",
        "issue",
        "closed",
        ["bug"],
    )
    assert issue["text"] == (
        "The app crashes on startup with a KeyError when config.toml is missing."
    )
    assert [(c["handle"], c["text"]) for c in issue["comments"]] == [
        (R + "#1/comment/11", "I see the same crash on startup on Linux, KeyError: 'config'."),
        (R + "#1/comment/12", "Workaround: create an empty config.toml before starting."),
    ]
    assert issue["fixed_by"] == [R + "#2"]
    assert issue["truncated"] is False
    assert (
        issue["chars"]
        == issue["returned_chars"]
        == len(issue["text"]) + sum(len(c["text"]) for c in issue["comments"])
    )


def test_fetch_gives_a_pull_request_with_reviews_and_threads(server):
    body = answer(server, "fetch", handles=[R + "#2", R + "#1/comment/12", "octo/nope#9"])

    pull, named = body["items"]
    assert body["not_found"] == ["octo/nope#9"]
    assert (pull["type"], pull["merged"], pull["closes"]) == ("pull_request", True, [R + "#1"])
    assert [c["handle"] for c in pull["comments"]] == [R + "#2/comment/41"]
    assert [(r["handle"], r["state"], r["text"]) for r in pull["reviews"]] == [
        (R + "#2/review/21", "CHANGES_REQUESTED", "Please add a regression test."),
        (R + "#2/review/22", "APPROVED", "Looks good, thanks for the regression test."),
    ]
    (thread,) = pull["review_threads"]
    assert (thread["path"], thread["line"], thread["resolved"]) == ("src/app.py", 10, False)
    assert [(c["handle"], c["reply_to"], c["text"]) for c in thread["comments"]] == [
        (R + "#2/review-comment/31", None, "Use pathlib here instead of os.path."),
        (R + "#2/review-comment/32", R + "#2/review-comment/31", "Done, switched to pathlib."),
    ]
    # a comment's handle gives its whole item
    assert (named["handle"], named["requested"]) == (R + "#1", R + "#1/comment/12")


def test_fetch_cuts_long_items_and_says_so(server):
    body = answer(server, "fetch", handles=[R + "#4"], max_chars=1000)

    (item,) = body["items"]
    assert (item["truncated"], item["text_truncated"]) == (True, True)
    assert item["chars"] == len(LONG) and 300 < item["returned_chars"] < 1000
    assert item["text"] == LONG[: item["returned_chars"]]
    assert len(json.dumps(body, ensure_ascii=False, separators=(",", ":"))) <= 1000 + 100


# --------------------------------------------------------------------------- related, context


def test_related_lists_links_and_nearest_items(server):
    body = answer(server, "related", handle=R + "#1/comment/11")

    assert (body["handle"], body["resolved"]) == (R + "#1/comment/11", R + "#1")
    links = [(n["handle"], n["kind"], n["direction"], n["hop"]) for n in body["neighbours"]]
    assert (R + "#2", "closes", "in", 1) in links
    assert (R + "#2", "mentions", "in", 1) in links
    assert body["nearest"][0]["handle"] == R + "#2"
    assert R + "#1" not in {n["handle"] for n in body["nearest"]}
    assert all(set(n) == {"handle", "type", "title", "url", "score"} for n in body["nearest"])


def test_context_packs_cited_passages_within_the_budget(server):
    body = answer(server, "context", query="why does the app crash on startup?", max_tokens=200)

    assert body["question"] == "why does the app crash on startup?"
    assert body["passages"][0]["handle"] == R + "#1"
    assert 0 < body["tokens"] <= 200
    for passage in body["passages"]:
        assert passage["handle"] and passage["url"].startswith("https://github.com/")
        assert passage["text"]
    assert sum(len(p["text"]) for p in body["passages"]) <= 200 * 4


def test_context_says_when_nothing_matches(server):
    body = answer(server, "context", query="crash on startup", repo="octo/nothing")

    assert (body["passages"], body["tokens"]) == ([], 0)
    assert body["filters_unmatched"] == ["repo=octo/nothing"]
    assert body["note"].startswith("nothing in the snapshot matches this question")


# --------------------------------------------------------------------------- sql


def test_sql_answers_a_compact_table_with_a_row_limit(server):
    query = f"SELECT handle, number, state FROM issues WHERE repo = '{R}' ORDER BY number"
    cut = answer(server, "sql", query=query, max_rows=3)
    whole = answer(server, "sql", query=query)

    assert cut["columns"] == ["handle", "number", "state"]
    assert cut["rows"] == [[R + "#1", 1, "CLOSED"], [R + "#3", 3, "OPEN"], [R + "#4", 4, "OPEN"]]
    assert (cut["row_count"], cut["truncated"]) == (3, True)
    token = cut["next_offset"]  # the position, and a tag of the snapshot and the tool
    assert token.startswith("3.") and len(token) == 10
    assert cut["truncated_reason"] == (
        f'cut at 3 rows: raise max_rows or narrow the query; ask again with offset="{token}"'
    )
    assert (whole["row_count"], whole["truncated"], whole["truncated_reason"]) == (11, False, None)
    assert isinstance(whole["elapsed_ms"], float)


def test_a_huge_answer_is_cut_at_its_size_not_sent(server):
    cut = answer(server, "sql", query="SELECT repeat('x', 2000000) AS v FROM range(50)")

    assert cut["truncated"] is True
    assert cut["truncated_reason"].startswith("cut at 32,000 bytes")  # four a token
    assert cut["row_count"] == 1 and len(cut["rows"][0][0]) <= 32_001
    assert budget.cost(cut) <= budget.DEFAULT_TOKENS


def test_the_cli_cuts_a_huge_answer_at_its_byte_cap(snapshot_dir):
    result = Snapshot(snapshot_dir).sql("SELECT repeat('x', 2000000) AS v FROM range(50)")

    assert result.truncated and result.reason.startswith("cut at 1,000,000 bytes")
    assert len(result.rows) == 1 and len(result.rows[0][0]) <= 1_000_001


def test_sql_runs_under_a_memory_limit_and_names_no_local_path(server, snapshot_dir):
    limit = answer(server, "sql", query="SELECT current_setting('memory_limit')")["rows"][0][0]
    databases = answer(server, "sql", query="PRAGMA database_list")

    assert limit.endswith("MiB") and float(limit.split()[0]) <= 512
    assert str(snapshot_dir) not in json.dumps(databases)
    assert databases["rows"][0][2] == "state.duckdb"


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT len(range(200000000))",
        "SELECT len(range(2000000000))",
        "SELECT length(repeat('x', 2000000000))",
        "SELECT len(list_concat(range(100000000), range(100000000)))",
        "SELECT string_agg(repeat('y', 1000), ',') FROM range(3000000)",
    ],
)
def test_a_function_building_a_huge_value_is_stopped_by_the_memory_limit(server, statement):
    # DuckDB's own limit does not cover one function's value: the statement's process
    # is capped by the kernel, and this server's memory never grows.
    before = _rss_mb()
    started = time.perf_counter()

    text = failure(server, "sql", query=statement)

    assert "needs more than the 512 MB memory limit (GHINDEX_SQL_MEMORY_MB)" in text
    assert "\n" not in text and "Traceback" not in text
    assert time.perf_counter() - started < 30
    assert _rss_mb() - before < 200
    assert answer(server, "sql", query="SELECT count(*) FROM issues")["rows"][0][0] > 0


def test_a_statement_spills_only_into_a_bounded_private_folder_removed_after(
    server, snapshot_dir, monkeypatch
):
    monkeypatch.setenv("GHINDEX_SQL_TEMP_MB", "16")
    monkeypatch.setenv("GHINDEX_SQL_MEMORY_MB", "64")
    beside = set(snapshot_dir.iterdir())
    spilled = set(Path(tempfile.gettempdir()).glob("ghindex-sql-*"))

    text = failure(
        server,
        "sql",
        query="SELECT md5(i::VARCHAR) AS g, count(*) FROM range(30000000) t(i) GROUP BY g",
    )

    assert "memory limit" in text or "temporary disk" in text
    assert set(snapshot_dir.iterdir()) == beside  # no state.duckdb.tmp/ beside it
    assert set(Path(tempfile.gettempdir()).glob("ghindex-sql-*")) == spilled


def test_a_syntax_error_is_one_sentence_with_its_place(server):
    text = failure(server, "sql", query="SELEC oops")

    assert text == (
        'Error executing tool sql: query: Parser Error: syntax error at or near "SELEC" '
        "(line 1, column 1): fix the statement"
    )


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
        ("SELECT * FROM read_text('/etc/hostname')", "file system operations are disabled"),
        ("COPY issues TO '{out}/issues.csv'", "COPY statements are refused here"),
        ("COPY (SELECT 1) TO '{out}/one.parquet' (FORMAT parquet)", "COPY statements are refused"),
        ("ATTACH '{out}/other.duckdb' AS other", "ATTACH statements are refused here"),
        ("INSTALL httpfs", "INSTALL statements are refused here"),
        ("LOAD httpfs", "LOAD statements are refused here"),
        ("CREATE TABLE t AS SELECT 1", "CREATE statements are refused here"),
        ("CREATE TEMP TABLE t AS SELECT 1", "CREATE statements are refused here"),
        ("DELETE FROM issues", "DELETE statements are refused here"),
        ("SET enable_external_access = true", "SET statements are refused here"),
        ("CHECKPOINT", "CHECKPOINT statements are refused here"),
        ("VACUUM", "VACUUM statements are refused here"),
        ("PRAGMA enable_profiling", "PRAGMA statements are refused here"),
        ("SELECT * FROM glob('{out}/*')", "file system operations are disabled"),
        ("SELECT 1; SELECT 2", "give exactly one SQL statement, not 2"),
        ("SELECT 1; DROP TABLE issues", "give exactly one SQL statement, not 2"),
    ],
)
@pytest.mark.parametrize("serving", ["server", "held_server"])
def test_sql_cannot_read_files_write_or_reconfigure(
    request, serving, snapshot_dir, isolated, statement, expected
):
    server = request.getfixturevalue(serving)
    out = isolated / "out"
    out.mkdir()
    state = snapshot_dir / "state.duckdb"
    before = hashlib.sha256(state.read_bytes()).hexdigest()

    text = failure(server, "sql", query=statement.format(out=out))

    assert text.startswith("Error executing tool sql: query: ")
    assert expected in text
    assert list(out.iterdir()) == []
    assert hashlib.sha256(state.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("serving", ["holder", "held"])
def test_a_slow_query_is_stopped_at_the_time_limit(request, serving):
    holder = request.getfixturevalue(serving)
    started = time.perf_counter()
    with pytest.raises(GhindexError) as error:
        tools.sql(
            holder.current,
            "SELECT sum(a.range * b.range) FROM range(1000000000) a, range(1000) b",
            10,
            timeout=0.5,
        )
    assert str(error.value) == "query: stopped after the 0.5 s time limit; narrow it down"
    assert time.perf_counter() - started < 5


def test_every_tool_can_run_at_once_on_one_state(held):
    # The sql tool's sandboxed connection and the other tools' reads share one
    # configuration: DuckDB refuses to open a file twice with two different ones.
    from concurrent.futures import ThreadPoolExecutor

    snapshot = held.current
    calls = [
        lambda: tools.sql(snapshot, "SELECT count(*) FROM issues", 10)["rows"],
        lambda: [i["handle"] for i in tools.fetch(snapshot, [R + "#2"], 20_000)["items"]],
        lambda: tools.related(snapshot, R + "#1", 1)["neighbours"][0]["handle"],
        lambda: tools.search(snapshot, "crash on startup", tools.filters(), top_k=1)["results"][0][
            "handle"
        ],
    ] * 5
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda call: call(), calls))

    assert answers[:4] == [[[12]], [R + "#2"], R + "#2", R + "#1"]
    assert answers[4:] == answers[:4] * 4


def writable_from_another_process(state: Path) -> bool:
    """Whether `ghindex fetch` in another process could open the state to write."""
    opener = "import duckdb, sys; duckdb.connect(sys.argv[1]).close()"
    return subprocess.run([sys.executable, "-c", opener, str(state)]).returncode == 0


def test_a_workdir_is_served_without_holding_its_state(workdir):
    # fetch and build write the workdir's state between requests: the server must not
    # keep it open (a read-only connection held by one process blocks writers).
    state = workdir / "state.duckdb"
    served = open_snapshot(workdir)
    assert tools.fetch(served, [R + "#1"], 20_000)["items"]
    assert writable_from_another_process(state)

    pulled = open_snapshot(workdir, immutable=True)
    assert tools.fetch(pulled, [R + "#1"], 20_000)["items"]
    assert not writable_from_another_process(state)
    pulled.close()
    assert writable_from_another_process(state)


# --------------------------------------------------------------------------- status, errors


def test_status_describes_the_snapshot(server, holder):
    body = answer(server, "status")

    assert body["status"] == "serving"
    assert body["snapshot_id"] == holder.current.snapshot_id
    assert sorted(body["repos"]) == ["octo/hello", "octo/other"]
    assert body["model"] == {
        "name": "sentence-transformers/all-MiniLM-L6-v2",
        "dimension": 384,
        "precision": "int8",
        "encoder": "onnx",
    }
    assert (body["counts"]["issue"], body["counts"]["pull_request"]) == (12, 1)
    assert body["built_at"] and body["sync"] is None  # a directory: nothing to sync


def test_status_shows_the_store_without_credentials(snapshot_dir):
    store = Store("s3://key:secret@bucket/ghindex?X-Amz-Signature=abc")
    holder = SnapshotHolder(current=open_snapshot(snapshot_dir), store=store, interval=300.0)

    body = answer(create_server(holder), "status")

    assert body["sync"] == {
        "store": "s3://bucket/ghindex",
        "interval_seconds": 300.0,
        "last_check": None,
        "seconds_since_last_check": None,
        "last_success": None,
        "last_error": None,
        "syncs": 0,
    }


@pytest.mark.parametrize(
    ("tool", "arguments", "parameter"),
    [
        ("search", {"query": "crash", "top_k": 500}, "top_k"),
        ("search", {"query": "crash", "type": "bug_report"}, "type"),
        ("search", {"query": "crash", "since": "last tuesday"}, "since"),
        ("context", {"query": "crash", "until": "2015-02-30"}, "until"),
        ("search", {"query": "crash", "mode": "semantic"}, "mode"),
        ("fetch", {"handles": []}, "handles"),
        ("related", {"handle": R + "#1", "hops": 3}, "hops"),
        ("sql", {"query": "SELECT 1", "max_rows": 0}, "max_rows"),
    ],
)
def test_bad_input_is_an_error_naming_the_parameter(server, tool, arguments, parameter):
    text = failure(server, tool, **arguments)

    assert text.startswith(f"{tool}: argument {parameter}: "), text
    assert "\n" not in text and "validation error" not in text


BAD_VALUES = {
    "search": {"top_k": 0},
    "fetch": {"handles": ["x"] * 51},
    "related": {"handle": R + "#1", "hops": "far"},
    "context": {"query": "crash", "max_tokens": 10},
    "sql": {"query": "SELECT 1", "max_rows": 10**9},
    "status": None,
}


@pytest.mark.parametrize("tool", TOOLS)
def test_an_unknown_argument_is_named_with_the_valid_ones(server, tool):
    base = {
        "search": {"query": "crash"},
        "fetch": {"handles": [R + "#1"]},
        "related": {"handle": R + "#1"},
        "context": {"query": "crash"},
        "sql": {"query": "SELECT 1"},
        "status": {},
    }[tool]

    text = failure(server, tool, **base, k=3)

    assert text.startswith(f"{tool}: unknown argument 'k'"), text
    assert "valid arguments:" in text and "\n" not in text
    if tool == "search":
        assert "(did you mean 'top_k'?)" in text
    if BAD_VALUES[tool] is not None:
        bad = failure(server, tool, **{**base, **BAD_VALUES[tool]})
        assert bad.startswith(f"{tool}: argument ") and "\n" not in bad, bad


def test_the_published_schemas_refuse_unknown_arguments(server):
    for tool in list_tools(server):
        assert tool.input_schema["additionalProperties"] is False, tool.name


def test_an_unknown_handle(server):
    fetched = answer(server, "fetch", handles=["octo/hello#99"])
    text = failure(server, "related", handle="octo/hello#99")

    assert (fetched["items"], fetched["not_found"]) == ([], ["octo/hello#99"])
    assert text == (
        "Error executing tool related: no item octo/hello#99 in the snapshot: check the handle "
        "(owner/repo#123, owner/repo@sha, owner/repo:path)"
    )


# --------------------------------------------------------------------------- stdio


def test_a_stdio_session_with_a_serve_subprocess(snapshot_dir, isolated):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ghindex", "serve", "--snapshot", str(snapshot_dir)],
        env={"HF_HUB_OFFLINE": "1", "GHINDEX_WORKDIR": str(isolated / "work")},
        cwd=str(isolated),
    )
    stray = []  # anything on stdout that is not a JSON-RPC message arrives here

    async def on_message(message):
        if isinstance(message, Exception):
            stray.append(message)

    async def session(errlog):
        async with mcp.Client(
            stdio_client(params, errlog=errlog), message_handler=on_message
        ) as client:
            listed = (await client.list_tools()).tools
            found = await client.call_tool("search", {"query": "crash on startup", "top_k": 2})
            status = await client.call_tool("status", {})
            return listed, found, status

    with open(isolated / "stderr.txt", "w") as errlog:
        listed, found, status = asyncio.run(session(errlog))

    assert [t.name for t in listed] == TOOLS
    assert not found.is_error and not status.is_error
    assert [r["handle"] for r in found.structured_content["results"]] == [R + "#1", R + "#2"]
    assert status.structured_content["status"] == "serving"
    assert stray == []
    assert "Traceback" not in (isolated / "stderr.txt").read_text()


# --------------------------------------------------------------------------- HTTP


TOKEN = "t0k3n-" + "9f" * 16  # 38 characters


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_servers(snapshot_dir, tmp_path_factory):
    """`ghindex serve --transport http` processes: on 127.0.0.1 without a token and with
    GHINDEX_MCP_TOKEN, on 127.0.0.2 and on 0.0.0.0 with it (reached over loopback only).
    Started together; their stderr goes to files."""
    home = tmp_path_factory.mktemp("http")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GHINDEX_", "GITHUB_TOKEN", "GH_TOKEN"))
    }
    env.update(HF_HUB_OFFLINE="1", GHINDEX_WORKDIR=str(home / "work"))
    servers = {}
    for name, host, token in (
        ("open", "127.0.0.1", None),
        ("token", "127.0.0.1", TOKEN),
        ("other loopback", "127.0.0.2", TOKEN),
        ("any address", "0.0.0.0", TOKEN),  # reached on 127.0.0.1 only
    ):
        port = free_port()
        errlog = open(home / f"{name}.stderr", "w")  # noqa: SIM115 (closed below)
        argv = [
            sys.executable,
            "-m",
            "ghindex",
            "serve",
            "--snapshot",
            str(snapshot_dir),
            "--transport",
            "http",
            "--host",
            host,
            "--port",
            str(port),
        ]
        process = subprocess.Popen(
            argv,
            env=dict(env, GHINDEX_MCP_TOKEN=token) if token else env,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
            cwd=home,
        )
        reach = "127.0.0.1" if host == "0.0.0.0" else host
        servers[name] = {
            "url": f"http://{reach}:{port}/mcp",
            "token": token,
            "process": process,
            "errlog": errlog,
            "stderr": home / f"{name}.stderr",
        }
    try:
        for server in servers.values():
            deadline = time.monotonic() + 60
            while True:
                assert server["process"].poll() is None, server["stderr"].read_text()
                try:
                    httpx2.get(server["url"], timeout=1)
                    break
                except httpx2.TransportError:
                    assert time.monotonic() < deadline, "ghindex serve did not start"
                    time.sleep(0.1)
        yield servers
    finally:
        for server in servers.values():
            server["process"].terminate()
            server["process"].wait(timeout=10)
            server["errlog"].close()


def test_a_streamable_http_session(http_servers):
    server = http_servers["open"]

    async def session():
        async with mcp.Client(server["url"]) as client:
            listed = (await client.list_tools()).tools
            found = await client.call_tool(
                "search", {"query": "crash on startup", "mode": "sparse", "top_k": 2}
            )
            fetched = await client.call_tool("fetch", {"handles": [R + "#2"]})
            rows = await client.call_tool("sql", {"query": "SELECT count(*) FROM issues"})
            return listed, found, fetched, rows

    listed, found, fetched, rows = asyncio.run(session())

    assert [t.name for t in listed] == TOOLS
    assert found.structured_content["mode"] == "sparse"
    assert [r["handle"] for r in found.structured_content["results"]] == [R + "#1", R + "#2"]
    assert fetched.structured_content["items"][0]["handle"] == R + "#2"
    assert rows.structured_content["rows"] == [[12]]
    assert "Traceback" not in server["stderr"].read_text()


def _server_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_hostile_calls_over_http_leave_the_server_up_and_its_memory_level(http_servers):
    # the issue's cases: 50,000 labels crashed LanceDB; a 2.7 MB query kept 1 GB; a range
    # function grew the process by gigabytes
    server = http_servers["open"]
    hostile = [
        ("search", {"query": "crash", "labels": ["x"] * 50_000}),
        ("search", {"query": "q" * 2_700_000}),
        ("sql", {"query": "SELECT len(range(200000000))"}),
        ("sql", {"query": "SELECT * FROM issues", "max_rows": 1000}),
        ("search", {"query": "#99999999999999999999999999"}),
    ]

    async def session():
        async with mcp.Client(server["url"]) as client:
            await client.call_tool("search", {"query": "crash on startup", "mode": "sparse"})
            before = _server_rss_mb(server["process"].pid)
            answers = [await client.call_tool(tool, args) for tool, args in hostile]
            after = _server_rss_mb(server["process"].pid)
            normal = await client.call_tool("search", {"query": "crash on startup"})
            return before, answers, after, normal

    before, answers, after, normal = asyncio.run(session())

    for answered in answers:
        text = answered.content[0].text
        assert "Traceback" not in text and (not answered.is_error or "\n" not in text)
    assert [a.is_error for a in answers] == [True, True, True, False, False]
    assert normal.structured_content["results"][0]["handle"] == R + "#1"
    assert server["process"].poll() is None
    assert after - before < 150
    assert "Traceback" not in server["stderr"].read_text()


def test_a_heavy_call_leaves_other_clients_answered(http_servers):
    # One client runs SQL that only the time limit stops; a second keeps calling.
    server = http_servers["open"]
    heavy = "SELECT a.range * b.range AS x FROM range(300000) a, range(30000) b ORDER BY x DESC"

    async def both():
        async with mcp.Client(server["url"]) as slow, mcp.Client(server["url"]) as quick:
            runaway = asyncio.create_task(slow.call_tool("sql", {"query": heavy}))
            await asyncio.sleep(0.3)
            answers = []
            cheap = {"query": "crash on startup", "mode": "sparse", "top_k": 1}
            while not runaway.done():
                answers.append(await quick.call_tool("search", cheap))
                answers.append(await quick.call_tool("sql", {"query": "SELECT 1"}))
            return await runaway, answers

    stopped, answers = asyncio.run(both())

    assert stopped.is_error
    assert stopped.content[0].text == (
        "Error executing tool sql: query: stopped after the 10 s time limit; narrow it down"
    )
    assert len(answers) >= 4 and not any(a.is_error for a in answers)


@pytest.mark.parametrize(
    ("mode", "negotiated"), [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")]
)
def test_http_speaks_the_current_protocol_and_the_handshake_before_it(
    http_servers, mode, negotiated
):
    async def session():
        async with mcp.Client(http_servers["open"]["url"], mode=mode) as client:
            found = await client.call_tool("search", {"query": "crash on startup", "top_k": 1})
            return client.protocol_version, found

    version, found = asyncio.run(session())

    assert version == negotiated
    assert found.structured_content["results"][0]["handle"] == R + "#1"


def test_an_older_client_gets_the_revision_it_asked_for(http_servers):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "old-client", "version": "0"},
        },
    }
    response = httpx2.post(
        http_servers["open"]["url"],
        json=initialize,
        headers={"Accept": "application/json, text/event-stream"},
    )

    assert response.status_code == 200
    text = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    assert json.loads(text)["result"]["protocolVersion"] == "2025-03-26"


def test_http_with_a_token_refuses_requests_without_it(http_servers):
    server = http_servers["token"]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}

    bare = httpx2.post(server["url"], json=initialize, headers=accept)
    wrong = httpx2.post(
        server["url"], json=initialize, headers={**accept, "Authorization": "Bearer nope"}
    )

    assert (bare.status_code, wrong.status_code) == (401, 401)
    assert bare.json() == {"error": "missing or wrong bearer token"}
    assert bare.headers["www-authenticate"] == 'Bearer realm="ghindex"'

    async def session():
        headers = {"Authorization": f"bearer {server['token']}"}  # the scheme in any case
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            mcp.Client(streamable_http_client(server["url"], http_client=http)) as client,
        ):
            return await client.call_tool("status", {})

    status = asyncio.run(session())
    assert status.structured_content["status"] == "serving"
    assert "Traceback" not in server["stderr"].read_text()


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.2", "192.168.1.5"])
def test_http_beyond_loopback_without_a_token_refuses_to_start(run, host):
    result = run("serve", "--transport", "http", "--host", host)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: serving HTTP on {host} needs a bearer token: export GHINDEX_MCP_TOKEN, "
        "or bind to 127.0.0.1\n"
    )


@pytest.mark.parametrize("token", [" ", "short", "x" * 31, "y" * 20 + " " + "z" * 20])
def test_a_weak_token_refuses_to_start(run, monkeypatch, token):
    monkeypatch.setenv("GHINDEX_MCP_TOKEN", token)

    result = run("serve", "--transport", "http", "--host", "0.0.0.0")

    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: GHINDEX_MCP_TOKEN must be at least 32 characters with no whitespace"
    )


@pytest.mark.parametrize("name", ["open", "other loopback", "any address"])
def test_dns_rebinding_is_refused_on_every_bind(http_servers, name):
    server = http_servers[name]
    own = server["url"].split("/")[2]
    headers = {"Accept": "application/json, text/event-stream"}
    if server["token"]:
        headers["Authorization"] = f"Bearer {server['token']}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

    rebound = httpx2.post(server["url"], json=body, headers={**headers, "Host": "evil.example"})
    foreign = httpx2.post(
        server["url"], json=body, headers={**headers, "Origin": "http://evil.example"}
    )
    own_origin = httpx2.post(
        server["url"], json=body, headers={**headers, "Origin": f"http://{own}"}
    )

    assert rebound.status_code == 421
    assert rebound.json()["error"].startswith("this server does not answer to Host 'evil.example'")
    assert foreign.status_code == 403
    assert foreign.json()["error"].startswith("requests from Origin 'http://evil.example'")
    assert own_origin.status_code not in (401, 403, 421)
    portless = httpx2.post(
        server["url"], json=body, headers={**headers, "Origin": "http://localhost"}
    )
    shouting = httpx2.post(server["url"], json=body, headers={**headers, "Host": own.upper()})
    assert portless.status_code == 403  # a page on another local port is not this server
    assert shouting.status_code not in (401, 403, 421)  # host names ignore case


# --------------------------------------------------------------------------- snapshot swaps


def test_snapshots_swap_under_load_without_a_failed_call(workdir, isolated):
    store = Store(str(isolated / "store"))
    published = [publish(workdir, store).snapshot_id]
    cache = isolated / "serve"
    holder = SnapshotHolder(store=store, cache=cache, interval=0.2)
    holder.start()
    server = create_server(holder)
    failed, seen, answered = [], set(), [0]
    stop = asyncio.Event()
    work = [
        ("search", {"query": "crash on startup", "top_k": 3}),
        ("fetch", {"handles": [R + "#7", R + "#2"]}),
        ("status", {}),
        ("search", {"type": "issue", "top_k": 5}),
    ]

    async def client(offset):
        async with mcp.Client(server) as session:
            n = offset
            while not stop.is_set():
                tool, arguments = work[n % len(work)]
                n += 1
                result = await session.call_tool(tool, arguments)
                answered[0] += 1
                if result.is_error:
                    failed.append((tool, result.content[0].text))
                else:
                    seen.add(result.structured_content["snapshot_id"])

    async def until(condition, seconds=60):
        deadline = time.monotonic() + seconds
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.05)

    def republish(version):
        edit_issue_7(workdir, version)
        return publish(workdir, store).snapshot_id

    async def scenario():
        clients = [asyncio.create_task(client(i)) for i in range(4)]
        try:
            await until(lambda: published[0] in seen)
            for version in (1, 2):
                published.append(await asyncio.to_thread(republish, version))
                await until(lambda: published[-1] in seen)
            await asyncio.sleep(0.3)
        finally:
            stop.set()
            await asyncio.gather(*clients)

    try:
        asyncio.run(scenario())
        status = answer(server, "status")
    finally:
        holder.stop()

    assert failed == []
    assert answered[0] > 20
    assert seen == set(published)
    assert status["snapshot_id"] == published[-1]
    assert status["sync"]["syncs"] == 3
    # the cache keeps the version served and the one before it; older ones are gone
    assert sorted(p.name for p in (cache / "snapshots").iterdir()) == published[-2:]
    assert live_root(cache).name == published[-1]


def test_an_empty_store_is_served_once_a_snapshot_is_published(workdir, isolated):
    store = Store(str(isolated / "store"))
    store.create()  # empty, not missing
    holder = SnapshotHolder(store=store, cache=isolated / "serve", interval=300)
    holder.start()
    server = create_server(holder)
    try:
        empty = answer(server, "status")
        refused = failure(server, "search", query="crash")
        snapshot_id = publish(workdir, store).snapshot_id
        swapped = holder.sync_once()
        serving = answer(server, "status")
        found = answer(server, "search", query="crash on startup", top_k=1)
    finally:
        holder.stop()

    assert (empty["snapshot_id"], empty["snapshot_age_seconds"]) == (None, None)
    reason = "no snapshot yet: the store holds none; publish one, the server picks it up"
    assert empty["status"] == reason
    assert refused == f"Error executing tool search: {reason}"
    assert swapped is True
    assert (serving["status"], serving["snapshot_id"]) == ("serving", snapshot_id)
    assert found["snapshot_id"] == snapshot_id
    assert [r["handle"] for r in found["results"]] == [R + "#1"]


def test_a_failed_sync_keeps_serving_the_old_snapshot(workdir, isolated):
    store = Store(str(isolated / "store"))
    first = publish(workdir, store).snapshot_id
    cache = isolated / "serve"
    holder = SnapshotHolder(store=store, cache=cache, interval=300)
    holder.start()
    server = create_server(holder)
    try:
        edit_issue_7(workdir, 1)
        publish(workdir, store)
        fresh = (
            read_manifest(store, latest_ref(store)).blobs()
            - read_manifest(store, snapshot_id=first).blobs()
        )
        store.put(blob_path(sorted(fresh)[0]), b"not what the manifest says")
        swapped = holder.sync_once()
        status = answer(server, "status")
        found = answer(server, "fetch", handles=[R + "#7"])
    finally:
        holder.stop()

    assert swapped is False
    assert status["snapshot_id"] == first
    assert "fails verification" in status["sync"]["last_error"]
    assert found["snapshot_id"] == first
    assert found["items"][0]["title"] == "Question 7 about plugin loading"
    assert sorted(p.name for p in (cache / "snapshots").iterdir()) == [first]
