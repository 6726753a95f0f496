"""Secrets never reach a snapshot: redaction at ingestion, checked end to end.

The credentials come from testkit/secrets_corpus.py (synthetic, generated from a seed).
The end-to-end test plants every format in titles, bodies, comments, review diffs,
release notes, discussions, a git commit's diff and docs, fetches and builds a real
workdir, and then looks for each secret everywhere: every text column of every table,
every string column of the Lance table, the raw bytes of every file, and what `search`,
`show` and `export` print.
"""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import pytest
from test_gitsource import Repo

from ghindex.state import redact as redaction
from ghindex.state.database import open_state
from ghindex.state.redact import redact
from testkit.github_server import (
    comment_node,
    discussion_node,
    issue_node,
    pull_request_node,
    release_node,
    review_comment_node,
    thread_node,
)
from testkit.secrets_corpus import corpus
from testkit.state import rows

SECRETS = corpus()
ONE_LINE = [s for s in SECRETS if s.one_line]
CONTEXTS = {
    "prose": "Here is what I used: {} and it failed.",
    "diff line": "+    {}",
    "quote": "> {}",
    "inline code": "run it with `{}` please",
}

ORDINARY = [
    "Fixed in 3f2a9c1d4e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9c (see #12).",
    "Docs at https://www.python-httpx.org/advanced/#proxies and https://github.com/encode/httpx",
    "![img](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "+  integrity sha512-3RkZ9fJ0Ywl7IY3X2dyKEpuEEJb1mrYUfxcWQNeAgiRyWTcQNGnVPvsyB2Lsx0rdvONW"
    "BBS7yD0DVbNP5yk6xg==",
    "+certifi==2024.2.2 --hash=sha256:"
    "dc383c07b76109f368f6106eee2b593b04a011ea4d55f652c6ca24a754d1cdd1",
    "Use `token = os.environ['GITHUB_TOKEN']` in the workflow.",
    "password: required, and the token must be set",
    "+                    password=self.cert[2],",
    "+        token = b64encode(userpass).decode()",
    "auth = httpx.BasicAuth(username='user', password='password123')",
    "proxy = 'socks5://user:pass@host:port'",
    "uuid 123e4567-e89b-12d3-a456-426614174000 and version 1.2.3",
    '"author": "octocat2", author_id=12345678a',
    "tokenizer: cl100k_base",
    "token_url: https://oauth2.googleapis.com/token",
    "pwd: /home/user2/projects and private_key_path = ~/.ssh/id_rsa2",
    "passwordless: webauthn2, authentication: kubernetes2",
]


@pytest.fixture
def workdir(isolated):
    return isolated / "work"


# ------------------------------------------------------------------------ the detectors


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s.format)
@pytest.mark.parametrize("context", list(CONTEXTS))
def test_every_format_is_redacted_in_every_context(secret, context):
    template = CONTEXTS[context]
    text = "\n".join(template.format(line) for line in secret.snippet.splitlines())

    out = redact(text)

    assert [part for part in secret.parts if part in out] == []
    assert "[redacted:" in out


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == text


def test_the_marker_keeps_the_kind_and_what_is_around_the_secret():
    token = "ghp_" + "a1B2" * 9
    text = f"token {token} and https://bob:Xk29vLq81mZ@db.example.com/x"

    assert redact(text) == (
        "token [redacted:github-token] and https://bob:[redacted:url-password]@db.example.com/x"
    )


def test_redaction_is_idempotent():
    text = "\n\n".join(s.snippet for s in SECRETS)
    once = redact(text)
    assert redact(once) == once


def test_a_key_block_is_found_whole_before_any_splitting():
    (key,) = [s for s in SECRETS if s.format == "private-key-unfenced-4096"]
    body = "word " * 300 + "\n\n" + key.snippet + "\n\n" + "word " * 300

    out = redact(body)

    assert out.count("[redacted:private-key]") == 1
    assert [part for part in key.parts if part in out] == []
    assert out.startswith("word ") and out.rstrip().endswith("word")


def test_counts_per_kind_are_tallied_and_redaction_can_be_off():
    text = "ghp_" + "a" * 36 + " and AKIAABCDEFGHIJKLMNOP"
    with redaction.tally() as counts:
        redact(text)
    with redaction.tally(enabled=False) as off:
        raw = redact(text)

    assert dict(counts) == {"github-token": 1, "aws-key": 1}
    assert raw == text and not off


# ---------------------------------------------------------------------- end to end


def planted_repo(github, tmp_path: Path) -> Path:
    """octo/hello on the test server and a git clone, with every secret in every place."""
    issues = []
    for number, secret in enumerate(SECRETS, start=1):
        title = f"Leak {secret.snippet}" if secret.one_line else f"Leak {secret.format}"
        body = f"I pasted this by mistake:\n\n{secret.snippet}\n\nSorry."
        comments = [comment_node(1000 + number, f"Also here:\n{secret.snippet}")]
        issues.append(issue_node(number, title=title, body=body, comments=comments))
    long_key = next(s for s in SECRETS if s.format == "private-key-unfenced-4096")
    issues.append(issue_node(900, body="Intro paragraph. " * 120 + "\n" + long_key.snippet))
    every = "\n\n".join(s.snippet for s in SECRETS)
    review = review_comment_node(77, "this line leaks", diffHunk="@@ -1 +1,40 @@\n" + "\n".join(
        f"+{line}" for line in every.splitlines()))  # fmt: skip
    github.add_repo(
        "octo/hello",
        issues=issues,
        pull_requests=[
            pull_request_node(950, body=every, reviewThreads=[thread_node("t", [review])])
        ],
        discussions=[discussion_node(960, body=every)],
        releases=[release_node("v1.0", description=every)],
    )  # fmt: skip
    clone = Repo(tmp_path / "clone")
    clone.write("README.md", "# Hello\n")
    clone.commit("Start")
    clone.write("config/.env", every + "\n")
    clone.write("docs/setup.md", f"# Setup\n\n{every}\n")
    clone.commit("Add the deployment settings\n\n" + ONE_LINE[0].snippet)
    return clone.path


def text_columns(path: Path) -> list[tuple[str, str]]:
    con = open_state(path, read_only=True)
    try:
        return con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'main' AND data_type IN ('VARCHAR', 'JSON') "
            "AND table_name IN (SELECT table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE')"
        ).fetchall()
    finally:
        con.close()


def everything_stored(workdir: Path) -> str:
    """Every text value of the state, every string of the Lance chunks, as one string."""
    state = workdir / "state.duckdb"
    values = []
    con = open_state(state, read_only=True)
    try:
        for table, column in text_columns(state):
            values += [v for (v,) in con.execute(f'SELECT "{column}"::VARCHAR FROM {table}')
                       .fetchall() if v]  # fmt: skip
    finally:
        con.close()
    chunks = lancedb.connect(workdir / "lance").open_table("chunks").to_arrow()
    for name in chunks.column_names:
        if str(chunks.schema.field(name).type) in ("string", "large_string"):
            values += [v for v in chunks.column(name).to_pylist() if v]
    return "\n".join(values)


def survivors(text: str) -> list[str]:
    return [f"{s.format}: {part[:12]}…" for s in SECRETS for part in s.parts if part in text]


@pytest.mark.slow
def test_no_secret_survives_anywhere_in_a_built_workdir(github, workdir, run, isolated):
    clone = planted_repo(github, isolated)

    fetched = run("fetch", "--repo", "octo/hello", "--json")
    built = run("build", "--git", str(clone), "--repo", "octo/hello", "--json")

    assert fetched.exit_code == 0, fetched.output
    assert built.exit_code == 0, built.output
    assert survivors(everything_stored(workdir)) == []
    raw = b"".join(p.read_bytes() for p in workdir.rglob("*") if p.is_file())
    assert [s.format for s in SECRETS for part in s.parts if part.encode() in raw] == []
    # what the doors print
    doors = [
        ("search", "leak", "--json", "-k", "50"),
        ("show", "octo/hello#1"),
        ("show", "octo/hello#950"),
        ("sql", "SELECT * FROM commit_files", "--json"),
    ]
    for args in doors:
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)
        assert survivors(result.output) == [], args
    exported = run("export", str(isolated / "export"))
    assert exported.exit_code == 0, exported.output
    dump = b"".join(p.read_bytes() for p in (isolated / "export").rglob("*") if p.is_file())
    assert [s.format for s in SECRETS for part in s.parts if part.encode() in dump] == []
    # counted per kind, never the secrets themselves
    redactions = json.loads(fetched.stdout)["redactions"]
    assert redactions["github-token"] >= 5 * 3 and redactions["private-key"] >= 4 * 3
    assert json.loads(built.stdout)["redactions"]["private-key"] >= 4
    status = json.loads(run("status", "--json").stdout)
    assert status["redaction"]["rules"] == {"github": "v2", "git": "v2"}
    assert status["redaction"]["redacted"]["github-token"] >= redactions["github-token"]
    assert "github-token" in run("status").stdout


def test_what_github_echoes_in_errors_is_stored_redacted(github, workdir, run):
    github.add_repo("octo/hello", issues=[issue_node(1)])
    leaked = "ghp_" + "Z9" * 18
    github.graphql_error_next(f"Internal error for token {leaked}", after=1)

    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 1
    assert leaked not in result.stderr
    stored = rows(workdir, "SELECT error, stats FROM runs")
    assert leaked not in json.dumps(stored, default=str)
    assert "[redacted:github-token]" in stored[0][0]


def test_redact_false_keeps_raw_text_and_switching_back_redacts_in_place(
    github, workdir, run, isolated
):
    token = "ghp_" + "Q7" * 18
    github.add_repo("octo/hello", issues=[issue_node(1, body=f"token {token}")])
    (isolated / "ghindex.toml").write_text("redact = false\n")

    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    assert rows(workdir, "SELECT body FROM issues") == [(f"token {token}",)]

    (isolated / "ghindex.toml").write_text("redact = true\n")
    switched = run("fetch", "--repo", "octo/hello")

    assert switched.exit_code == 0, switched.output
    assert "warning: redacting the stored github text" in switched.stderr
    assert rows(workdir, "SELECT body FROM issues") == [("token [redacted:github-token]",)]
    # the old value is not left in the file's freed blocks either
    assert token.encode() not in (workdir / "state.duckdb").read_bytes()


def test_turning_redaction_off_reads_everything_again(github, workdir, run, isolated):
    token = "ghp_" + "W4" * 18
    github.add_repo("octo/hello", issues=[issue_node(1, body=f"token {token}")])
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    assert rows(workdir, "SELECT body FROM issues") == [("token [redacted:github-token]",)]
    github.requests.clear()

    (isolated / "ghindex.toml").write_text("redact = false\n")
    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 0, result.output
    assert "reading it all again to store it raw" in result.stderr
    issues = [r for r in github.requests if r["operation"] == "Issues"]
    assert issues[0]["variables"]["since"] is None  # a full read, not from the mark
    assert rows(workdir, "SELECT body FROM issues") == [(f"token {token}",)]
    assert rows(workdir, "SELECT value FROM ghindex_meta WHERE key = 'redaction:github'") == [
        ("off",)
    ]


@pytest.mark.slow
def test_a_workdir_from_before_redaction_is_redacted_and_its_index_pruned(
    github, workdir, run, isolated
):
    token = "ghp_" + "M3" * 18
    github.add_repo("octo/hello", issues=[issue_node(1, body=f"old token {token}")])
    (isolated / "ghindex.toml").write_text("redact = false\n")
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    assert run("build").exit_code == 0
    # as an older ghindex left it: raw text, no record of redaction
    con = open_state(workdir / "state.duckdb")
    con.execute("DELETE FROM ghindex_meta")
    con.close()
    (isolated / "ghindex.toml").unlink()
    raw_hashes = cache_hashes(workdir)

    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    assert run("build").exit_code == 0

    assert rows(workdir, "SELECT body FROM issues") == [("old token [redacted:github-token]",)]
    raw = b"".join(p.read_bytes() for p in workdir.rglob("*") if p.is_file())
    assert token.encode() not in raw  # old Lance versions and index files pruned too
    # nor the raw text's vector, which can be inverted into much of the text
    db = lancedb.connect(workdir / "lance")
    now = set(db.open_table("chunks").to_arrow().column("content_hash").to_pylist())
    assert cache_hashes(workdir) == now and not raw_hashes & now
    assert len(list((workdir / "lance").glob("embeddings_*/_versions/*.manifest"))) == 1


def cache_hashes(workdir: Path) -> set[str]:
    db = lancedb.connect(workdir / "lance")
    names = [n for n in db.list_tables().tables if n.startswith("embeddings_")]
    assert len(names) == 1
    return set(db.open_table(names[0]).to_arrow().column("content_hash").to_pylist())


@pytest.mark.slow
def test_merging_a_raw_shard_redacts_it(github, run, isolated, monkeypatch):
    token = "ghp_" + "K5" * 18
    github.add_repo("octo/a", issues=[issue_node(1, repo="octo/a", body=f"a {token}")])
    github.add_repo("octo/b", issues=[issue_node(1, repo="octo/b", body="nothing")])
    (isolated / "ghindex.toml").write_text("redact = false\n")
    monkeypatch.setenv("GHINDEX_WORKDIR", str(isolated / "shard-a"))
    assert run("fetch", "--repo", "octo/a").exit_code == 0
    (isolated / "ghindex.toml").unlink()
    monkeypatch.setenv("GHINDEX_WORKDIR", str(isolated / "shard-b"))
    assert run("fetch", "--repo", "octo/b").exit_code == 0
    monkeypatch.setenv("GHINDEX_WORKDIR", str(isolated / "merged"))

    result = run("merge", str(isolated / "shard-a"), str(isolated / "shard-b"))

    assert result.exit_code == 0, result.output
    assert "note: redacting the stored github text" in result.stderr
    assert rows(isolated / "merged", "SELECT body FROM issues ORDER BY repo") == [
        ("a [redacted:github-token]",),
        ("nothing",),
    ]
