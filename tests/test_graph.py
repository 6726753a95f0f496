"""The reference graph: neighbours by one recursive query, what holds now versus the
recorded events, handle resolution, fix links, links in docs, and `ghindex related`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from ghindex.errors import GhindexError
from ghindex.gitsource.doc_links import doc_links, replace_doc_links
from ghindex.query.graph import fix_links, neighbours, related
from ghindex.query.handles import UnknownHandle, resolve_handle
from ghindex.state import items
from ghindex.state.database import open_state
from testkit.github_server import (
    as_response,
    comment_node,
    event,
    issue_node,
    pull_request_node,
    ref,
    review_node,
)

R = "octo/hello"
D, E, F = (f"{R}@{c * 40}" for c in "def")
CLOSER = f"{R}@{'c' * 40}"
A1 = f"{R}@abcdef01{'0' * 32}"
A2 = f"{R}@abcdef02{'0' * 32}"


def at(hours):
    return datetime(2015, 1, 1, hours, tzinfo=UTC)


def add_commit(con, handle, subject):
    repo, sha = handle.split("@")
    con.execute(
        "INSERT INTO commits (handle, repo, sha, parents, subject, message, url, fetched_at) "
        "VALUES (?, ?, ?, [], ?, ?, ?, now())",
        [handle, repo, sha, subject, subject, f"https://github.com/{repo}/commit/{sha}"],
    )


def add_edge(con, src, dst, kind, created_at=None, source=None, field="test"):
    con.execute(
        "INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?, ?, now())",
        [src, dst, kind, source or src, field, re.match(r"[^/]+/[^/#@:]+", src)[0], created_at],
    )


def add_doc(con, handle, path, body, kind="doc"):
    repo = handle.split(":")[0]
    con.execute(
        "INSERT INTO docs (handle, repo, kind, path, title, body, commit_sha, blob_sha, size, "
        "url, fetched_at) VALUES (?, ?, ?, ?, ?, ?, '0', '0', 0, ?, now())",
        [handle, repo, kind, path, path, body, f"https://example.test/{path}"],
    )


def save_scenario(con):
    """Issue #1 was connected to PR #2 (undone), is connected to PR #3, was marked a
    duplicate of #7 (undone), is a duplicate of #8, is closed by PR #3 and referenced by
    commit D. PR #3 holds commits E and F. #4 and #3 both mention #10."""
    issue = issue_node(
        1,
        title="Crash on start",
        body="See #4",
        comments=[comment_node(5, body="Related: octo/other#9")],
        timelineItems=[
            event("ConnectedEvent", 10, source=ref(R, 2, "PullRequest"), subject=ref(R, 1)),
            event("DisconnectedEvent", 11, source=ref(R, 2, "PullRequest"), subject=ref(R, 1)),
            event("ConnectedEvent", 12, source=ref(R, 3, "PullRequest"), subject=ref(R, 1)),
            event("MarkedAsDuplicateEvent", 13, duplicate=ref(R, 1), canonical=ref(R, 7)),
            event("UnmarkedAsDuplicateEvent", 14, duplicate=ref(R, 1), canonical=ref(R, 7)),
            event("MarkedAsDuplicateEvent", 15, duplicate=ref(R, 1), canonical=ref(R, 8)),
            event("ClosedEvent", 16, closer=ref(R, 3, "PullRequest")),
            event(
                "ReferencedEvent",
                17,
                commit={"oid": "d" * 40},
                commitRepository={"nameWithOwner": R},
            ),
        ],
    )
    closed_by_commit = issue_node(
        8,
        title="Crash on load",
        state="CLOSED",
        timelineItems=[
            event("ClosedEvent", 18, closer={"oid": "c" * 40, "repository": {"nameWithOwner": R}})
        ],
    )
    others = [issue_node(4, body="Maybe #3 helps, also #10"), issue_node(7), closed_by_commit]
    items.save_issues(con, R, [as_response(n) for n in [issue, *others]])
    pull = pull_request_node(
        3,
        title="Fix crash",
        body="Fixes #1. See also #10.",
        closingIssuesReferences=[ref(R, 1)],
        commits=[{"commit": {"oid": "e" * 40}}],
        mergeCommit={"oid": "f" * 40},
        reviews=[review_node(6)],
    )
    items.save_pull_requests(con, R, [as_response(pull)])
    add_commit(con, D, "Guard against a missing config")
    add_commit(con, A1, "One")
    add_commit(con, A2, "Two")


@pytest.fixture
def state_path(isolated):
    path = isolated / "work" / "state.duckdb"
    con = open_state(path)
    save_scenario(con)
    con.close()
    return path


@pytest.fixture
def con(state_path):
    connection = open_state(state_path, read_only=True)
    yield connection
    connection.close()


def rows_of(found):
    return [
        (
            *(n.hop, n.direction, n.kind, n.handle, n.via, n.type, n.title, n.state),
            *((p.source_handle, p.source_field, p.created_at) for p in n.provenance),
        )
        for n in found
    ]


HOP_ONE = [
    (
        1,
        "in",
        "closes",
        f"{R}#3",
        None,
        "pull_request",
        "Fix crash",
        "open",
        (f"{R}#1", "timeline:ClosedEvent", at(16)),
        (f"{R}#3", "body", None),
        (f"{R}#3", "closingIssuesReferences", None),
    ),
    (
        1,
        "out",
        "duplicate_of",
        f"{R}#8",
        None,
        "issue",
        "Crash on load",
        "closed",
        (f"{R}#1", "timeline:MarkedAsDuplicateEvent", at(15)),
    ),
    (
        1,
        "in",
        "connected",
        f"{R}#3",
        None,
        "pull_request",
        "Fix crash",
        "open",
        (f"{R}#1", "timeline:ConnectedEvent", at(12)),
    ),
    (
        1,
        "in",
        "references",
        D,
        None,
        "commit",
        "Guard against a missing config",
        None,
        (f"{R}#1", "timeline:ReferencedEvent", at(17)),
    ),
    (
        1,
        "in",
        "mentions",
        f"{R}#3",
        None,
        "pull_request",
        "Fix crash",
        "open",
        (f"{R}#3", "body", None),
    ),
    (1, "out", "mentions", f"{R}#4", None, "issue", "Issue 4", "open", (f"{R}#1", "body", None)),
    (
        1,
        "out",
        "mentions",
        "octo/other#9",
        None,
        None,
        None,
        None,
        (f"{R}#1/comment/5", "comment", None),
    ),
]


def test_hop_one_lists_what_holds_now_in_both_directions(con):
    assert rows_of(neighbours(con, f"{R}#1")) == HOP_ONE


def test_hop_two_goes_through_each_hop_one_item_without_repeating_hop_one(con):
    found = neighbours(con, f"{R}#1", hops=2)

    assert rows_of(found)[: len(HOP_ONE)] == HOP_ONE
    # #4 mentions #3 and #1; #3 links back to #1: neither comes back at hop 2
    assert rows_of(found)[len(HOP_ONE) :] == [
        (2, "in", "commit_in_pr", E, f"{R}#3", None, None, None, (f"{R}#3", "commits", None)),
        (2, "in", "commit_in_pr", F, f"{R}#3", None, None, None, (f"{R}#3", "mergeCommit", None)),
        (2, "out", "mentions", f"{R}#10", f"{R}#3", None, None, None, (f"{R}#3", "body", None)),
        (2, "out", "mentions", f"{R}#10", f"{R}#4", None, None, None, (f"{R}#4", "body", None)),
        (
            2,
            "in",
            "closes",
            CLOSER,
            f"{R}#8",
            None,
            None,
            None,
            (f"{R}#8", "timeline:ClosedEvent", at(18)),
        ),
    ]


def test_history_keeps_every_recorded_event(con):
    found = rows_of(neighbours(con, f"{R}#1", include_history=True))

    assert [row[:4] for row in found] == [
        (1, "in", "closes", f"{R}#3"),
        (1, "out", "duplicate_of", f"{R}#7"),
        (1, "out", "duplicate_of", f"{R}#8"),
        (1, "in", "connected", f"{R}#2"),
        (1, "in", "connected", f"{R}#3"),
        (1, "in", "references", D),
        (1, "in", "mentions", f"{R}#3"),
        (1, "out", "mentions", f"{R}#4"),
        (1, "out", "mentions", "octo/other#9"),
        (1, "in", "disconnected", f"{R}#2"),
        (1, "out", "unmarked_duplicate_of", f"{R}#7"),
    ]
    assert found[3][8:] == ((f"{R}#1", "timeline:ConnectedEvent", at(10)),)
    assert found[9][8:] == ((f"{R}#1", "timeline:DisconnectedEvent", at(11)),)


def test_what_holds_now_is_decided_by_the_latest_event_of_the_pair(tmp_path):
    con = open_state(tmp_path / "events.duckdb")
    s = "x/y#1"
    # reconnected: only the connection after the last disconnection is provenance
    add_edge(con, "x/y#2", s, "connected", at(1), field="a")
    add_edge(con, "x/y#2", s, "disconnected", at(2))
    add_edge(con, "x/y#2", s, "connected", at(3), field="b")
    # a disconnection recorded the other way round still undoes the connection
    add_edge(con, "x/y#3", s, "connected", at(1))
    add_edge(con, s, "x/y#3", "disconnected", at(2))
    # same time: undone
    add_edge(con, s, "x/y#4", "duplicate_of", at(5))
    add_edge(con, s, "x/y#4", "unmarked_duplicate_of", at(5))
    # unmarking another pair (x/y#5 a duplicate of #1) does not touch #1 -> #6
    add_edge(con, s, "x/y#6", "duplicate_of", at(1))
    add_edge(con, "x/y#5", s, "unmarked_duplicate_of", at(2))
    # an undoing event without a time counts as the earliest
    add_edge(con, "x/y#7", s, "connected", at(1))
    add_edge(con, "x/y#7", s, "disconnected", None)

    found = rows_of(neighbours(con, s))
    con.close()

    assert found == [
        (1, "out", "duplicate_of", "x/y#6", None, None, None, None, ("x/y#1", "test", at(1))),
        (1, "in", "connected", "x/y#2", None, None, None, None, ("x/y#2", "b", at(3))),
        (1, "in", "connected", "x/y#7", None, None, None, None, ("x/y#7", "test", at(1))),
    ]


@pytest.mark.parametrize(
    "given",
    [
        f"{R}#1/comment/5",
        "Octo/Hello#1/comment/5",
        "Octo/Hello#1",
        " octo/hello#1 ",
    ],
)
def test_comments_reviews_and_other_spellings_start_from_their_item(con, given):
    assert resolve_handle(con, given) == f"{R}#1"
    assert rows_of(neighbours(con, given)) == HOP_ONE


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (f"{R}#1/comment/6", f"no comment 6 on {R}#1: it has 1 comment"),
        (f"{R}#1/review/6", f"no review 6 on {R}#1: it has 0 reviews"),
        (f"{R}#1/review-comment/9", f"no review comment 9 on {R}#1: it has 0 review comments"),
    ],
)
def test_a_comment_or_review_the_item_does_not_have_names_nothing(con, given, error):
    with pytest.raises(UnknownHandle) as caught:
        resolve_handle(con, given)
    assert str(caught.value) == error


@pytest.mark.parametrize(
    ("given", "resolved"),
    [
        (f"{R}@ddddddd", D),  # a prefix unique in commits
        (f"{R}@DDDDDDDDDD", D),
        (f"{R}@eeeeeee", E),  # known only from the graph (commit_in_pr)
        (f"{R}@abcdef01", A1),
        (f"{D}:src/app.py", D),  # one file's diff: its commit
        (f"{R}@release/v1", None),
    ],
)
def test_commits_resolve_by_a_sha_prefix(con, given, resolved):
    if resolved is None:
        with pytest.raises(UnknownHandle, match="no item"):
            resolve_handle(con, given)
    else:
        assert resolve_handle(con, given) == resolved


def test_an_ambiguous_or_short_sha_prefix_is_refused(con):
    with pytest.raises(UnknownHandle) as ambiguous:
        resolve_handle(con, f"{R}@abcdef0")
    with pytest.raises(UnknownHandle) as short:
        resolve_handle(con, f"{R}@dddddd")

    assert str(ambiguous.value) == (
        f"{R}@abcdef0 matches 2 commits ({A1}, {A2}): give more of the sha"
    )
    assert str(short.value).startswith(f"no item {R}@dddddd in the snapshot")


def test_an_unknown_handle_says_which_forms_exist(con):
    with pytest.raises(UnknownHandle) as caught:
        neighbours(con, f"{R}#404")

    assert str(caught.value) == (
        f"no item {R}#404 in the snapshot: check the handle "
        "(owner/repo#123, owner/repo@sha, owner/repo:path)"
    )


def test_kinds_filter_every_hop(con):
    found = neighbours(con, f"{R}#1", hops=2, kinds=["closes", "commit_in_pr"])

    assert [(n.hop, n.kind, n.handle, n.via) for n in found] == [
        (1, "closes", f"{R}#3", None),
        (2, "commit_in_pr", E, f"{R}#3"),
        (2, "commit_in_pr", F, f"{R}#3"),
    ]
    with pytest.raises(GhindexError, match="unknown link kind 'close'"):
        neighbours(con, f"{R}#1", kinds=["close"])
    with pytest.raises(GhindexError, match="hops must be 1 or 2, not 3"):
        neighbours(con, f"{R}#1", hops=3)


def test_an_item_without_links_has_no_neighbours(con):
    assert neighbours(con, f"{R}#7") == []
    assert [n.kind for n in neighbours(con, f"{R}#7", include_history=True)] == [
        "duplicate_of",
        "unmarked_duplicate_of",
    ]


def test_fix_links_name_pull_requests_and_commits_only(con, state_path):
    con.close()
    writable = open_state(state_path)
    add_edge(writable, f"{R}#4", f"{R}#7", "closes")  # an issue is no closer
    writable.close()
    con = open_state(state_path, read_only=True)

    links = fix_links(con, [f"{R}#1", f"{R}#3", f"{R}#8", f"{R}#7", f"{R}#1", "none/such#1"])
    con.close()

    assert links == {
        f"{R}#1": {"fixed_by": [f"{R}#3"], "closes": []},
        f"{R}#3": {"fixed_by": [], "closes": [f"{R}#1"]},
        f"{R}#8": {"fixed_by": [CLOSER], "closes": []},
        f"{R}#7": {"fixed_by": [], "closes": []},
        "none/such#1": {"fixed_by": [], "closes": []},
    }


def test_related_reports_the_resolved_start(con):
    result = related(con, f"{R}#1/comment/5")

    assert result.as_dict()["handle"] == f"{R}#1/comment/5"
    assert result.as_dict()["resolved"] == f"{R}#1"
    assert "nearest" not in result.as_dict()
    with_nearest = related(con, f"{R}#7", nearest_items=lambda h, k: [{"handle": h, "k": k}])
    assert with_nearest.as_dict()["nearest"] == [{"handle": f"{R}#7", "k": 10}]


# ------------------------------------------------------------------ doc links

DOCS = {
    "else/where:README.md": ("README.md", "[x](docs/install.md) and #3"),
    f"{R}:README.md": (
        "README.md",
        "[Install](docs/install.md#linux) ![logo](docs/img/logo.png) [api][api-ref]\n"
        '<a class="x" href="./docs/guide/index.md?tab=1">guide</a> [self](#intro)\n'
        "[ext](https://example.com/x.md) [again](https://github.com/octo/hello/blob/main/docs/install.md)\n"
        "[theirs](https://github.com/else/where/blob/main/README.md)\n"
        "[wiki](https://github.com/Octo/Hello/wiki/Home) Fixes #12, not `#99`.\n"
        "[1. Intro](#1-intro)\n\n"
        "```md\n[code](docs/my%20notes.md) #98\n```\n\n"
        "[api-ref]: docs/api.rst\n",
    ),
    f"{R}:docs/api.rst": (
        "docs/api.rst",
        "See `Install <install.md>`_ and :doc:`guide/index`.\n\n.. _readme: ../README.md\n",
    ),
    f"{R}:docs/guide/README.md": ("docs/guide/README.md", ""),
    f"{R}:docs/guide/index.md": ("docs/guide/index.md", "[up](/docs/install.md)"),
    f"{R}:docs/install.md": (
        "docs/install.md",
        "[back](../README.md) [api](./api.rst#section) [out](../../etc/passwd.md)\n"
        "[folder](guide/) [missing](nope.md) [space](my%20notes.md) [root](..)",
    ),
    f"{R}:docs/my notes.md": (
        "docs/my notes.md",
        "[readme](https://github.com/octo/hello/tree/feature/x/README.md)",
    ),
}
WIKI = {
    f"{R}:wiki/FAQ": ("FAQ.md", "[[home]]"),
    f"{R}:wiki/Getting-Started": (
        "Getting-Started.md",
        "[home](Home.md#top) [src](https://github.com/octo/hello/blob/v1.0/README.md)",
    ),
    f"{R}:wiki/Home": (
        "Home.md",
        "[[Getting Started]] [[Read this|Install-Guide]] [faq](FAQ) [[Missing Page]] see #5",
    ),
    f"{R}:wiki/Install-Guide": ("guides/Install-Guide.md", ""),
}


@pytest.fixture
def docs_con(tmp_path):
    con = open_state(tmp_path / "docs.duckdb")
    for handle, (path, body) in DOCS.items():
        add_doc(con, handle, path, body)
    for handle, (path, body) in WIKI.items():
        add_doc(con, handle, path, body, kind="wiki")
    yield con
    con.close()


def links(rows):
    return [
        (r["src"].split(":", 1)[1] if r["repo"] == R else r["src"], r["dst"], r["kind"])
        for r in rows
    ]


def test_doc_links_resolve_paths_anchors_urls_and_wiki_names(docs_con):
    rows = doc_links(docs_con)

    assert links(rows) == [
        ("else/where:README.md", "else/where#3", "mentions"),
        ("README.md", f"{R}:docs/install.md", "links_to"),
        ("README.md", f"{R}:docs/guide/index.md", "links_to"),
        ("README.md", f"{R}:wiki/Home", "links_to"),
        ("README.md", f"{R}:docs/api.rst", "links_to"),
        ("README.md", f"{R}#12", "mentions"),
        ("docs/api.rst", f"{R}:docs/install.md", "links_to"),
        ("docs/api.rst", f"{R}:docs/guide/index.md", "links_to"),
        ("docs/api.rst", f"{R}:README.md", "links_to"),
        ("docs/guide/index.md", f"{R}:docs/install.md", "links_to"),
        ("docs/install.md", f"{R}:README.md", "links_to"),
        ("docs/install.md", f"{R}:docs/api.rst", "links_to"),
        ("docs/install.md", f"{R}:docs/guide/README.md", "links_to"),
        ("docs/install.md", f"{R}:docs/my notes.md", "links_to"),
        ("docs/my notes.md", f"{R}:README.md", "links_to"),
        ("wiki/FAQ", f"{R}:wiki/Home", "links_to"),
        ("wiki/Getting-Started", f"{R}:wiki/Home", "links_to"),
        ("wiki/Getting-Started", f"{R}:README.md", "links_to"),
        ("wiki/Home", f"{R}:wiki/Getting-Started", "links_to"),
        ("wiki/Home", f"{R}:wiki/Install-Guide", "links_to"),
        ("wiki/Home", f"{R}:wiki/FAQ", "links_to"),
        ("wiki/Home", f"{R}#5", "mentions"),
    ]
    assert {
        (r["source_field"], r["repo"], r["created_at"]) for r in rows if r["src"].endswith("Home")
    } == {("wiki", R, None)}
    first = rows[1]
    assert (first["source_handle"], first["source_field"]) == (f"{R}:README.md", "doc")
    assert sorted(first) == [
        "created_at",
        "dst",
        "fetched_at",
        "kind",
        "repo",
        "source_field",
        "source_handle",
        "src",
    ]


def test_replace_doc_links_swaps_only_the_docs_edges_of_the_repo(docs_con):
    add_edge(docs_con, f"{R}:old.md", f"{R}:gone.md", "links_to", field="doc")
    add_edge(docs_con, "else/where:old.md", "else/where#1", "mentions", field="doc")
    add_edge(docs_con, f"{R}#1", f"{R}#2", "mentions", field="body")

    assert replace_doc_links(docs_con, R) == 21

    edges = docs_con.execute(
        "SELECT src, dst, kind, source_field FROM edges "
        "WHERE src NOT LIKE 'octo/hello:%' ORDER BY ALL"
    ).fetchall()
    assert edges == [
        ("else/where:old.md", "else/where#1", "mentions", "doc"),
        (f"{R}#1", f"{R}#2", "mentions", "body"),
    ]
    count = "SELECT count(*) FROM edges WHERE list_contains(['doc', 'wiki'], source_field)"
    assert docs_con.execute(count).fetchall() == [(22,)]
    assert replace_doc_links(docs_con) == 22
    assert docs_con.execute(count).fetchall() == [(22,)]
    doc_neighbours = neighbours(docs_con, f"{R}:docs/guide/index.md", kinds=["links_to"])
    assert [
        (n.direction, n.handle, n.type, n.provenance[0].source_field) for n in doc_neighbours
    ] == [
        ("in", f"{R}:README.md", "doc", "doc"),
        ("in", f"{R}:docs/api.rst", "doc", "doc"),
        ("out", f"{R}:docs/install.md", "doc", "doc"),
    ]
    # a wiki page is a `wiki_doc`, as search, show and the index name it
    wiki = neighbours(docs_con, f"{R}:wiki/FAQ", kinds=["links_to"])
    assert {(n.direction, n.handle, n.type) for n in wiki} == {
        ("in", f"{R}:wiki/Home", "wiki_doc"),
        ("out", f"{R}:wiki/Home", "wiki_doc"),
    }


# ------------------------------------------------------------------ the command


def test_related_prints_a_table(state_path, run):
    result = run("related", f"{R}#3")

    assert result.exit_code == 0
    assert result.stdout.split("\n") == [
        "octo/hello#3: 7 links",
        f"hop  dir  kind          handle{' ' * 47}title",
        f"1    ->   closes        octo/hello#1{' ' * 41}Crash on start",
        f"1    ->   connected     octo/hello#1{' ' * 41}Crash on start",
        f"1    <-   commit_in_pr  {E}",
        f"1    <-   commit_in_pr  {F}",
        f"1    ->   mentions      octo/hello#1{' ' * 41}Crash on start",
        f"1    <-   mentions      octo/hello#4{' ' * 41}Issue 4",
        "1    ->   mentions      octo/hello#10",
        "",
    ]


def test_related_hop_two_shows_via(state_path, run):
    result = run(
        "related", f"{R}@ddddddd", "--hops", "2", "--kind", "references", "--kind", "closes"
    )

    assert result.exit_code == 0
    assert result.stdout == (
        f"{R}@ddddddd ({D}): 2 links\n"
        "hop  dir  kind        handle        via           title\n"
        "1    ->   references  octo/hello#1                Crash on start\n"
        "2    <-   closes      octo/hello#3  octo/hello#1  Fix crash\n"
    )


def test_related_json_is_one_document(state_path, run):
    result = run("related", f"{R}#1/comment/5", "--kind", "duplicate_of", "--history", "--json")

    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "handle": f"{R}#1/comment/5",
        "resolved": f"{R}#1",
        "neighbours": [
            {
                "handle": f"{R}#{number}",
                "kind": "duplicate_of",
                "direction": "out",
                "hop": 1,
                "via": None,
                "type": "issue",
                "title": title,
                "state": state,
                "url": f"https://github.com/{R}/issues/{number}",
                "provenance": [
                    {
                        "source_handle": f"{R}#1",
                        "source_field": "timeline:MarkedAsDuplicateEvent",
                        "created_at": created_at,
                    }
                ],
            }
            for number, title, state, created_at in (
                (7, "Issue 7", "open", "2015-01-01T13:00:00Z"),
                (8, "Crash on load", "closed", "2015-01-01T15:00:00Z"),
            )
        ],
    }


def test_related_reads_a_snapshot_directory(state_path, run, isolated):
    state_path.rename(isolated / "state.duckdb")

    assert run("related", f"{R}#7", "--snapshot", str(isolated)).stdout == (
        "octo/hello#7: no links in the snapshot\n"
    )


def test_related_failures(state_path, run):
    unknown = run("related", f"{R}#404")
    bad_kind = run("related", f"{R}#1", "--kind", "close")
    bad_hops = run("related", f"{R}#1", "--hops", "3")

    assert (unknown.exit_code, unknown.stdout) == (1, "")
    assert unknown.stderr == (
        f"Error: no item {R}#404 in the snapshot: check the handle "
        "(owner/repo#123, owner/repo@sha, owner/repo:path)\n"
    )
    assert bad_kind.exit_code == 2
    assert "Invalid value for '--kind': 'close' is not a link kind: use one of closes," in (
        bad_kind.stderr
    )
    assert bad_hops.exit_code == 2


def test_related_without_a_state_says_what_to_run(run):
    result = run("related", f"{R}#1")

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: no snapshot in ")
    assert "`ghindex fetch` and `ghindex build` for your repositories" in result.stderr


def test_fix_links_around_also_answers_for_the_other_ends(con):
    alone = fix_links(con, [f"{R}#1"])
    around = fix_links(con, [f"{R}#1"], around=True)

    assert list(alone) == [f"{R}#1"]
    assert around[f"{R}#1"] == alone[f"{R}#1"] == {"fixed_by": [f"{R}#3"], "closes": []}
    # the pull request that closes #1 comes with its own links, as if asked for
    assert around[f"{R}#3"] == fix_links(con, [f"{R}#3"])[f"{R}#3"]
    assert set(around) == {f"{R}#1", f"{R}#3"}
