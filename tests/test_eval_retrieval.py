"""bench/eval_corpus.py stores an eval corpus the way ghindex's readers do, and
bench/eval_retrieval.py reports every mode and task of a set in its JSON shape."""

from __future__ import annotations

import hashlib
import json

import pytest

from bench import eval_corpus, eval_retrieval
from ghindex.state.database import open_state

SHA_A = "a" * 40
SHA_B = "b" * 40
PATCH_A = (
    "diff --git a/src/proxy.py b/src/proxy.py\n"
    "new file mode 100644\n"
    "index 0000000..1111111\n"
    "--- /dev/null\n"
    "+++ b/src/proxy.py\n"
    "@@ -0,0 +1,2 @@\n"
    "+def socks5_handshake():\n"
    "+    return negotiate_socks5()\n"
    "diff --git a/src/client.py b/src/client.py\n"
    "index 2222222..3333333 100644\n"
    "--- a/src/client.py\n"
    "+++ b/src/client.py\n"
    "@@ -1,3 +1,3 @@\n"
    " import ssl\n"
    "-PROXY_SCHEMES = ['http']\n"
    "+PROXY_SCHEMES = ['http', 'socks5']\n"
)
PATCH_B = (
    "diff --git a/docs/old name.md b/docs/new name.md\n"
    "similarity index 90%\n"
    "rename from docs/old name.md\n"
    "rename to docs/new name.md\n"
    "index 4444444..5555555 100644\n"
    "--- a/docs/old name.md\n"
    "+++ b/docs/new name.md\n"
    "@@ -1 +1 @@\n"
    "-Timeouts\n"
    "+Timeout configuration\n"
    "diff --git a/setup.cfg b/setup.cfg\n"
    "deleted file mode 100644\n"
    "index 6666666..0000000\n"
    "--- a/setup.cfg\n"
    "+++ /dev/null\n"
    "@@ -1,2 +0,0 @@\n"
    "-[metadata]\n"
    "-name = octo\n"
)


def corpus() -> list[dict]:
    base = "https://github.com/octo/hello"

    def record(id_, type_, title, body, url, **extra):
        return {
            "id": id_,
            "type": type_,
            "number": extra.pop("number", None),
            "title": title,
            "body": body,
            "url": url,
            "created_at": "2024-01-02T03:04:05Z",
            "updated_at": "2024-02-03T04:05:06Z",
            "labels": extra.pop("labels", []),
            **extra,
        }

    return [
        record(
            "t:issue:1",
            "issue",
            "Zeppelin frobnicator explodes on startup",
            "Starting the zeppelin frobnicator raises a KeyError every time.",
            f"{base}/issues/1",
            number=1,
            state="open",
            labels=["bug", {"name": "crash"}],
            author="alice",
        ),
        record(
            "t:issue:2",
            "issue",
            "Document the retry policy",
            "How many times are requests retried?",
            f"{base}/issues/2",
            number=2,
            state="closed",
        ),
        record(
            "t:issue:5",
            "issue",
            "Cookies are dropped after a redirect",
            "Session cookies vanish when the server answers 302.",
            f"{base}/issues/5",
            number=5,
            state="open",
        ),
        record(
            "t:pr:3",
            "pull_request",
            "Add HTTP/2 connection pooling",
            "Reuses HTTP/2 connections across requests to one host.",
            f"{base}/pull/3",
            number=3,
            state="merged",
            author="bob",
        ),
        record(
            "t:pr:4",
            "pull_request",
            "Fix typo in README",
            "Spelling.",
            f"{base}/pull/4",
            number=4,
            state="closed",
        ),
        record(
            "t:comment:1",
            "comment",
            "Comment on #1",
            "Same here: the frobnicator also fails on Windows.",
            f"{base}/issues/1#issuecomment-991",
        ),
        record(
            "t:diff:aaaaaaaaaaaa",
            "diff",
            "Support SOCKS5 proxies (#7)",
            f"Support SOCKS5 proxies (#7)\n\nAdds a handshake.\n\n"
            f"Files: src/proxy.py, src/client.py, CHANGELOG.md\n\n{PATCH_A}",
            f"{base}/commit/{SHA_A}",
            number=7,
            sha=SHA_A,
            author="Carol Doe",
        ),
        record(
            "t:diff:bbbbbbbbbbbb",
            "diff",
            "Rename the timeout docs",
            f"Rename the timeout docs\n\nFiles: docs/new name.md, setup.cfg\n\n{PATCH_B}",
            f"{base}/commit/{SHA_B}",
            sha=SHA_B,
        ),
        record(
            "t:doc:docs/timeouts.md",
            "doc",
            "timeouts.md",
            "# Timeouts\n\nEvery request has a five second default timeout.",
            f"{base}/blob/{SHA_B}/docs/timeouts.md",
            path="docs/timeouts.md",
        ),
        record(
            "t:doc:README.md",
            "doc",
            "README.md",
            "Hello is an HTTP client.",
            f"{base}/blob/main/README.md",
        ),
        record(
            "t:release:1.0.0",
            "release",
            "Version 1.0.0",
            "* Support SOCKS5 proxies.\n* Add HTTP/2 connection pooling.",
            f"{base}/releases/tag/1.0.0",
            tag="1.0.0",
        ),
        record("t:release:0.9", "release", "Version 0.9", "* First release.", ""),
        record("t:gist:1", "gist", "A gist", "print('hi')", "https://gist.github.com/1"),
    ]


QUERIES = [
    {
        "qid": "q1",
        "task": "find_issue",
        "query": "zeppelin frobnicator explodes on startup",
        "relevant_ids": ["t:issue:1"],
        "exclude_ids": [],
    },
    {
        "qid": "q2",
        "task": "changelog_to_change",
        "query": "Support SOCKS5 proxies.",
        "relevant_ids": ["t:diff:aaaaaaaaaaaa"],
        "exclude_ids": ["t:release:1.0.0"],
    },
    {
        "qid": "q3",
        "task": "changelog_to_change",
        "query": "Add HTTP/2 connection pooling.",
        "relevant_ids": ["t:pr:3", "t:not-in-corpus"],
        "exclude_ids": ["t:release:1.0.0"],
    },
    {
        "qid": "q4",
        "task": "find_doc",
        "query": "default request timeout",
        "relevant_ids": ["t:doc:docs/timeouts.md"],
        "exclude_ids": [],
    },
]


def test_loader_stores_rows_as_ghindex_readers_do(tmp_path):
    con = open_state(tmp_path / "state.duckdb")
    loaded = eval_corpus.store_corpus(con, corpus())

    assert loaded.handles == {
        "octo/hello#1/comment/991": "t:comment:1",
        "octo/hello#1": "t:issue:1",
        "octo/hello#2": "t:issue:2",
        "octo/hello#5": "t:issue:5",
        "octo/hello#3": "t:pr:3",
        "octo/hello#4": "t:pr:4",
        "octo/hello@release/1.0.0": "t:release:1.0.0",
        "octo/hello@release/0.9": "t:release:0.9",
        "octo/hello:docs/timeouts.md": "t:doc:docs/timeouts.md",
        "octo/hello:README.md": "t:doc:README.md",
        f"octo/hello@{SHA_A}": "t:diff:aaaaaaaaaaaa",
        f"octo/hello@{SHA_B}": "t:diff:bbbbbbbbbbbb",
    }
    assert dict(loaded.skipped) == {"type 'gist' has no table": 1}
    assert con.execute(
        "SELECT handle, state, author, closed_at IS NOT NULL FROM issues ORDER BY number"
    ).fetchall() == [
        ("octo/hello#1", "OPEN", "alice", False),
        ("octo/hello#2", "CLOSED", None, True),
        ("octo/hello#5", "OPEN", None, False),
    ]
    assert con.execute(
        "SELECT handle, state, merged FROM pull_requests ORDER BY number"
    ).fetchall() == [("octo/hello#3", "MERGED", True), ("octo/hello#4", "CLOSED", False)]
    assert con.execute("SELECT handle, label FROM issue_labels ORDER BY label").fetchall() == [
        ("octo/hello#1", "bug"),
        ("octo/hello#1", "crash"),
    ]
    assert con.execute("SELECT handle, parent_handle, body FROM comments").fetchall() == [
        (
            "octo/hello#1/comment/991",
            "octo/hello#1",
            "Same here: the frobnicator also fails on Windows.",
        )
    ]
    assert con.execute(
        "SELECT handle, subject, message, author_name, files_changed, additions, deletions, url "
        "FROM commits ORDER BY sha"
    ).fetchall() == [
        (
            f"octo/hello@{SHA_A}",
            "Support SOCKS5 proxies (#7)",
            "Support SOCKS5 proxies (#7)\n\nAdds a handshake.",
            "Carol Doe",
            3,
            3,
            1,
            f"https://github.com/octo/hello/commit/{SHA_A}",
        ),
        (
            f"octo/hello@{SHA_B}",
            "Rename the timeout docs",
            "Rename the timeout docs",
            None,
            2,
            1,
            3,
            f"https://github.com/octo/hello/commit/{SHA_B}",
        ),
    ]
    assert con.execute(
        "SELECT handle, path, old_path, status, similarity, additions, deletions, "
        "patch IS NULL, patch_truncated FROM commit_files ORDER BY sha, handle"
    ).fetchall() == [
        (
            f"octo/hello@{SHA_A}:CHANGELOG.md",
            "CHANGELOG.md",
            None,
            "M",
            None,
            None,
            None,
            True,
            True,
        ),
        (f"octo/hello@{SHA_A}:src/client.py", "src/client.py", None, "M", None, 1, 1, False, False),
        (f"octo/hello@{SHA_A}:src/proxy.py", "src/proxy.py", None, "A", None, 2, 0, False, False),
        (
            f"octo/hello@{SHA_B}:docs/new name.md",
            "docs/new name.md",
            "docs/old name.md",
            "R",
            90,
            1,
            1,
            False,
            False,
        ),
        (f"octo/hello@{SHA_B}:setup.cfg", "setup.cfg", None, "D", None, 0, 2, False, False),
    ]
    patch = con.execute(
        "SELECT patch FROM commit_files WHERE handle = ?", [f"octo/hello@{SHA_A}:src/proxy.py"]
    ).fetchall()[0][0]
    assert patch == PATCH_A[: PATCH_A.index("diff --git a/src/client.py")]
    assert con.execute(
        "SELECT handle, kind, path, title, commit_sha, size, url FROM docs ORDER BY path"
    ).fetchall() == [
        (
            "octo/hello:README.md",
            "doc",
            "README.md",
            "README.md",
            # no commit sha in a '/blob/main/' URL: a placeholder made from the body
            hashlib.sha256(b"Hello is an HTTP client.").hexdigest()[:40],
            24,
            "https://github.com/octo/hello/blob/main/README.md",
        ),
        (
            "octo/hello:docs/timeouts.md",
            "doc",
            "docs/timeouts.md",
            "Timeouts",
            SHA_B,
            60,
            f"https://github.com/octo/hello/blob/{SHA_B}/docs/timeouts.md",
        ),
    ]
    assert con.execute("SELECT handle, tag, name FROM releases ORDER BY tag").fetchall() == [
        ("octo/hello@release/0.9", "0.9", "Version 0.9"),
        ("octo/hello@release/1.0.0", "1.0.0", "Version 1.0.0"),
    ]
    con.close()


def test_scores_and_ranking():
    assert eval_retrieval.scores(["x", "a", "y", "b"], {"a", "b"}, 10) == pytest.approx(
        (1.0, 0.5, (1 / 1.5849625 + 1 / 2.3219281) / (1 + 1 / 1.5849625))
    )
    assert eval_retrieval.scores(["a", "x"], {"a", "b", "c"}, 1) == (1 / 3, 1.0, 1.0)
    assert eval_retrieval.scores(["x"], {"a"}, 10) == (0.0, 0.0, 0.0)

    class Hit:
        def __init__(self, handle, entity=None):
            self.handle, self.entity = handle, entity

    handles = {"o/r#1": "issue-1", f"o/r@{SHA_A}": "commit-a", "o/r#1/comment/5": "c5"}
    hits = [
        Hit(f"o/r@{SHA_A}:src/x.py", f"o/r@{SHA_A}"),
        Hit(f"o/r@{SHA_A}:src/y.py"),  # no entity: the commit of its handle
        Hit("o/r#1/comment/5", "o/r#1"),  # its issue, then the comment: a record too
        Hit("o/r#1/comment/6", "o/r#1"),  # its issue again
        Hit("o/r#9"),  # not in the corpus: keeps its rank
    ]
    assert eval_retrieval.ranked_ids(hits, handles) == ["commit-a", "issue-1", "c5", "?o/r#9"]


@pytest.mark.slow
def test_harness_json_shape(tmp_path, capsys):
    folder = tmp_path / "tiny-set"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus()))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))

    code = eval_retrieval.main([str(folder), "--json", "--workdir", str(tmp_path / "work")])

    captured = capsys.readouterr()
    assert code == 0
    result = json.loads(captured.out)
    assert list(result) == [
        "sparse",
        "dense",
        "hybrid",
        "hybrid+rerank",
        "hybrid, text only",
        "naive sparse",
        "naive dense",
        "naive hybrid",
    ]
    for mode, tasks in result.items():
        assert list(tasks) == ["find_issue", "changelog_to_change", "find_doc"]
        for task, metrics in tasks.items():
            keys = {"recall@10", "mrr@10", "ndcg@10", "n"}
            if mode == "hybrid+rerank":
                keys.add("reranked")
                assert isinstance(metrics["reranked"], bool)
            assert set(metrics) == keys, (mode, task)
            assert all(0.0 <= metrics[k] <= 1.0 for k in ("recall@10", "mrr@10", "ndcg@10"))
        assert [tasks[t]["n"] for t in tasks] == [1, 2, 1]
    assert result["sparse"]["find_issue"]["recall@10"] == 1.0
    assert "1 relevant id(s) are not in the corpus" in captured.err
    assert "skipped 1 record(s): type 'gist' has no table" in captured.err
    assert "| naive hybrid R@10 | difference | 95% interval" in captured.err


def test_the_naive_bm25_ranks_by_rare_words_and_skips_documents_without_any():
    from bench.eval_baseline import BM25

    docs = ["the cat sat", "the dog sat on the dog mat", "the bird", "a parrot", "a fish"]
    scores = BM25(docs).scores("dog sat")
    assert scores.argmax() == 1
    assert scores[0] > 0 and scores[2] == 0 and scores[3] == 0


@pytest.mark.slow
def test_the_replay_ranks_as_the_real_search_does(tmp_path):
    """bench/eval_replay.py's defaults give the text-only search's own ranking, query by
    query (each record's title asked, itself excluded, and one-word identifier queries),
    and a variant's settings reach the ranking."""
    from bench import eval_replay
    from ghindex.query.search import Searcher

    folder = tmp_path / "tiny-set"
    folder.mkdir()
    records = [r for r in corpus() if r["type"] != "gist"]
    asked = [
        {
            "qid": f"t{n}",
            "task": r["type"],
            "query": r["title"],
            "relevant_ids": [r["id"]],
            "exclude_ids": [o["id"] for o in records if o is not r][: n % 3],
        }
        for n, r in enumerate(records)
    ] + [
        {"qid": "x1", "task": "identifier", "query": "#1", "relevant_ids": ["t:issue:1"]},
        {
            "qid": "x2",
            "task": "identifier",
            "query": "setup.cfg",
            "relevant_ids": ["t:doc:README.md"],
        },
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus()))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in asked))
    work = tmp_path / "work"
    assert (
        eval_retrieval.main(
            [str(folder), "--modes", "sparse", "--no-baseline", "--workdir", str(work)]
        )
        == 0
    )

    name, lists, handles = eval_replay.load(folder, work)
    assert name == "tiny-set" and len(lists) == len(asked)
    searcher = Searcher(work / "lance", link_weight=0.0)
    querier = eval_retrieval.Querier(searcher)
    for k in (1, 3, 10):
        for one in lists:
            exclude = set(one.query.get("exclude_ids") or ())
            real, _, _ = querier.ranking(one.query["query"], "hybrid", k, exclude, handles)
            assert eval_replay.ranking(one, eval_replay.Variant(), k, handles) == real, one.query
    searcher.close()

    one_a_type = eval_replay.Variant.parse("type_cap=1 type_block=2")
    changed = [
        one
        for one in lists
        if eval_replay.ranking(one, one_a_type, 10, handles)
        != eval_replay.ranking(one, eval_replay.Variant(), 10, handles)
    ]
    assert changed
    results = eval_replay.replay([(name, lists, handles)], [eval_replay.Variant(), one_a_type], 3)
    printed = eval_replay.table(results, 3)
    assert "| type_cap=1 type_block=2 |" in printed and "| defaults |" in printed
    for bad in ("rrf_k", "depth=5", f"dense_depth={eval_replay.LIST_DEPTH + 1}"):
        with pytest.raises(ValueError, match=r"rrf_k|depths"):
            eval_replay.Variant.parse(bad)
