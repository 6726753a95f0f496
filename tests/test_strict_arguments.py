"""Arguments are read one strict way at every door (MCP, CLI, Python API): numbers in
handles in ASCII digits only, flags that are true or false, dates in ISO form, each key
of a tool's arguments once, and continuations as tokens bound to their snapshot.

Each family's members are generated (hypothesis): digits of every script (`²`, `①`,
`١٢`) in every place a handle holds a number; every JSON value that is not a boolean
for `rerank` and `graph_expand`; numbers, numeric text, booleans and dates in other
digits for `since` and `until`; any argument given twice with two values, over a real
HTTP transport (the SDK's in-process client sends no JSON text); continuations
followed to the end and replayed after the served snapshot changed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import httpx2
import mcp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ghindex.api as gh
from ghindex.errors import GhindexError
from ghindex.index.build import build
from ghindex.serve import SnapshotHolder, create_server, open_snapshot
from testkit.github_server import comment_node, issue_node
from testkit.mcp_load import ACCEPT, HANDSHAKE, http_server
from testkit.state import settings_for, store_issues

pytestmark = pytest.mark.slow  # a built snapshot, and a server process for the JSON texts

R = "octo/hello"
EXAMPLES = int(os.environ.get("GHINDEX_EXAMPLES", "15"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory):
    """40 issues in octo/hello, #12 among them."""
    config = settings_for(tmp_path_factory.mktemp("strict") / "work")
    nodes = [
        issue_node(n, title=f"Cache question {n}", body="How does the cache work? " * 30)
        for n in range(1, 41)
    ]
    store_issues(config, nodes)
    build(config)
    return config.workdir


@pytest.fixture(scope="module")
def holder(snapshot_dir):
    holder = SnapshotHolder(current=open_snapshot(snapshot_dir, immutable=True))
    yield holder
    holder.stop()


@pytest.fixture(scope="module")
def server(holder):
    return create_server(holder)


@pytest.fixture(scope="module")
def people_dir(snapshot_dir, tmp_path_factory):
    """A copy for the API: one process holds a database file open with one
    configuration, and the server's is another."""
    copy = tmp_path_factory.mktemp("strict-people") / "work"
    shutil.copytree(snapshot_dir, copy)
    return copy


@pytest.fixture(scope="module")
def cli_dir(snapshot_dir, tmp_path_factory):
    """A copy for the CLI (in this process too)."""
    copy = tmp_path_factory.mktemp("strict-cli") / "work"
    shutil.copytree(snapshot_dir, copy)
    return copy


@pytest.fixture(scope="module")
def reader(people_dir):
    reader = gh.open(people_dir)
    yield reader
    reader.close()


@pytest.fixture(scope="module")
def http_url(snapshot_dir, tmp_path_factory):
    with http_server(snapshot_dir, tmp_path_factory.mktemp("strict-http")) as (_, url):
        yield url


def call(server, tool: str, arguments: dict):
    async def go():
        async with mcp.Client(server) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(go())


def refused(result) -> str:
    """A call's one-line refusal, without the SDK's "Error executing tool X: " before it;
    a crash the SDK masks ("Error executing tool X" and nothing said) fails."""
    text = result.content[0].text
    assert result.is_error, text[:300]
    said = re.sub(r"^Error executing tool \w+(: )?", "", text)
    assert said and "\n" not in said, text
    assert "unexpected" not in said.lower(), text
    return said


# --------------------------------------------------------------------------- handles

_FOREIGN = st.characters(categories=["Nd", "No", "Nl"]).filter(lambda c: not c.isascii())
_NUMBER = st.tuples(st.text(alphabet="0123456789", max_size=2), _FOREIGN).map("".join)
_HANDLE = st.tuples(st.sampled_from(["{}", "#{}", R + "#{}", R + "#{}/comment/5"]), _NUMBER).map(
    lambda p: p[0].format(p[1])
)


@SETTINGS
@given(_HANDLE)
def test_a_number_in_other_digits_is_refused_at_every_door(server, reader, cli_dir, run, handle):
    related = refused(call(server, "related", {"handle": handle}))
    assert "ASCII digits (0-9)" in related
    fetched = call(server, "fetch", {"handles": [handle]})
    assert not fetched.is_error and fetched.structured_content["not_found"] == [handle]
    assert fetched.structured_content["items"] == []

    for door in (reader.fetch, reader.related):
        with pytest.raises(GhindexError, match=r"ASCII digits \(0-9\)"):
            door(handle)
    for command in ("show", "related"):
        result = run(command, handle, "--snapshot", str(cli_dir))
        assert result.exit_code == 1 and "ASCII digits (0-9)" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_same_number_in_ascii_digits_is_found(server, reader):
    assert call(server, "fetch", {"handles": ["12"]}).structured_content["items"][0]["handle"] == (
        R + "#12"
    )
    assert reader.related("#12")["resolved"] == R + "#12"


# --------------------------------------------------------------------------- flags

_NOT_A_FLAG = st.one_of(
    st.sampled_from(["true", "false", "True", "1", "0", "yes", "on", ""]),
    st.integers(),
    st.floats(allow_nan=False),
    st.none(),
    st.lists(st.booleans(), max_size=2),
    st.text(max_size=8),
)


@SETTINGS
@given(st.sampled_from(["rerank", "graph_expand"]), _NOT_A_FLAG)
def test_a_flag_is_true_or_false_and_nothing_else(server, reader, name, value):
    text = refused(call(server, "search", {"query": "cache", name: value}))
    assert text.startswith(f"search: argument {name}: ")

    keyword = {"rerank": "rerank"}.get(name)
    if keyword:  # the API's search takes rerank (graph expansion is the MCP tool's)
        with pytest.raises(GhindexError, match="rerank must be true or false"):
            reader.search("cache", rerank=value)


# --------------------------------------------------------------------------- dates

_NOT_A_DATE = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.integers(0, 2**34).map(str),
    st.sampled_from(["2024", "20240101", "2024/01/01", "01-02-2024", "yesterday", "٢٠٢٤-٠١-٠١"]),
    st.dates().map(
        lambda d: d.isoformat().translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    ),
)


@SETTINGS
@given(st.sampled_from(["since", "until"]), _NOT_A_DATE)
def test_a_date_is_iso_text_and_never_a_number(server, reader, cli_dir, run, name, value):
    text = refused(call(server, "search", {"query": "cache", name: value}))
    assert text.startswith(f"search: argument {name}: {name} must be an ISO date or time")

    with pytest.raises(GhindexError, match="must be an ISO date or time"):
        reader.search("cache", **{name: value})
    if isinstance(value, str) and value and not value.startswith("-"):
        result = run("search", "cache", f"--{name}", value, "--snapshot", str(cli_dir))
        assert result.exit_code == 2 and "must be an ISO date or time" in result.stderr


@SETTINGS
@given(st.dates(), st.sampled_from(["", "T12:00:00Z", "T08:30:00+02:00"]))
def test_an_iso_date_is_taken_at_every_door(server, reader, day, time_part):
    moment = day.isoformat() + time_part
    assert not call(server, "search", {"query": "cache", "since": moment}).is_error
    reader.search("cache", since=moment, mode="sparse")


# --------------------------------------------------------------------------- keys given twice

_VALUES = st.one_of(st.booleans(), st.integers(1, 20), st.text(max_size=10))
_CALLS = st.sampled_from(
    [
        ("search", {"query": "cache", "top_k": 3, "rerank": False}),
        ("sql", {"query": "SELECT 1", "max_rows": 5}),
        ("related", {"handle": R + "#1", "hops": 1}),
        ("fetch", {"handles": [R + "#1"], "max_chars": 1000}),
    ]
)


def _post(url: str, text: str) -> dict:
    headers = dict(
        ACCEPT, **{"mcp-protocol-version": HANDSHAKE, "content-type": "application/json"}
    )
    answered = httpx2.post(url, content=text.encode(), headers=headers, timeout=60)
    assert answered.status_code == 200, answered.text[:300]
    body = answered.text
    if answered.headers["content-type"].startswith("text/event-stream"):
        body = next(line[5:] for line in body.splitlines() if line.startswith("data:"))
    return json.loads(body)


def _arguments_text(arguments: dict, key: str, first, second) -> str:
    """`arguments` as JSON text with `key` given twice: `first`, then `second`."""
    pairs = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in arguments.items() if k != key]
    pairs += [f"{json.dumps(key)}: {json.dumps(v)}" for v in (first, second)]
    return "{" + ", ".join(pairs) + "}"


def _tool_call(tool: str, arguments_text: str) -> str:
    return (
        '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": '
        f"{json.dumps(tool)}, "
        f'"arguments": {arguments_text}}}}}'
    )


@SETTINGS
@given(_CALLS, st.data())
def test_a_key_given_twice_is_refused_not_read_as_the_last(http_url, chosen, data):
    tool, arguments = chosen
    key = data.draw(st.sampled_from(sorted(arguments)))
    first, second = data.draw(_VALUES), data.draw(_VALUES)

    answer = _post(http_url, _tool_call(tool, _arguments_text(arguments, key, first, second)))

    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"] == (
        f"{tool}: key {key!r} is given more than once in the arguments: give each once"
    )


def test_a_key_given_twice_is_refused_over_stdio(cli_dir):
    lines = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": HANDSHAKE,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        ),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _tool_call("search", '{"query": "cache", "rerank": false, "rerank": true}'),
    ]
    argv = [sys.executable, "-m", "ghindex", "serve", "--snapshot", str(cli_dir)]
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    stop = threading.Timer(120, process.kill)
    stop.start()
    try:
        process.stdin.write("\n".join(lines) + "\n")
        process.stdin.flush()
        answers = {}
        while 3 not in answers:
            line = process.stdout.readline()
            assert line, "the server ended without answering"
            message = json.loads(line)
            answers[message.get("id")] = message
    finally:
        stop.cancel()
        process.kill()
        process.wait()

    assert answers[3]["result"]["isError"] is True
    assert answers[3]["result"]["content"][0]["text"] == (
        "search: key 'rerank' is given more than once in the arguments: give each once"
    )


def test_arguments_with_each_key_once_are_answered_over_http(http_url):
    answer = _post(http_url, _tool_call("sql", json.dumps({"query": "SELECT 1"})))

    assert answer["result"]["isError"] is False
    assert answer["result"]["structuredContent"]["rows"] == [[1]]


# --------------------------------------------------------------------------- continuations

_CONTINUED = st.sampled_from(
    [
        ("search", {"query": "cache", "mode": "sparse", "top_k": 50}, "results"),
        ("search", {"mode": "sparse", "top_k": 50}, "results"),
        (
            "sql",
            {"query": "SELECT number, repeat('x', 400) FROM issues ORDER BY 1", "max_rows": 1000},
            "rows",
        ),
    ]
)


@settings(SETTINGS, max_examples=max(EXAMPLES // 3, 5))
@given(_CONTINUED, st.integers(1_000, 4_000))
def test_every_continuation_given_is_taken_to_the_end(
    server, monkeypatch, continued, budget_tokens
):
    tool, arguments, key = continued
    monkeypatch.setenv("GHINDEX_MCP_MAX_TOKENS", str(budget_tokens))
    whole, given_offset = [], None
    for _ in range(100):
        result = call(
            server, tool, dict(arguments, **({"offset": given_offset} if given_offset else {}))
        )
        assert not result.is_error, result.content[0].text
        body = result.structured_content
        whole += [json.dumps(entry) for entry in body[key]]
        given_offset = body.get("next_offset")
        if given_offset is None:
            break
        assert isinstance(given_offset, str)
        assert f'offset="{given_offset}"' in body["truncated_reason"]

    assert given_offset is None
    assert len(whole) == len(set(whole)) == 40


_NOT_A_TOKEN = st.one_of(
    st.integers(0, 10**6),
    st.text(max_size=20),
    st.from_regex(r"\A[0-9]{1,3}\.[0-9a-f]{8}\Z"),  # the form, without this snapshot's tag
)


@SETTINGS
@given(st.sampled_from(["search", "sql", "related", "fetch"]), _NOT_A_TOKEN)
def test_an_offset_that_no_answer_gave_is_refused_in_one_line(server, tool, offset):
    arguments = {
        "search": {"query": "cache"},
        "sql": {"query": "SELECT 1"},
        "related": {"handle": R + "#1"},
        "fetch": {"handles": [R + "#1"]},
    }[tool]
    name, field = ("skip", "next.skip") if tool == "fetch" else ("offset", "next_offset")

    text = refused(call(server, tool, dict(arguments, **{name: offset})))

    assert text.startswith(f"{tool}: ")
    assert field in text or "another snapshot" in text
    if tool == "fetch":
        assert text.endswith("fetch again without skip")


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search", {"query": "cache", "mode": "sparse", "top_k": 50}),
        ("sql", {"query": "SELECT repeat('x', 400) FROM issues", "max_rows": 1000}),
        ("fetch", {"handles": [R + f"#{n}" for n in range(1, 41)]}),
    ],
)
def test_a_continuation_from_another_snapshot_is_refused_saying_to_ask_again(
    snapshot_dir, isolated, monkeypatch, tool, arguments
):
    # the same data built again is another snapshot: a continuation of it names other rows
    other = isolated / "rebuilt"
    shutil.copytree(snapshot_dir, other)
    manifest_path = next(other.rglob("manifest.json"))
    manifest = json.loads(manifest_path.read_text())
    manifest["build_id"], manifest["built_at"] = "rebuilt", "2030-01-01T00:00:00+00:00"
    manifest_path.write_text(json.dumps(manifest))
    holder = SnapshotHolder(current=open_snapshot(snapshot_dir, immutable=True))
    server = create_server(holder)
    monkeypatch.setenv("GHINDEX_MCP_MAX_TOKENS", "1000")
    first = call(server, tool, arguments).structured_content
    name, token = ("skip", first["next"]["skip"]) if tool == "fetch" else ("offset", None)
    token = token or first["next_offset"]
    assert not call(server, tool, dict(arguments, **{name: token})).is_error

    holder.replace(open_snapshot(other, immutable=True))
    text = refused(call(server, tool, dict(arguments, **{name: token})))
    holder.stop()

    again = {"search": "search again", "sql": "run it again", "fetch": "fetch again"}[tool]
    assert "continues an answer from another snapshot" in text
    assert text.endswith(f"{again} without {name}")


# --------------------------------------------------------------------------- fetch's way on

BUSY = 30  # comments on #1 of the busy snapshot


@pytest.fixture(scope="module")
def busy_server(tmp_path_factory):
    """#1 with 30 comments, #2 and #3 with long bodies."""
    config = settings_for(tmp_path_factory.mktemp("strict-busy") / "work")
    busy = issue_node(
        1,
        body="A busy thread. " * 20,
        comments=[comment_node(500 + i, body=f"Same here ({i}). " * 12) for i in range(BUSY)],
    )
    store_issues(config, [busy] + [issue_node(n, body="Long text. " * 150) for n in (2, 3)])
    build(config)
    holder = SnapshotHolder(current=open_snapshot(config.workdir, immutable=True))
    yield create_server(holder)
    holder.stop()


_FETCHED = st.lists(
    st.sampled_from([R + "#1", R + "#2", R + "#3", R + "#9"]), min_size=1, max_size=4, unique=True
)


@settings(SETTINGS, max_examples=max(EXAMPLES // 3, 5))
@given(_FETCHED, st.integers(200, 6_000), st.integers(1_000, 3_000))
def test_every_fetch_continuation_given_is_taken_to_the_end(
    busy_server, monkeypatch, handles, max_chars, budget_tokens
):
    monkeypatch.setenv("GHINDEX_MCP_MAX_TOKENS", str(budget_tokens))
    arguments: dict = {"handles": handles, "max_chars": max_chars}
    read, comments = [], []
    for _ in range(BUSY * 3):
        result = call(busy_server, "fetch", arguments)
        assert not result.is_error, result.content[0].text
        body = result.structured_content
        for item in body["items"]:
            read.append(item["handle"])
            comments += [int(c["url"].rsplit("-", 1)[1]) - 500 for c in item.get("comments", [])]
            assert isinstance(item.get("next_skip", ""), str)
        onward = body.get("next")
        if onward is None:
            break
        assert isinstance(onward["skip"], str)  # a token, never a number
        arguments = dict(arguments, **onward)

    assert body.get("next") is None
    assert sorted(set(read)) == sorted(h for h in handles if h != R + "#9")
    if R + "#1" in handles:  # every comment, once, in order
        assert comments == list(range(BUSY))
