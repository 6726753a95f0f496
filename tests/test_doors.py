"""The three doors onto a snapshot (the CLI, the MCP tools, the Python API) open the same
`Snapshot` and give the same answers: scans, sorted and expanded searches, context packs,
items in full, links, SQL and status, on one real built workdir."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict
from datetime import datetime, timedelta, timezone

import duckdb
import pytest

import ghindex.api as gh
from ghindex.errors import GhindexError
from ghindex.index.build import build
from ghindex.query.filters import Filters
from ghindex.query.hits import make_hit
from ghindex.query.snapshot import Snapshot
from ghindex.serve import SnapshotHolder, open_snapshot, tools
from ghindex.state import items
from ghindex.state.database import migrations, open_state, transaction
from ghindex.vocabulary.times import iso_time
from testkit.github_server import (
    as_response,
    comment_node,
    issue_node,
    pull_request_node,
    ref,
)
from testkit.state import settings_for, store_issues

pytestmark = pytest.mark.slow  # builds an index with the real model

R = "octo/hello"


def labelled(*names):
    return {"nodes": [{"name": n, "color": "ededed", "description": None} for n in names]}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """#1 a crash (bug, fixed by #9), #2 dark mode, #3 a second crash report (bug, open),
    #4 plugins; created and updated in number order except #2, updated last."""
    settings = settings_for(tmp_path_factory.mktemp("doors") / "work")
    nodes = [
        issue_node(
            1,
            title="Crash on startup without a config file",
            labels=labelled("bug"),
            body="KeyError on startup when config.toml is missing.",
            state="CLOSED",
            comments=[comment_node(11, body="Same crash on startup here on Linux.")],
        ),
        issue_node(2, title="Add a dark mode", body="Please add a dark theme toggle."),
        issue_node(
            3,
            title="Crash when the cache directory is read-only",
            body="The app crashes on startup if the cache cannot be written.",
            labels=labelled("bug"),
        ),
        issue_node(
            4,
            title="Load plugins from a custom directory",
            body="How do I load plugins from my own folder?",
        ),
    ]
    for n, node in enumerate(nodes, 1):
        node["createdAt"] = f"2015-0{n}-01T00:00:00Z"
        node["updatedAt"] = f"2015-0{n}-02T00:00:00Z"
    nodes[1]["updatedAt"] = "2016-01-01T00:00:00Z"
    store_issues(settings, nodes)
    fix = pull_request_node(
        9,
        title="Fix the crash on startup",
        body="Fixes #1.",
        state="MERGED",
        merged=True,
        closingIssuesReferences=[ref(R, 1)],
    )
    fix["createdAt"], fix["updatedAt"] = "2015-06-01T00:00:00Z", "2015-06-02T00:00:00Z"
    con = open_state(settings.state_path)
    try:
        with transaction(con):
            items.save_pull_requests(con, R, as_response([fix]))
    finally:
        con.close()
    build(settings)
    return settings.workdir


@pytest.fixture(scope="module")
def served(workdir):
    holder = SnapshotHolder(current=open_snapshot(workdir))
    yield holder.current
    holder.stop()


@pytest.fixture
def reader(workdir):
    snap = gh.open(workdir)
    yield snap
    snap.close()


def cli_json(run, workdir, *args):
    result = run(*args, "--snapshot", str(workdir), "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_a_scan_is_the_same_through_every_door(run, workdir, served, reader):
    by_cli = cli_json(run, workdir, "search", "--label", "bug", "-k", "1")
    text = run("search", "--label", "bug", "-k", "1", "--snapshot", str(workdir)).stdout
    title = "Crash when the cache directory is read-only"
    assert text == (
        f" 1. {R}#3  (issue, open)  {title}  [bug]\n"
        f"    https://github.com/{R}/issues/3  updated 2015-03-02T00:00:00Z\n"
        "    The app crashes on startup if the cache cannot be written.\n"
        "(more items match: raise -k above 1)\n"
    )
    by_mcp = tools.search(served, None, Filters.of(labels=["bug"]), top_k=1)
    by_api = reader.scan(label="bug", k=1)

    # newest first by update: #3 (March) before #1 (January); one asked for, more exist
    assert [h["entity"] for h in by_cli["results"]] == [f"{R}#3"]
    assert [h["handle"] for h in by_mcp["results"]] == [f"{R}#3"]
    assert [h.entity for h in by_api] == [f"{R}#3"]
    assert by_cli["mode"] == by_mcp["mode"] == "scan"
    assert by_cli["truncated"] is True and by_mcp["truncated"] is True


def test_a_scan_sorted_by_creation_and_one_by_update_differ(run, workdir, reader):
    updated = cli_json(run, workdir, "search", "--type", "issue", "-k", "4")
    created = cli_json(
        run, workdir, "search", "--type", "issue", "-k", "4", "--sort", "created_desc"
    )

    assert [h["number"] for h in updated["results"]] == [2, 4, 3, 1]
    assert [h["number"] for h in created["results"]] == [4, 3, 2, 1]
    assert [h.number for h in reader.scan(type="issue", k=4, sort="created_desc")] == [4, 3, 2, 1]
    assert updated["truncated"] is False


def test_a_search_sorted_by_time_keeps_the_relevant_items(run, workdir, served, reader):
    by_cli = cli_json(
        run,
        workdir,
        "search",
        "crash on startup",
        "--type",
        "issue",
        "-k",
        "2",
        "--sort",
        "created_desc",
    )
    by_mcp = tools.search(
        served, "crash on startup", Filters.of(type="issue"), top_k=2, sort="created_desc"
    )
    by_api = reader.search("crash on startup", type="issue", k=2, sort="created_desc")

    expected = [f"{R}#3", f"{R}#1"]  # the two crashes, the later one first
    assert [h["entity"] for h in by_cli["results"]] == expected
    assert [h["handle"] for h in by_mcp["results"]] == expected
    assert [h.entity for h in by_api] == expected


def test_expanding_a_search_lists_what_links_to_the_results(run, workdir, served):
    by_cli = cli_json(
        run, workdir, "search", "KeyError config.toml", "--type", "issue", "-k", "1", "--expand"
    )
    by_mcp = tools.search(
        served, "KeyError config.toml", Filters.of(type="issue"), top_k=1, graph_expand=True
    )

    assert [h["entity"] for h in by_cli["results"]] == [f"{R}#1"]
    linked = {(g["handle"], g["kind"], g["direction"], g["from"]) for g in by_cli["graph_results"]}
    assert (f"{R}#9", "closes", "in", f"{R}#1") in linked
    assert by_cli["graph_results"] == by_mcp["graph_results"]

    text = run(
        "search",
        "KeyError config.toml",
        "--type",
        "issue",
        "-k",
        "1",
        "--expand",
        "--snapshot",
        str(workdir),
    ).stdout
    assert f"linked:\n    {R}#9  closes (in) of {R}#1, hop 1  Fix the crash on startup" in text


def test_a_search_without_expand_says_nothing_of_links(run, workdir):
    body = cli_json(run, workdir, "search", "dark mode", "-k", "1")
    assert "graph_results" not in body and "truncated" not in body


def test_a_context_pack_is_the_same_through_every_door(run, workdir, served, reader):
    # the CLI first: in one process, DuckDB refuses the CLI's sandboxed connection to a
    # file the API already holds with another configuration
    question = "why does it crash on startup?"
    by_cli = cli_json(run, workdir, "context", question, "--max-tokens", "300")
    text = run("context", question, "--max-tokens", "300", "--snapshot", str(workdir)).stdout
    by_mcp = tools.context(served, question, Filters(), 300)
    by_api = reader.context(question, max_tokens=300)

    assert by_cli["passages"] and by_cli["tokens"] <= 300
    for other in (by_mcp, by_api):
        assert [p["handle"] for p in other["passages"]] == [p["handle"] for p in by_cli["passages"]]
        assert other["tokens"] == by_cli["tokens"]
    assert by_cli["passages"][0]["url"].startswith("https://github.com/octo/hello/")
    first = by_cli["passages"][0]
    assert f"[{first['handle']}] {first['title']}  {first['url']}" in text
    assert text.rstrip().endswith(f"about {by_cli['tokens']} tokens)")


def test_items_links_sql_and_status_agree(run, workdir, served, reader):
    query = "SELECT number FROM issues ORDER BY number"
    shown = cli_json(run, workdir, "show", f"{R}#1")
    linked = cli_json(run, workdir, "related", f"{R}#9")
    rows = cli_json(run, workdir, "sql", query)["rows"]
    status = cli_json(run, workdir, "status")

    assert shown["fixed_by"] == [f"{R}#9"]
    assert tools.fetch(served, [f"{R}#1"], 20_000)["items"] == [shown]
    assert reader.fetch(f"{R}#1", max_chars=20_000) == shown

    assert (f"{R}#1", "closes") in {(n["handle"], n["kind"]) for n in linked["neighbours"]}
    assert linked["nearest"]  # every door lists the nearest items (the build listed them)
    assert reader.related(f"{R}#9") == linked
    without = reader.related(f"{R}#9", nearest=False)
    assert without == {k: v for k, v in linked.items() if k != "nearest"}
    mcp_linked = tools.related(served, f"{R}#9", 1)
    assert {k: v for k, v in mcp_linked.items() if not k.startswith("snapshot_")} == linked

    assert rows == [{"number": n} for n in (1, 2, 3, 4)]
    assert tools.sql(served, query, 100)["rows"] == [[1], [2], [3], [4]]
    assert reader.sql(query).fetchall() == [(1,), (2,), (3,), (4,)]

    assert reader.status()["counts"] == status["counts"] == served.manifest["counts"]


def test_the_api_exports_and_reports_like_the_cli(reader, isolated):
    report = reader.export(isolated / "parquet")
    assert report["tables"]["issues"] == 4
    assert (isolated / "parquet" / "issues.parquet").exists()
    assert reader.report().startswith("<!doctype html>")


def test_an_unknown_filter_is_refused_by_name(reader):
    with pytest.raises(GhindexError, match="unknown filter 'lable': use one of"):
        reader.search("crash", lable="bug")


def test_a_snapshot_knows_its_paths_and_opens_what_it_needs_only(workdir, tmp_path):
    snap = Snapshot.open(workdir)
    assert (snap.state_path.name, snap.lance_path.name, snap.manifest_path.name) == (
        "state.duckdb",
        "lance",
        "manifest.json",
    )
    assert snap.snapshot_id.startswith("local-")
    snap.close()

    empty = Snapshot.open(tmp_path)  # nothing fetched yet: opening is fine, reading says why
    for read in (lambda: empty.sql("SELECT 1"), lambda: empty.search("anything")):
        with pytest.raises(GhindexError, match=r"no snapshot in .*: run `ghindex demo`"):
            read()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(GhindexError, match="no snapshot in"):
        Snapshot.open(tmp_path, built=True)


def test_a_broken_manifest_stops_only_what_reads_it(run, workdir, isolated):
    copy = isolated / "copy"
    shutil.copytree(workdir, copy)
    (copy / "manifest.json").write_text("{bad")

    assert (
        run("sql", "SELECT count(*) AS n FROM issues", "--snapshot", str(copy), "--json").exit_code
        == 0
    )
    assert run("show", f"{R}#1", "--snapshot", str(copy)).exit_code == 0
    assert run("search", "crash", "--snapshot", str(copy)).exit_code == 0
    status = run("status", "--snapshot", str(copy))
    assert status.exit_code == 1
    assert status.stderr.startswith(f"Error: {copy / 'manifest.json'} is not valid JSON")


def test_a_command_waits_for_a_writer_and_refuses_an_old_schema(run, workdir, isolated):
    copy = isolated / "copy"
    shutil.copytree(workdir, copy)
    state = copy / "state.duckdb"
    hold = (
        "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
        "print('held', flush=True); time.sleep(1.5); con.close()"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", hold, str(state)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout.readline().strip() == "held"
    shown = run("show", f"{R}#1", "--snapshot", str(copy), "--json")
    writer.wait()
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["handle"] == f"{R}#1"

    con = duckdb.connect(str(state))
    con.execute("DELETE FROM schema_migrations WHERE name = '0006_meta'")
    con.close()
    refused = run("show", f"{R}#1", "--snapshot", str(copy))
    assert refused.exit_code == 1
    assert refused.stderr == (
        f"Error: {state} needs a schema upgrade (0006_meta): run `ghindex fetch` to upgrade it\n"
    )


def test_a_state_behind_only_on_views_is_read_with_the_new_views(run, workdir, isolated):
    """A snapshot written before 0007 (which only redefines views): a reader gets 0007's
    views for its own connection and leaves the file as it was."""
    copy = isolated / "copy"
    shutil.copytree(workdir, copy)
    state = copy / "state.duckdb"
    con = duckdb.connect(str(state))
    con.execute(dict(migrations())["0004_views"].replace("CREATE VIEW", "CREATE OR REPLACE VIEW"))
    con.execute("DELETE FROM schema_migrations WHERE name = '0007_durations_as_numbers'")
    con.execute("CHECKPOINT")
    con.close()
    before = state.read_bytes()

    asked = "SELECT * FROM issue_response_times LIMIT 1"
    answered = run("sql", asked, "--snapshot", str(copy), "--json")

    assert answered.exit_code == 0, answered.stderr
    columns = json.loads(answered.stdout)["columns"]
    assert "hours_to_close" in columns and "time_to_close" not in columns  # 0007's view
    assert run("show", f"{R}#1", "--snapshot", str(copy)).exit_code == 0
    for mode in ("held", "people"):  # a server's connection and the Python API's
        with Snapshot(copy, state=mode) as snap:
            assert snap.sql(asked).columns == columns
            assert snap.sql(asked).columns == columns  # every cursor, not just the first
            if mode == "people":
                assert snap.relation(asked).columns == columns
    assert state.read_bytes() == before
    with duckdb.connect(str(state), read_only=True) as stored:
        columns = [c[0] for c in stored.execute("DESCRIBE issue_response_times").fetchall()]
    assert "time_to_close" in columns  # the file keeps its own (0004's) views


def test_times_are_utc_whatever_the_connection_zone():
    moment = datetime(2015, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=-5)))
    assert iso_time(moment) == "2015-01-02T08:04:05Z"


def test_a_hit_serialises_without_its_text_or_vector():
    row = {
        "handle": f"{R}#1",
        "entity": f"{R}#1",
        "type": "issue",
        "entity_type": "issue",
        "repo": R,
        "text": "Title\n\nbody words",
        "vector": [0.1, 0.2],
    }
    hit = make_hit(row, 1.0, 1, None)
    assert (hit.text, hit.vector, hit.snippet) == ("Title\n\nbody words", [0.1, 0.2], "body words")
    assert "text" not in asdict(hit) and "vector" not in hit.as_dict()
