"""The vocabulary: handles made and read back, edge kinds as documented, document types as
the MCP tools offer them, and table names as a fresh state database holds them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from ghindex.analysis import schema_doc
from ghindex.query import graph
from ghindex.state import edges as stored_edges
from ghindex.state.database import open_state
from ghindex.vocabulary import edges, handles, tables, types

SHA = "0123456789abcdef0123456789abcdef01234567"
ITEM = "owner/repo#123"

# form -> (the handle as the contract's table writes it, the same made by its builder)
CONTRACT = {
    "item": (ITEM, handles.item_handle("owner/repo", 123)),
    "comment": (f"{ITEM}/comment/456", handles.comment_handle(ITEM, 456)),
    "review": (f"{ITEM}/review/456", handles.review_handle(ITEM, 456)),
    "review_comment": (f"{ITEM}/review-comment/456", handles.review_comment_handle(ITEM, 456)),
    "release": ("owner/repo@release/v1.2.0", handles.release_handle("owner/repo", "v1.2.0")),
    "doc": ("owner/repo:path/to/file.md", handles.doc_handle("owner/repo", "path/to/file.md")),
    "wiki": ("owner/repo:wiki/Page-Name", handles.wiki_handle("owner/repo", "Page-Name")),
    "commit": (f"owner/repo@{SHA}", handles.commit_handle("owner/repo", SHA)),
    "commit_file": (
        f"owner/repo@{SHA}:path/to/file",
        handles.commit_file_handle("owner/repo", SHA, "path/to/file"),
    ),
}


@pytest.mark.parametrize("form", list(CONTRACT))
def test_each_builder_makes_the_contracts_handle_and_form_of_reads_it_back(form):
    written, built = CONTRACT[form]
    assert built == written
    assert handles.form_of(built) == form


def test_forms_cover_the_contracts_table():
    assert sorted(handles.FORMS) == sorted(CONTRACT)
    assert handles.form_of("owner/repo") is None
    assert handles.form_of("#123") is None


def test_sub_items_read_back_to_their_item_in_python_and_in_sql():
    con = duckdb.connect()
    for form, (_, handle) in CONTRACT.items():
        item = ITEM if form in ("comment", "review", "review_comment") else handle
        assert handles.parent_item(handle) == item
        sql = "SELECT regexp_replace(?, ?, '\\1')"
        assert con.execute(sql, [handle, handles.SUB_ITEM]).fetchall() == [(item,)]
    assert handles.parent_item("owner/repo#123/comment/IC_kwDOAbc") == ITEM  # a node id


def test_an_item_reads_back_as_an_issue_reference():
    assert handles.ISSUE_REF.match(CONTRACT["item"][1]).groups() == ("owner/repo", "123")
    assert handles.ISSUE_REF.match("#123").groups() == (None, "123")
    assert handles.ISSUE_REF.match("owner/repo#12a") is None


def test_commits_read_back_by_sha_and_by_prefix():
    commit, commit_file = CONTRACT["commit"][1], CONTRACT["commit_file"][1]
    assert handles.COMMIT_REF.match(commit).groups() == ("owner/repo", SHA)
    assert handles.COMMIT_REF.match(commit_file).groups() == ("owner/repo", SHA)
    assert handles.COMMIT_REF.match(f"owner/repo@{SHA[:7].upper()}").groups() == (
        "owner/repo",
        SHA[:7].upper(),
    )
    assert handles.COMMIT_REF.match(f"owner/repo@{SHA[:6]}") is None
    assert handles.COMMIT_REF.match(CONTRACT["release"][1]) is None
    assert re.match(handles.FULL_COMMIT, commit)
    assert not re.match(handles.FULL_COMMIT, commit_file)
    assert handles.SHA.match(SHA[:7]) and handles.SHA.match(SHA)
    assert not handles.SHA.match(SHA[:6]) and not handles.SHA.match("release")


def test_a_wiki_page_reads_back_to_its_name():
    assert handles.wiki_page_name(CONTRACT["wiki"][1]) == "Page-Name"


def test_pathlike_text():
    for text in ("README.md", "src/app.py", "docs/guide", "path/to/file.md"):
        assert handles.PATHLIKE.match(text), text
    for text in ("fix the bug", "README", "#123"):
        assert not handles.PATHLIKE.match(text), text


def test_edge_kinds_are_the_ones_schema_doc_documents_in_their_order():
    section = schema_doc.render().split("## Edge kinds", 1)[1]
    documented = re.findall(r"^\| `(\w+)` \| (.+) \|$", section, re.M)
    assert documented == list(edges.MEANINGS.items())
    assert [kind for kind, _ in documented] == list(edges.KINDS)
    assert graph.KINDS is edges.KINDS


def test_undoing_kinds_undo_kinds_and_writers_refuse_unknown_kinds():
    assert set(edges.UNDOES) | set(edges.UNDOES.values()) <= set(edges.KINDS)
    assert {kind for kind, _, _ in stored_edges._EVENTS.values()} <= set(edges.KINDS)
    assert edges.check_kind("closes") == "closes"
    with pytest.raises(ValueError, match="unknown edge kind 'fixes'"):
        edges.check_kind("fixes")


def test_filter_types_are_the_mcp_tools_type_enum():
    surface = json.loads(Path(__file__).with_name("mcp_tools.json").read_text())
    enums = [
        choice["enum"]
        for tool in surface
        for choice in tool["input_schema"]["properties"].get("type", {}).get("anyOf", [])
        if "enum" in choice
    ]
    assert enums and all(enum == list(types.FILTER_TYPES) for enum in enums)
    assert (*types.DOCUMENT_TYPES, "commit") == types.FILTER_TYPES


def test_a_fresh_state_database_holds_exactly_the_vocabulary_tables(tmp_path):
    con = open_state(tmp_path / "state.duckdb")
    try:
        found = con.execute(
            "SELECT table_type, table_name FROM information_schema.tables "
            "WHERE table_schema = 'main' ORDER BY table_name"
        ).fetchall()
    finally:
        con.close()
    assert [name for kind, name in found if kind == "BASE TABLE"] == sorted(
        [*tables.TABLES, tables.MIGRATION_LOG]
    )
    assert [name for kind, name in found if kind == "VIEW"] == sorted(tables.VIEWS)


def test_tables_and_views_are_listed_in_the_order_the_migrations_create_them():
    relations = schema_doc.relations()
    assert tuple(r["name"] for r in relations if r["kind"] == "table") == tables.TABLES
    assert tuple(r["name"] for r in relations if r["kind"] == "view") == tables.VIEWS


def test_the_cli_options_and_the_mcp_arguments_of_filters_come_from_one_table():
    from ghindex.cli import cli
    from ghindex.query.filters import CONTEXT_FILTERS, OPTIONS, SEARCH_FILTERS

    surface = {
        tool["name"]: tool["input_schema"]["properties"]
        for tool in json.loads(Path(__file__).with_name("mcp_tools.json").read_text())
    }
    for tool, taken in (("search", SEARCH_FILTERS), ("context", CONTEXT_FILTERS)):
        filters = {name: p for name, p in surface[tool].items() if name in OPTIONS}
        assert list(filters) == list(taken)
        assert {name: p["description"] for name, p in filters.items()} == {
            name: OPTIONS[name].meaning for name in taken
        }
    for command, taken in (("search", tuple(OPTIONS)), ("context", CONTEXT_FILTERS)):
        flags = {
            p.opts[0]: (p.name, p.help)
            for p in cli.commands[command].params
            if p.opts[0] in {o.cli_flag for o in OPTIONS.values()}
        }
        assert flags == {
            OPTIONS[name].cli_flag: (OPTIONS[name].field, OPTIONS[name].meaning) for name in taken
        }
