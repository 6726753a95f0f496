"""Secrets never reach a snapshot: redaction at ingestion, checked end to end.

The credentials come from testkit/secrets_corpus.py (synthetic, generated from a seed).
The end-to-end test plants every format in titles, bodies, comments, review diffs,
release notes, discussions, a git commit's diff and docs, fetches and builds a real
workdir, and then looks for each secret everywhere: every text column of every table,
every string column of the Lance table, the raw bytes of every file, what `search`,
`show`, `export` and every MCP tool give, and a published store's bytes. Hypothesis
draws fresh members of every family (command lines, config, long values, tokens hidden
by invisible characters, escapes and encodings among them) and checks that placeholders
and code in every password form are left alone.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import lancedb
import mcp
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
from testkit.secrets_corpus import FAMILIES, corpus, covered
from testkit.state import rows

SECRETS = corpus()
ONE_LINE = [s for s in SECRETS if s.one_line]
# Where people paste a credential. Line prefixes (a diff, a quote) apply to every line
# of a multi-line snippet; the others wrap it whole. Names take one-line ones only.
CONTEXTS = {
    "prose": "Here is what I used: {} and it failed.",
    "diff line": "+    {}",
    "quote": "> {}",
    "inline code": "run it with `{}` please",
    "title": "Leak: {}",
    "label": "needs-triage {}",
    "branch name": "fix/{}",
    "chunk boundary": "Intro paragraph. " * 150 + "\n{}\n" + "Outro paragraph. " * 150,
}
PER_LINE = ("diff line", "quote")
NAMES = ("title", "label", "branch name")


def placed(secret, context: str) -> str:
    template = CONTEXTS[context]
    if context in PER_LINE:
        return "\n".join(template.format(line) for line in secret.snippet.splitlines())
    return template.format(secret.snippet)


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
    # real text of the bundled sample that earlier rules took for secrets
    "System.Web, Version=4.0.0.0, Culture=neutral, PublicKeyToken=b03f5f7f11d50a3a",
    "curl https://eu.httpbin.org/digest-auth/auth/jerry/secret -v -u jerry:secret",
    "    sessions[r].headers.update({'X-API-KEY': 'API-KEY-#####'})",
    "    'hidToken': this_hidToken10,",
    "x-gridauth-accesskey:DOYOUNEEDTOKNOW x-gridauth-secretaccesskey:WHATISWITHALLTHEQUESTIONS",
    # what the hostile round's real data took for secrets (#48): a shortcode, a flag, a
    # template's field, code
    "I'd rather pass :laughing: on that one",
    "python run_speech_recognition_ctc.py --use_auth_token=True --push_to_hub",
    'login(token=f"{hf_token}")',
    'HF_TOKEN: "{hf_token}"',
    'common_voice = common_voice.cast_column("audio", Audio(sampling_rate=16_000))',
    # commands and config with a reference where the password would be
    "docker run -p 8080:80 nginx && mysql -u root -p mydb",
    "openssl pkcs12 -in c.p12 -passin env:P12_PASSWORD -nodes",
    'echo "$TOKEN" | docker login -u ci -p "$DOCKER_PASSWORD" ghcr.io',
    "define('DB_PASSWORD', getenv('DB_PASSWORD'));",
    '<add key="SmtpPassword" value="" />',
    "Server=db;Database=app;User Id=app;Password=${DB_PASSWORD};",
    "uses: actions/checkout@v4 and sqlplus / as sysdba",
]


@pytest.fixture
def workdir(isolated):
    return isolated / "work"


# ------------------------------------------------------------------------ the detectors


def test_the_corpus_is_broad():
    """At least 150 formats, every family of where a credential sits among them."""
    assert len({s.format for s in SECRETS}) >= 150
    assert {s.family for s in SECRETS} == set(FAMILIES)


@pytest.mark.parametrize("context", list(CONTEXTS))
def test_every_format_is_redacted_in_every_context(context):
    """Each of the corpus's formats, synthetic values behind real prefixes, in each
    place people paste them: nothing of the secret survives."""
    survived = []
    for secret in SECRETS:
        if context in NAMES and not secret.one_line:
            continue
        text = placed(secret, context)
        spans = redaction.find(text)
        if not all(covered(text, part, spans) for part in secret.parts):
            survived.append(secret.format)

    assert survived == []


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

    assert dict(counts) == {"github-token": 1, "aws-access-key-id": 1}
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
    review = review_comment_node(
        77,
        "this line leaks",
        diffHunk="@@ -1 +1,40 @@\n" + "\n".join(f"+{line}" for line in every.splitlines()),
    )
    github.add_repo(
        "octo/hello",
        issues=issues,
        pull_requests=[
            pull_request_node(950, body=every, reviewThreads=[thread_node("t", [review])])
        ],
        discussions=[discussion_node(960, body=every)],
        releases=[release_node("v1.0", description=every)],
    )
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
            values += [
                v
                for (v,) in con.execute(f'SELECT "{column}"::VARCHAR FROM {table}').fetchall()
                if v
            ]
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
    # what every MCP tool answers an agent, in a real client session
    for tool, arguments in mcp_calls():
        text = mcp_answer(workdir, tool, arguments)
        assert survivors(text) == [], tool
        assert tool in ("status", "related") or "[redacted:" in text, tool  # it held text
    exported = run("export", str(isolated / "export"))
    assert exported.exit_code == 0, exported.output
    dump = b"".join(p.read_bytes() for p in (isolated / "export").rglob("*") if p.is_file())
    assert [s.format for s in SECRETS for part in s.parts if part.encode() in dump] == []
    # and a published store's bytes
    published = run("publish", "--store", str(isolated / "store"))
    assert published.exit_code == 0, published.output
    store = b"".join(p.read_bytes() for p in (isolated / "store").rglob("*") if p.is_file())
    assert [s.format for s in SECRETS for part in s.parts if part.encode() in store] == []
    # counted per kind, never the secrets themselves
    redactions = json.loads(fetched.stdout)["redactions"]
    assert redactions["github-token"] >= 5 * 3 and redactions["private-key"] >= 4 * 3
    assert json.loads(built.stdout)["redactions"]["private-key"] >= 4
    status = json.loads(run("status", "--json").stdout)
    version = redaction.rules_version()
    assert status["redaction"]["rules"] == {"github": version, "git": version}
    assert status["redaction"]["redacted"]["github-token"] >= redactions["github-token"]
    assert "github-token" in run("status").stdout


def mcp_calls() -> list[tuple[str, dict]]:
    sql = "SELECT * FROM issues UNION ALL BY NAME SELECT * FROM comments"
    return [
        ("search", {"query": "leak", "top_k": 50}),
        ("search", {"top_k": 50, "sort": "updated_desc"}),
        ("fetch", {"handles": [f"octo/hello#{n}" for n in range(1, 40)] + ["octo/hello#950"]}),
        ("context", {"query": "leak pasted by mistake", "max_tokens": 8000}),
        ("related", {"handle": "octo/hello#950"}),
        ("sql", {"query": sql, "max_rows": 1000}),
        ("sql", {"query": "SELECT * FROM commit_files", "max_rows": 1000}),
        ("status", {}),
    ]


def mcp_answer(workdir: Path, tool: str, arguments: dict) -> str:
    """The text an MCP client gets for one call on the served `workdir`."""
    from ghindex.serve import SnapshotHolder, create_server, open_snapshot

    server = create_server(SnapshotHolder(current=open_snapshot(workdir)))

    async def go():
        async with mcp.Client(server) as client:
            return await client.call_tool(tool, arguments)

    result = asyncio.run(go())
    assert not result.is_error, (tool, result.content[0].text)
    return result.content[0].text


def test_what_github_echoes_in_errors_is_stored_redacted(github, workdir, run):
    github.add_repo("octo/hello", issues=[issue_node(1)])
    leaked = "ghp_" + "Z9" * 18
    github.graphql_error_next(f"Internal error for token {leaked}", after=1)

    result = run("fetch", "--repo", "octo/hello")

    # An error on one surface is that surface's gap (#49): the run is partial, and the
    # echoed text is kept only redacted, in the warning and in the run's record.
    assert result.exit_code == 0
    assert leaked not in result.stderr
    assert "[redacted:github-token]" in result.stderr
    stored = rows(workdir, "SELECT status, error, stats FROM runs")
    assert leaked not in json.dumps(stored, default=str)
    assert stored[0][0] == "partial"
    assert "[redacted:github-token]" in stored[0][2]


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


# ------------------------------------------------------------- names, audit, new rules


def named_secrets() -> dict[str, str]:
    """One distinct one-line secret for each name field GitHub lets people write."""
    picks = [s for s in ONE_LINE if "\n" not in s.snippet and " " not in s.parts[0]]
    fields = [
        "label",
        "label_description",
        "branch",
        "base_branch",
        "milestone",
        "tag",
        "release_name",
        "category",
        "repo_description",
        "default_branch",
    ]
    return {f: picks[i * 3].parts[0] for i, f in enumerate(fields)}


def names_repo(github, secrets: dict[str, str]) -> None:
    label = {
        "name": f"bug {secrets['label']}",
        "color": "ff0000",
        "description": f"see {secrets['label_description']}",
    }
    milestone = {
        "number": 1,
        "title": f"v2 {secrets['milestone']}",
        "state": "OPEN",
        "dueOn": None,
        "url": "https://github.com/octo/hello/milestone/1",
    }
    github.add_repo(
        "octo/hello",
        repository={
            "description": f"hello {secrets['repo_description']}",
            "defaultBranchRef": {"name": f"main-{secrets['default_branch']}"},
        },
        issues=[issue_node(1, labels={"nodes": [label]}, milestone=milestone)],
        pull_requests=[
            pull_request_node(
                2,
                headRefName=f"fix/{secrets['branch']}",
                baseRefName=f"rel/{secrets['base_branch']}",
                labels={"nodes": [label]},
            )
        ],
        discussions=[
            discussion_node(3, category={"name": secrets["category"], "isAnswerable": True})
        ],
        releases=[release_node(secrets["tag"], name=f"Release {secrets['release_name']}")],
    )


def test_names_people_write_are_redacted_in_every_table(github, workdir, run):
    secrets = named_secrets()
    names_repo(github, secrets)

    fetched = run("fetch", "--repo", "octo/hello", "--json")

    assert fetched.exit_code == 0, fetched.output
    con = open_state(workdir / "state.duckdb", read_only=True)
    try:
        found = []
        for table, column in text_columns(workdir / "state.duckdb"):
            for (v,) in con.execute(f'SELECT "{column}"::VARCHAR FROM {table}').fetchall():
                found += [
                    f"{field} in {table}.{column}"
                    for field, value in secrets.items()
                    if value in str(v)
                ]
        labels = con.execute("SELECT label FROM issue_labels ORDER BY handle").fetchall()
        refs = con.execute("SELECT head_ref, base_ref FROM pull_requests").fetchall()
    finally:
        con.close()
    assert found == []
    raw = (workdir / "state.duckdb").read_bytes()
    assert [f for f, value in secrets.items() if value.encode() in raw] == []
    # the names keep what is not secret, and every table agrees on the redacted name
    assert labels[0][0].startswith("bug [redacted:") and labels[0] == labels[1]
    assert refs[0][0].startswith("fix/[redacted:") and refs[0][1].startswith("rel/[redacted:")


@pytest.mark.slow
def test_a_snapshot_made_with_older_rules_is_clean_after_one_update(github, workdir, run, isolated):
    """What older rules let through (a Hugging Face token, an `Authorization:` header, a
    label name) is in a published snapshot; one `update` replaces it everywhere, and the
    audit, which found it before, finds nothing after."""
    hf = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi"
    bearer = "Authorization: Bearer " + "Zq8" * 12
    label = {"name": "needs " + "hf_" + "PoIuYtReWqLkJhGfDsAmNbVcXzPoIuYtRe", "color": "ffffff"}
    github.add_repo(
        "octo/hello",
        issues=[issue_node(1, body=f"HF_TOKEN={hf}\n{bearer}", labels={"nodes": [label]})],
    )
    (isolated / "ghindex.toml").write_text("redact = false\n")
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    (isolated / "ghindex.toml").unlink()
    con = open_state(workdir / "state.duckdb")  # as ghindex's rules v2 recorded it
    con.execute("UPDATE ghindex_meta SET value = 'v2' WHERE key LIKE 'redaction:%'")
    con.close()
    assert run("build").exit_code == 0
    store = isolated / "store"
    assert run("publish", "--store", str(store)).exit_code == 0

    before = run("audit-secrets", "--store", str(store), "--json")

    assert before.exit_code == 1, before.output
    assert before.stdout.startswith("{"), before.output
    found = json.loads(before.stdout)
    assert found["found"] >= 3 and "huggingface-token" in found["kinds"]
    assert {f["handle"] for f in found["findings"]} >= {"octo/hello#1"}
    assert hf not in before.output and "Zq8Zq8" not in before.output  # kinds, never values

    updated = run("update", "--repo", "octo/hello", "--store", str(store))

    assert updated.exit_code == 0, updated.output
    assert "redacting the stored github text" in updated.stderr
    assert "huggingface-token" in updated.stderr  # what was found, per kind
    after = run("audit-secrets", "--store", str(store))
    assert after.exit_code == 0, after.output
    assert after.stdout.startswith("no secrets found in ")
    assert run("pull", "--store", str(store), "--dest", str(isolated / "newest")).exit_code == 0
    blobs = b"".join(p.read_bytes() for p in (isolated / "newest").rglob("*") if p.is_file())
    for value in (hf, "Zq8" * 12, label["name"][6:]):
        assert value.encode() not in blobs
    local = run("audit-secrets", "--snapshot", str(workdir))
    assert local.exit_code == 0, local.output


# ------------------------------------------------------------------ generated members

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_GENERATED = st.text(
    alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=16, max_size=48
).filter(
    lambda v: (
        any(c.isdigit() for c in v) and any(c.isupper() for c in v) and any(c.islower() for c in v)
    )
)
_NAMES = st.sampled_from(
    [
        "password",
        "DB_PASSWORD",
        "api_key",
        "apiKey",
        "client_secret",
        "AUTH_TOKEN",
        "secretKey",
        "GITHUB_TOKEN",
        "access-token",
        "private_key",
        "SENTRY_DSN_TOKEN",
        "x-api-key",
    ]
)
_FORMS = st.sampled_from(
    [
        "{n}={v}",
        "{n}: {v}",
        '"{n}": "{v}"',
        "{n} = '{v}'",
        "--{n} {v}",
        "--{n}={v}",
        "export {n}={v}",
        "<{n}>{v}</{n}>",
        "set {n}={v}",
        "{n} := {v}",
    ]
)
_SCHEMES = st.sampled_from(
    [
        "redis",
        "amqp",
        "mongodb+srv",
        "postgres",
        "https",
        "mysql",
        "ftp",
        "smtp",
        "ldap",
        "rediss",
        "sftp",
    ]
)
_AROUND = st.sampled_from(
    ["{}", "Here it is: {} thanks", "+    {}", "> {}", "`{}`", "fix/{}", "bug {}"]
)
# GHINDEX_EXAMPLES=5000 searches deeper than CI's 60 examples a property.
_FAST = settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@_FAST
@given(name=_NAMES, form=_FORMS, value=_GENERATED, around=_AROUND)
def test_a_secret_named_assignment_in_any_form_is_redacted(name, form, value, around):
    text = around.format(form.format(n=name, v=value))

    assert value not in redact(text)


@_FAST
@given(
    scheme=_SCHEMES,
    user=st.sampled_from(["", "app", "deploy", "x-access-token"]),
    password=_GENERATED,
    around=_AROUND,
)
def test_a_password_in_a_url_of_any_scheme_is_redacted(scheme, user, password, around):
    text = around.format(f"{scheme}://{user}:{password}@db.internal:5432/app")

    out = redact(text)

    assert password not in out and "@db.internal" in out


@_FAST
@given(
    scheme=st.sampled_from(["Bearer", "Basic", "token", "Bot", "", "ApiKey"]),
    value=_GENERATED,
    around=_AROUND,
)
def test_an_authorization_header_is_redacted_whatever_the_scheme(scheme, value, around):
    text = around.format(f"Authorization: {scheme} {value}".replace(":  ", ": "))

    assert value not in redact(text)


@_FAST
@given(text=st.text(max_size=400))
def test_redaction_is_idempotent_on_any_text(text):
    once = redact(text)

    assert redact(once) == once


def test_the_audit_prints_where_with_terminal_controls_made_visible(github, workdir, run, isolated):
    """A tag is part of a release's handle; one made to move the cursor, write the
    clipboard (OSC 52) or reverse the line reaches the audit's output escaped."""
    tag = "v1\x1b]52;c;aGk=\x07\u202e\x1b[2J"
    token = "hf_" + "MnBvCxZlKjHgFdSaPoIuYtReWqMnBvCxZl"
    github.add_repo("octo/hello", releases=[release_node(tag, description=f"use {token}")])
    (isolated / "ghindex.toml").write_text("redact = false\n")
    assert run("fetch", "--repo", "octo/hello").exit_code == 0

    result = run("audit-secrets")

    assert result.exit_code == 1, result.output
    assert "huggingface-token" in result.stdout and token not in result.stdout
    assert "octo/hello@release/v1\\u001b]52;c;aGk=\\u0007\\u202e\\u001b[2J" in result.stdout
    assert not any(c in result.stdout for c in "\x1b\x07\u202e")


def test_the_audit_refuses_what_it_cannot_read_in_one_line(run, isolated):
    (isolated / "empty-store").mkdir()
    (isolated / "nothing").mkdir()

    empty = run("audit-secrets", "--store", str(isolated / "empty-store"))
    nothing = run("audit-secrets", "--snapshot", str(isolated / "nothing"))
    both = run("audit-secrets", "--store", "x", "--snapshot", str(isolated / "nothing"))

    assert empty.exit_code == 1 and "holds no snapshot yet" in empty.stderr
    assert nothing.exit_code == 1 and "nothing" in nothing.stderr
    assert both.exit_code == 2 and "not both" in both.stderr
    for result in (empty, nothing):
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert sorted(p.name for p in isolated.iterdir()) == ["empty-store", "nothing"]


_HEX = st.text(alphabet="0123456789abcdef", min_size=7, max_size=64)
_ORDINARY_FORMS = st.sampled_from(
    [
        "Fixed in {h} (see #12).",
        "commit {h}",
        "sha256:{h}",
        "--hash=sha256:{h}",
        "https://github.com/octo/hello/commit/{h}",
        "token parsing fixed in {h}",
        "the password reset flow, see {h}",
        "uuid {u}",
        "bump to v{v}",
        "key: {h}",
    ]
)


@_FAST
@given(
    form=_ORDINARY_FORMS,
    digest=_HEX,
    uuid=st.uuids(),
    version=st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 999)),
)
def test_hashes_uuids_and_versions_are_never_taken_for_secrets(form, digest, uuid, version):
    """The members of real text's most common look-alikes: commit hashes and checksums
    (lower-case hex), UUIDs and version numbers, near words like `token` or `key`."""
    text = form.format(h=digest, u=uuid, v=".".join(map(str, version)))

    assert redact(text) == text


# ------------------------------------------------- every sub-family, generated (#48)

from testkit.secrets_corpus import formats, member  # noqa: E402

_SUB_FAMILIES = [
    (family, index)
    for family in FAMILIES
    for index in range(len(formats(family)) if family != "obfuscated" else 7 * 13)
]


@_FAST
@given(
    which=st.sampled_from(_SUB_FAMILIES),
    seed=st.integers(0, 2**32),
    context=st.sampled_from(list(CONTEXTS)),
)
def test_a_generated_member_of_every_family_is_redacted(which, seed, context):
    """Fresh values for every format of every family (provider formats, commands and
    config, values of any length, tokens hidden by invisible characters, escapes, a
    line break or an encoding), in every place people paste them."""
    import random

    secret = member(random.Random(seed), *which)
    if context in NAMES and not secret.one_line:
        context = "prose"
    text = placed(secret, context)
    spans = redaction.find(text)

    assert [p for p in secret.parts if not covered(text, p, spans)] == [], secret.snippet
    out = redact(text)
    assert [p for p in secret.parts if p in out] == []


_PLACEHOLDER_VALUES = st.sampled_from(
    [
        "{hf_token}",
        "{password}",
        "${DB_PASSWORD}",
        "$DB_PASSWORD",
        "%DB_PASSWORD%",
        "<password>",
        "********",
        "xxxxxxxxxxxx",
        "your-password",
        "changeme",
        "API-KEY-#####",
        ":laughing:",
        "True",
        "None",
        "this_hidToken10",
        "settings.DB_PASSWORD",
        "REPLACEWITHYOURS",
    ]
)
_PASSWORD_FORMS = st.sampled_from(
    [
        "{n}={v}",
        "{n}: {v}",
        '"{n}": "{v}"',
        "--{n} {v}",
        "--{n}={v}",
        "docker login -u ci -p {v} ghcr.io",
        "mysql -u root -p{v} app",
        "sshpass -p {v} ssh host",
        "redis-cli -a {v} ping",
        "define('{N}', '{v}');",
        '<add key="{n}" value="{v}" />',
        'ConvertTo-SecureString "{v}" -AsPlainText -Force',
        "Server=db;User Id=app;Password={v};",
        "sqlplus scott/{v}@orcl",
        'new NetworkCredential("deploy", "{v}")',
    ]
)


@_FAST
@given(name=_NAMES, form=_PASSWORD_FORMS, value=_PLACEHOLDER_VALUES, around=_AROUND)
def test_a_placeholder_or_code_in_any_password_form_is_left_alone(name, form, value, around):
    """Precision: the forms the rules read, given a reference, a template's field, an
    example or code instead of a value, redact nothing."""
    text = around.format(form.format(n=name, N=name.upper(), v=value))

    assert redact(text) == text
