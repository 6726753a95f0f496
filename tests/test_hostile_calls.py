"""Hostile and clumsy calls against a real MCP server and the real CLI on a small
snapshot: every call gets an answer within its budget or one clear error line, never a
traceback, and the server keeps answering with its memory where it was.

The arguments are generated (hypothesis): known arguments with values of every wrong
kind and size, unknown arguments, huge lists and strings, control characters, dates of
any year, numbers that overflow, booleans where numbers go. The cases the issue named
are fixed examples beside them."""

from __future__ import annotations

import asyncio
import json
import os

import mcp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.index.build import build
from ghindex.serve import SnapshotHolder, budget, create_server, open_snapshot
from testkit.github_server import comment_node, issue_node
from testkit.state import settings_for, store_issues

R = "octo/hello"
TOOLS = ("search", "fetch", "related", "context", "sql", "status")
BUSY = 2_000  # comments on one issue


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory):
    """120 issues with long bodies, #1 with 2,000 comments."""
    config = settings_for(tmp_path_factory.mktemp("hostile") / "work")
    busy = issue_node(
        1,
        title="Crash on startup",
        body="The app crashes on startup. " * 20,
        comments=[comment_node(1000 + i, body=f"Same here ({i}).") for i in range(BUSY)],
    )
    others = [
        issue_node(n, title=f"Question {n} about caching", body="How does the cache work? " * 40)
        for n in range(2, 121)
    ]
    store_issues(config, [busy, *others])
    build(config)
    return config.workdir


@pytest.fixture(scope="module")
def server(snapshot_dir):
    holder = SnapshotHolder(current=open_snapshot(snapshot_dir, immutable=True))
    yield create_server(holder)
    holder.current.close()


def call(server, tool: str, arguments: dict):
    async def go():
        async with mcp.Client(server) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(go())


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def check(result) -> dict | str:
    """One call's outcome: the answer, within the budget, or one error line."""
    text = result.content[0].text if result.content else ""
    assert "Traceback" not in text
    if result.is_error:
        assert text and "\n" not in text, text[:500]
        assert len(text) < 2_000
        assert "unexpected" not in text.lower(), text
        return text
    body = result.structured_content
    assert budget.cost(body) <= budget.DEFAULT_TOKENS, (budget.cost(body), text[:300])
    assert "snapshot_id" in body
    return body


def normal_search_works(server) -> None:
    body = check(call(server, "search", {"query": "crash on startup", "mode": "sparse"}))
    assert body["results"][0]["handle"] == R + "#1"


# --------------------------------------------------------------------------- the cases named


NAMED = [
    ("search", {"labels": ["x"] * 50_000}, "at most 20 items"),
    ("search", {"labels": ["x"] * 20_000}, "at most 20 items"),
    ("search", {"query": "q" * 2_700_000}, "at most 4000 characters"),
    ("search", {"query": "crash", "since": "0999-01-01"}, None),
    ("search", {"query": "crash", "since": "0001-01-01T00:00:00+05:00"}, None),
    ("search", {"query": "crash", "until": "9999-12-31T23:59:59-05:00"}, None),
    ("search", {"query": "#99999999999999999999999999"}, None),
    ("search", {"query": "crash", "top_k": True}, "valid integer"),
    ("search", {"query": "crash", "top_k": "5"}, "valid integer"),
    ("fetch", {"handles": [R + "#99999999999999999999999"]}, None),
    ("fetch", {"handles": [R + "#1"], "max_chars": 20_000}, None),
    ("fetch", {"handles": [f"{R}#{n}" for n in range(1, 51)]}, None),
    ("sql", {"query": "SELECT * FROM issues"}, None),
    ("sql", {"query": "SELECT len(range(200000000))"}, "memory limit"),
    ("sql", {"query": "CHECKPOINT"}, "refused"),
    ("sql", {"query": "VACUUM"}, "refused"),
    ("sql", {"query": "CREATE TEMP TABLE t AS SELECT 1"}, "refused"),
    ("sql", {"query": "PRAGMA threads=64"}, "refused"),
    ("search", {"query": "crash", "top_k": 50}, None),
    ("search", {"query": "cache", "top_k": 50, "graph_expand": True, "graph_hops": 2}, None),
    ("context", {"query": "crash", "max_tokens": 20_000}, None),
    ("related", {"handle": R + "#1", "hops": 2}, None),
]


@pytest.mark.parametrize(("tool", "arguments", "expected"), NAMED)
def test_each_named_case_is_a_bounded_answer_or_one_clear_line(server, tool, arguments, expected):
    outcome = check(call(server, tool, arguments))

    if expected is None:
        assert isinstance(outcome, dict), outcome
    else:
        assert isinstance(outcome, str) and expected in outcome, outcome


def test_a_busy_issue_comes_in_whole_comments_with_the_way_on(server):
    first = check(call(server, "fetch", {"handles": [R + "#1"]}))
    (item,) = first["items"]
    given = len(item["comments"])
    assert 0 < given < BUSY and all(c["text"] for c in item["comments"])
    assert item["omitted"] == {"comments": BUSY - given}
    assert first["next"]["handles"] == [R + "#1"]
    assert first["next"]["skip"].startswith(f"{given + 1}.")  # a token bound to the snapshot

    second = check(call(server, "fetch", first["next"]))
    (more,) = second["items"]
    assert more["text_skipped"] and more["text"] == ""
    assert more["comments"][0]["text"] == f"Same here ({given})."


def test_sql_rows_are_cut_by_the_budget_and_continue_where_they_stopped(server):
    query = "SELECT number, title, body FROM issues ORDER BY number"
    first = check(call(server, "sql", {"query": query, "max_rows": 1000}))
    kept = first["next_offset"]
    assert first["truncated"] and f'offset="{kept}"' in first["truncated_reason"]
    assert int(kept.split(".")[0]) == first["row_count"] == len(first["rows"]) < 120

    rest = check(call(server, "sql", {"query": query, "max_rows": 1000, "offset": kept}))
    assert rest["rows"][0][0] == first["rows"][-1][0] + 1


def test_search_results_are_cut_whole_and_continue_with_offset(server, monkeypatch):
    monkeypatch.setenv("GHINDEX_MCP_MAX_TOKENS", "1000")
    first = check(call(server, "search", {"query": "cache", "mode": "sparse", "top_k": 50}))
    offset = int(first["next_offset"].split(".")[0])  # a token: the position, and a tag
    assert first["truncated"] and offset == len(first["results"])
    assert budget.cost(first) <= 1000

    monkeypatch.delenv("GHINDEX_MCP_MAX_TOKENS")
    whole = check(call(server, "search", {"query": "cache", "mode": "sparse", "top_k": 50}))
    token = first["next_offset"]
    more = check(
        call(server, "search", {"query": "cache", "mode": "sparse", "top_k": 5, "offset": token})
    )
    assert [r["handle"] for r in more["results"]] == [
        r["handle"] for r in whole["results"][offset : offset + 5]
    ]


# --------------------------------------------------------------------------- generated calls

_TEXT = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=300),
    st.sampled_from(
        ["\x1b]52;c;aGk=\x07", "\u202etxt", "#1", "#99999999999999999999", "'; DROP TABLE x"]
    ),
    st.integers(1, 6).map(lambda n: "x" * 10**n),
)
_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    _TEXT,
    st.lists(_TEXT, max_size=30),
    st.integers(0, 5).map(lambda n: ["bug"] * 10**n),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.dates().map(str),
    st.datetimes().map(lambda d: d.isoformat()),
)
_ARGUMENTS = {
    "search": [
        "query",
        "labels",
        "repo",
        "type",
        "state",
        "since",
        "until",
        "top_k",
        "mode",
        "sort",
        "offset",
        "graph_expand",
        "graph_hops",
        "author",
        "path_prefix",
    ],
    "fetch": ["handles", "max_chars", "skip"],
    "related": ["handle", "hops", "offset"],
    "context": ["query", "max_tokens", "since", "labels"],
    "sql": ["query", "max_rows", "offset"],
    "status": [],
}


@st.composite
def tool_calls(draw):
    tool = draw(st.sampled_from(TOOLS))
    known = _ARGUMENTS[tool]
    names = draw(st.lists(st.sampled_from(known), unique=True, max_size=4)) if known else []
    arguments = {name: draw(_VALUE) for name in names}
    if draw(st.booleans()) and tool in ("search", "context") and "query" not in arguments:
        arguments["query"] = draw(_TEXT)
    if draw(st.integers(0, 9)) == 0:
        arguments[draw(st.text(min_size=1, max_size=20))] = draw(_VALUE)
    return tool, arguments


@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(tool_calls())
def test_any_call_is_a_bounded_answer_or_one_clear_line(server, generated):
    tool, arguments = generated

    check(call(server, tool, arguments))


def test_the_server_answers_and_its_memory_stays_after_the_hostile_calls(server):
    normal_search_works(server)  # loads the model and the index once
    before = rss_mb()
    for tool, arguments, _ in NAMED * 2:
        check(call(server, tool, arguments))

    normal_search_works(server)
    assert rss_mb() - before < 300


# --------------------------------------------------------------------------- the CLI

_CLI = st.one_of(
    st.tuples(st.just("search"), _TEXT.filter(lambda t: not t.startswith("-"))),
    st.tuples(st.just("show"), _TEXT.filter(lambda t: not t.startswith("-"))),
    st.tuples(st.just("sql"), _TEXT.filter(lambda t: not t.startswith("-"))),
    st.tuples(st.just("search"), st.just("crash"), st.just("--since"), _TEXT),
    st.tuples(st.just("search"), st.just("crash"), st.just("-k"), _TEXT),
    st.tuples(st.just("related"), _TEXT.filter(lambda t: not t.startswith("-"))),
)


@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_CLI)
def test_any_command_line_is_an_answer_or_one_clear_line(snapshot_dir, run, arguments):
    result = run(*arguments, "--snapshot", str(snapshot_dir))

    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 1:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for stream in (result.stdout, result.stderr):
        assert "\x1b" not in stream and "\u202e" not in stream


def test_json_output_of_a_hostile_query_is_exact(snapshot_dir, run):
    query = "SELECT '\x1b]52;c;aGk=\x07\u202e' AS v"
    result = run("sql", query, "--snapshot", str(snapshot_dir), "--json")

    assert json.loads(result.stdout)["rows"] == [{"v": "\x1b]52;c;aGk=\x07\u202e"}]


def test_show_prints_whole_comments_and_how_to_read_on(snapshot_dir, run):
    first = run("show", R + "#1", "--snapshot", str(snapshot_dir))

    assert first.exit_code == 0, first.stderr
    printed = first.stdout.count("\n--- ")
    assert 0 < printed < BUSY and "\n--- someone\n\n" not in first.stdout  # no empty stubs
    hint = first.stdout.rstrip().splitlines()[-1]
    assert hint.startswith(f"[{BUSY - printed + 1:,} comments more: ghindex show {R}#1 --skip ")
    skip = hint.rsplit(" ", 1)[-1].rstrip("]")

    second = run("show", R + "#1", "--skip", skip, "--snapshot", str(snapshot_dir))
    assert f"Same here ({int(skip) - 1})." in second.stdout
    assert f"Same here ({int(skip) - 2})." not in second.stdout
