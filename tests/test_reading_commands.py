"""What the reading commands (search, context, related, show, sql, export, report, status)
take and where they write: an empty query lists, a habit from another tool is pointed at
the option meant, `--store` reads a copy in the user's cache and nothing lands in the
working directory, and `--debug` shows the error a failure came from."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from ghindex.config import cache_dir
from ghindex.query.filters import Filters
from ghindex.query.snapshot import Snapshot
from ghindex.serve import tools
from ghindex.snapshot import Store, publish
from ghindex.snapshot.local import reading_copy
from testkit.state import built_workdir


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A workdir with 6 issues of octo/hello, fetched and built."""
    return built_workdir(tmp_path_factory.mktemp("reading") / "work", 6)


@pytest.fixture(scope="module")
def store(built, tmp_path_factory):
    """A directory store holding that workdir, published once."""
    url = str(tmp_path_factory.mktemp("stores") / "store")
    publish(built, Store(url))
    return url


def handles(result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [hit["handle"] for hit in json.loads(result.stdout)["results"]]


@pytest.mark.slow
def test_an_empty_query_lists_the_newest_items_as_leaving_it_out_does(built, run):
    listed = handles(run("search", "--snapshot", str(built), "--json"))

    assert len(listed) == 6
    assert handles(run("search", "", "--snapshot", str(built), "--json")) == listed
    assert handles(run("search", "   ", "--snapshot", str(built), "--json")) == listed
    with Snapshot.open(built) as snap:  # the MCP tool answers the same
        answer = tools.search(snap, "", Filters())
    assert [hit["handle"] for hit in answer["results"]] == listed
    shown = run("search", "", "--snapshot", str(built), "--top-k", "2")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(f" 1. {listed[0]}  (issue, open)")
    assert f" 2. {listed[1]}  (issue, open)" in shown.stdout
    assert " 3. " not in shown.stdout


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        (("search", "-n", "5", "x"), "'-k/--top-k'"),
        (("search", "-n5", "x"), "'-k/--top-k'"),
        (("search", "--limit", "5", "x"), "'-k/--top-k'"),
        (("search", "--top", "5", "x"), "'-k/--top-k'"),  # not click's '--hops', '--type'
        (("search", "--num", "5", "x"), "'-k/--top-k'"),
        (("sql", "--limit", "5", "SELECT 1"), "'--max-rows'"),
    ],
)
def test_an_option_from_another_tool_names_the_one_meant(typed, meant, run):
    result = run(*typed)

    assert result.exit_code == 2
    option = typed[1][:2] if typed[1] == "-n5" else typed[1]
    assert (
        result.stderr.splitlines()[-1] == f"Error: No such option '{option}'. Did you mean {meant}?"
    )
    assert result.stderr.count("Error") == 1


def test_an_unknown_option_keeps_the_suggestions_click_makes(run):
    result = run("search", "--stat", "open", "x")

    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "Error: No such option '--stat'. (Did you mean one of: '--path', '--sort', '--state'?)"
    )
    plain = run("context", "-n", "3", "a question")  # no number of results to point at
    assert plain.stderr.splitlines()[-1] == "Error: No such option '-n'."


@pytest.mark.slow
def test_reading_commands_with_a_store_write_nothing_where_they_run(
    store, tmp_path, monkeypatch, run
):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.delenv("GHINDEX_WORKDIR")  # the default workdir, ./.ghindex
    out = tmp_path / "out"
    commands = [
        ("search", "topic 1", "--mode", "sparse"),
        ("search", ""),
        ("context", "details of issue 3", "--max-tokens", "200"),
        ("related", "octo/hello#1"),
        ("show", "octo/hello#1"),
        ("sql", "SELECT count(*) AS n FROM issues"),
        ("status",),
        ("export", str(out / "parquet")),
        ("report", "--out", str(out / "report.html")),
    ]
    for command in commands:
        result = run(*command, "--store", store)
        assert result.exit_code == 0, (command, result.output)
        assert list(here.iterdir()) == [], command

    assert run("sql", "SELECT count(*) AS n FROM issues", "--store", store).stdout.split() == [
        "n",
        "-",
        "6",
    ]
    assert sorted(p.name for p in out.iterdir()) == ["parquet", "report.html"]
    copy = reading_copy(Store(store))
    assert copy.parent == cache_dir() / "stores"
    assert (copy / "manifest.json").exists()
    assert not (tmp_path / ".ghindex").exists()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_debug_shows_the_store_error_a_failure_came_from(isolated):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{closed_port()}",  # nothing listens: refused
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    args = ["search", "anything", "--store", "s3://bucket/x"]
    runs = {  # side by side: each waits out the client's retries
        debug: subprocess.Popen(
            [sys.executable, "-m", "ghindex", *(["--debug"] if debug else []), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for debug in (False, True)
    }
    (_, plain), (_, debug) = (runs[False].communicate(timeout=120), runs[True].communicate(120))

    assert runs[False].returncode == 1
    lines = plain.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: cannot list refs/latest/ in s3://bucket/x: Generic S3 error")
    assert lines[0].endswith("(check the store URL and the credentials in the environment)")
    assert "Connection refused" not in plain
    assert runs[True].returncode == 1
    assert "Traceback (most recent call last)" in debug
    assert "obstore.exceptions.GenericError" in debug  # the store library's own error
    assert "Connection refused" in debug
    assert "ghindex.errors.SnapshotError: cannot list refs/latest/ in s3://bucket/x" in debug
    assert list(isolated.iterdir()) == []


def test_the_store_error_shown_with_debug_carries_no_credentials():
    from ghindex.snapshot.stores import cause

    said = ValueError(
        "Error performing GET https://acct.blob.core.windows.net/c?restype=container"
        "&sv=2024&sig=abc%2Bdef&se=2030 for https://user:hunter2@minio.local/b/x"
        "?X-Amz-Signature=f00d&X-Amz-Security-Token=t0k&prefix=key%2F"
    )

    assert str(cause(said)) == (
        "builtins.ValueError: Error performing GET https://acct.blob.core.windows.net/c"
        "?restype=container&sv=2024&sig=[redacted]&se=2030 for https://[redacted]@minio.local"
        "/b/x?X-Amz-Signature=[redacted]&X-Amz-Security-Token=[redacted]&prefix=key%2F"
    )
