"""How the state database is written when items are read again (`state/rows.py`): an
unchanged row keeps its data (only `fetched_at` moves), a changed one is updated in
place, children no longer there are removed; the result is the same as replacing every
item whole, and a small change rewrites a few of the file's blocks, each one piece of a
published snapshot (`snapshot/layout.py`)."""

from __future__ import annotations

import os
import shutil

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.snapshot.layout import DUCKDB_HEADERS, PIECE_SIZE, hash_file
from testkit.github_server import comment_node, issue_node
from testkit.state import settings_for, store_issues

# every table an issue page writes per item, and the columns that say what a row holds
# (`labels`, the repository's labels as seen so far, only grows)
TABLES = {
    "issues": "handle, title, body, state, comments_count, updated_at",
    "comments": "handle, parent_handle, body, updated_at",
    "issue_labels": "handle, label",
    "assignees": "handle, login",
    "edges": "src, dst, kind, source_handle, source_field",
}


def save(workdir, nodes):
    """Store a page of issue nodes in WORKDIR/state.duckdb, as a fetch does."""
    store_issues(settings_for(workdir), nodes)


def contents(workdir) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(workdir / "state.duckdb"), read_only=True)
    try:
        return {
            table: con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()
            for table, columns in TABLES.items()
        }
    finally:
        con.close()


def fetched(workdir, table: str) -> dict[str, object]:
    con = duckdb.connect(str(workdir / "state.duckdb"), read_only=True)
    try:
        return dict(con.execute(f"SELECT handle, fetched_at FROM {table}").fetchall())
    finally:
        con.close()


def issue(number, *, body="", comments=(), labels=(), assignees=(), edit=0):
    """An issue with comments (database ids), labels and assignees; `edit` moves its time."""
    return issue_node(
        number,
        body=body,
        updatedAt=f"2026-01-0{1 + edit}T00:00:00Z",
        comments=[
            comment_node(c, body=f"comment {c} of #{number}, see #{c % 7 + 1}") for c in comments
        ],
        labels={"nodes": [{"name": n, "color": "ededed", "description": None} for n in labels]},
        assignees={"nodes": [{"login": n} for n in assignees]},
    )


def test_an_item_read_again_unchanged_keeps_its_rows_and_moves_only_fetched_at(tmp_path):
    path = tmp_path
    page = [issue(1, body="Fixes #2", comments=[11, 12], labels=["bug"], assignees=["ann"])]
    save(path, page)
    before, times = contents(path), fetched(path, "issues")

    save(path, page)

    assert contents(path) == before
    assert fetched(path, "issues")["octo/hello#1"] > times["octo/hello#1"]  # seen again


def test_children_no_longer_there_are_removed_and_the_rest_kept_or_updated(tmp_path):
    path = tmp_path
    save(path, [issue(1, body="Fixes #2", comments=[11, 12], labels=["bug", "ui"])])

    save(path, [issue(1, body="Now about #3", comments=[12, 13], labels=["ui"], edit=1)])

    found = contents(path)
    assert [r[0] for r in found["comments"]] == [
        "octo/hello#1/comment/12",
        "octo/hello#1/comment/13",
    ]
    assert found["issue_labels"] == [("octo/hello#1", "ui")]
    assert ("octo/hello#1", "octo/hello#2", "closes", "octo/hello#1", "body") not in found["edges"]
    assert ("octo/hello#1", "octo/hello#3", "mentions", "octo/hello#1", "body") in found["edges"]
    assert found["issues"][0][2] == "Now about #3"


ISSUES = st.builds(
    issue,
    st.integers(1, 6),
    body=st.sampled_from(["", "Fixes #2", "see #5 and #6", "closes #1"]),
    comments=st.lists(st.integers(100, 110), max_size=4, unique=True),
    labels=st.lists(st.sampled_from(["bug", "ui", "docs"]), max_size=3, unique=True),
    assignees=st.lists(st.sampled_from(["ann", "bob"]), max_size=2, unique=True),
    edit=st.integers(0, 3),
)


@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pages=st.lists(
        st.lists(ISSUES, min_size=1, max_size=4, unique_by=lambda n: n["number"]),
        min_size=1,
        max_size=4,
    )
)
def test_pages_read_in_turn_leave_what_the_last_reading_of_each_item_says(tmp_path, pages):
    """Items written in place (updated, children synced) end as if each had been stored
    whole, once, as last read (a page lists an item once, as GitHub's do)."""
    path, fresh = tmp_path / "read", tmp_path / "fresh"
    for workdir in (path, fresh):
        shutil.rmtree(workdir, ignore_errors=True)
    last = {}
    for page in pages:
        save(path, page)
        last.update({node["number"]: node for node in page})

    save(fresh, list(last.values()))

    assert contents(path) == contents(fresh)


@pytest.mark.slow
def test_one_new_comment_rewrites_a_few_blocks_each_one_piece(tmp_path):
    """1,200 issues with two comments each; then one issue gains a comment. DuckDB writes
    the changed columns' blocks, and each changed block is one changed piece."""
    base = tmp_path / "base"
    for start in range(1, 1201, 300):
        save(
            base,
            [
                issue(n, body=f"Body {n} " * 40, comments=[n * 10, n * 10 + 1])
                for n in range(start, start + 300)
            ],
        )
    work = tmp_path / "work"
    shutil.copytree(base, work)

    save(work, [issue(600, body="Body 600 " * 40, comments=[6000, 6001, 6002], edit=1)])
    con = duckdb.connect(str(work / "state.duckdb"))
    con.execute("CHECKPOINT")
    con.close()

    base, work = base / "state.duckdb", work / "state.duckdb"
    old, new = hash_file(base, "state.duckdb"), hash_file(work, "state.duckdb")
    assert new.pieces[0].size == DUCKDB_HEADERS
    assert all(p.size == PIECE_SIZE for p in new.pieces[1:-1])
    held = {p.sha256 for p in old.pieces}
    changed = [i for i, p in enumerate(new.pieces) if p.sha256 not in held]
    # the blocks that differ, found byte by byte: each is within exactly one piece
    a, b = base.read_bytes(), work.read_bytes()
    blocks = {
        (at - DUCKDB_HEADERS) // PIECE_SIZE + 1 if at >= DUCKDB_HEADERS else 0
        for at in range(0, len(b), 4096)
        if a[at : at + 4096] != b[at : at + 4096]
    }
    assert set(changed) <= blocks
    assert len(changed) <= 8, f"{len(changed)} of {len(new.pieces)} pieces changed"
    assert len(new.pieces) >= 20
