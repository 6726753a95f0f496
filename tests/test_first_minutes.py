"""A newcomer's first minutes, as the README tells them: `ghindex demo` in a fresh
directory, then every command the demo suggests, typed exactly as it prints them, each
in its own process with no extra flag; the MCP server answers a real client session."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import mcp
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.slow


def ghindex(args: list[str], cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ghindex", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A fresh directory after `ghindex demo`, and the environment a newcomer has (no
    GHINDEX_* settings but the test's own cache of the exported query encoder)."""
    home = tmp_path_factory.mktemp("newcomer")
    scratch = tmp_path_factory.mktemp("tmp")  # the temporary directory the demo names
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GHINDEX_", "GITHUB"))}
    env.update(
        HF_HUB_OFFLINE="1", GHINDEX_CACHE_DIR=os.environ["GHINDEX_CACHE_DIR"], TMPDIR=str(scratch)
    )
    demo = ghindex(["demo"], home, env)
    assert demo.returncode == 0, demo.stderr
    return home, env, demo.stdout


def suggested(stdout: str) -> list[list[str]]:
    """The commands the demo's last lines suggest, as a shell would split them."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Next, as typed"))
    commands = [shlex.split(line.split("  #")[0]) for line in lines[start + 1 :]]
    assert all(c[0] == "ghindex" for c in commands)
    return [c[1:] for c in commands]


def test_the_demo_builds_in_its_own_directory_and_says_the_next_commands_work_as_typed(fresh):
    home, _env, stdout = fresh
    assert sorted(p.name for p in (home / ".ghindex").iterdir()) == ["demo"]
    assert "Next, as typed (.ghindex holds no data of its own, so commands read the demo):" in (
        stdout
    )
    assert [c[0] for c in suggested(stdout)] == [
        "search",
        "show",
        "related",
        "sql",
        "status",
        "export",
        "report",
        "serve",
    ]
    assert not any("--snapshot" in c for c in suggested(stdout))


@pytest.fixture(scope="module")
def after_a_failed_build(fresh, tmp_path_factory):
    """A copy of the fresh directory where the newcomer then tried `ghindex build --git`
    on a clone with no GitHub origin: it failed, leaving `.ghindex/state.duckdb` behind."""
    home, env, stdout = fresh
    copy = tmp_path_factory.mktemp("failed") / "home"
    shutil.copytree(home, copy)
    clone = copy / "project"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    (clone / "README.md").write_text("# project\n")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    failed = ghindex(["build", "--git", "project"], copy, env)
    assert failed.returncode == 1 and len(failed.stderr.splitlines()) == 1, failed.stderr
    assert "--repo owner/name" in failed.stderr
    assert (copy / ".ghindex" / "state.duckdb").exists()
    return copy, env, stdout


@pytest.mark.parametrize("after", ["the demo", "a failed build"])
def test_every_suggested_read_command_succeeds_as_typed(request, after):
    home, env, stdout = request.getfixturevalue(
        "fresh" if after == "the demo" else "after_a_failed_build"
    )
    for made in ("ghindex-demo-export", "ghindex-demo-report.html"):  # by the other case
        path = Path(env["TMPDIR"]) / made
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    before = sorted(p.name for p in (home / ".ghindex").iterdir())
    around = {p.name for p in home.iterdir()}
    outputs = {}
    for command in suggested(stdout):
        if command[0] == "serve":
            continue  # below, with a client
        done = ghindex(command, home, env)
        assert done.returncode == 0, (command, done.stderr)
        assert done.stderr.splitlines()[0] == (
            "reading the demo snapshot in .ghindex/demo (.ghindex holds no data of its own yet)"
        )
        assert "None" not in done.stdout.split() and "Error" not in done.stderr
        outputs[command[0]] = done.stdout
    assert outputs["search"].startswith(" 1. ")
    assert outputs["show"].splitlines()[0] == "sigmavirus24/github3.py#785  (pull_request, closed)"
    assert "closes    sigmavirus24/github3.py#784" in outputs["related"]
    assert outputs["sql"].splitlines()[2].split() == ["betamaxpy/betamax", "83"]
    assert "source    .ghindex/demo" in outputs["status"]
    # export and report wrote exactly the paths they name, in the temporary directory
    scratch = env["TMPDIR"]
    assert [c[1:] for c in suggested(stdout) if c[0] in ("export", "report")] == [
        [f"{scratch}/ghindex-demo-export"],
        ["--out", f"{scratch}/ghindex-demo-report.html"],
    ]
    exported = f"{scratch}/ghindex-demo-export/issues/**/*.parquet"
    with duckdb.connect() as con:
        assert con.execute("SELECT count(*) FROM read_parquet(?)", [exported]).fetchall() == [
            (223,)
        ]
    assert os.path.getsize(f"{scratch}/ghindex-demo-report.html") > 10_000
    # reading made nothing in the workdir beside the demo, nor where it was typed
    assert sorted(p.name for p in (home / ".ghindex").iterdir()) == before
    assert {p.name for p in home.iterdir()} <= around | {"serve-stderr.txt"}


def test_serve_as_typed_answers_an_mcp_client(fresh):
    home, env, _stdout = fresh
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ghindex", "serve"], env=env, cwd=str(home)
    )

    async def session(errlog):
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            found = await client.call_tool("search", {"query": "thread safe cassettes"})
            status = await client.call_tool("status", {})
            return found, status

    with open(home / "serve-stderr.txt", "w") as errlog:
        found, status = asyncio.run(session(errlog))

    assert not found.is_error, found.content
    assert found.structured_content["results"][0]["handle"].startswith("betamaxpy/betamax#")
    assert status.structured_content["status"] == "serving"
    assert "Traceback" not in (home / "serve-stderr.txt").read_text()


def test_with_data_of_its_own_the_workdir_wins_over_the_demo(fresh, tmp_path):
    home, env, _stdout = fresh
    own = tmp_path / "own"
    (own / ".ghindex").mkdir(parents=True)
    os.symlink(home / ".ghindex" / "demo", own / ".ghindex" / "demo")
    built = ghindex(["demo", "--dest", str(own / ".ghindex"), "--json"], own, env)
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["workdir"] == str(own / ".ghindex")

    done = ghindex(["status"], own, env)

    assert done.returncode == 0, done.stderr
    assert "reading the demo" not in done.stderr
    assert "source    .ghindex\n" in done.stdout


def test_reading_commands_in_an_empty_directory_make_nothing_and_say_what_to_do(fresh, tmp_path):
    _home, env, _stdout = fresh
    for command in (["search", "anything"], ["status"], ["sql", "SELECT 1"], ["show", "o/r#1"]):
        done = ghindex(command, tmp_path, env)
        assert done.returncode == 1, command
        assert done.stderr.strip().splitlines()[-1] == (
            "Error: no snapshot in .ghindex: run `ghindex demo` for the sample, `ghindex fetch` "
            "and `ghindex build` for your repositories, or `ghindex pull --store URL`"
        ), command
    assert list(tmp_path.iterdir()) == []


def test_a_reader_that_stops_early_is_not_an_error(fresh):
    home, env, _stdout = fresh
    reader = subprocess.Popen(
        [sys.executable, "-m", "ghindex", "status"],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reader.stdout.close()  # the reader is gone before the first line, as `| head -0`
    _out, err = reader.communicate(timeout=120)
    assert "Error" not in err and "Traceback" not in err, err


def test_a_reading_command_ends_at_once_yet_hands_over_all_it_wrote(fresh):
    """Reading commands skip the interpreter's teardown (`cli.main`): whatever they wrote,
    far past a pipe's buffer, still arrives whole, and the exit codes are as before."""
    home, env, _stdout = fresh
    query = (
        "SELECT i, repeat(chr(CAST(97 + i % 26 AS INTEGER)), 100) AS text "
        "FROM range(6000) t(i) ORDER BY i"
    )
    done = ghindex(["sql", query, "--json", "--max-rows", "100000"], home, env)

    assert done.returncode == 0, done.stderr
    assert len(done.stdout) > 512 * 1024
    rows = json.loads(done.stdout)["rows"]
    assert [(r["i"], r["text"]) for r in rows] == [(i, chr(97 + i % 26) * 100) for i in range(6000)]
    usage = ghindex(["search", "x", "--mode", "nope"], home, env)
    assert usage.returncode == 2 and "Invalid value for '--mode'" in usage.stderr
    failed = ghindex(["show", "nobody/nothing#1"], home, env)
    assert failed.returncode == 1 and failed.stderr.strip().splitlines()[-1].startswith("Error: ")


def test_only_commands_that_write_nothing_end_without_teardown():
    from ghindex.cli import QUICK_EXIT, cli

    assert set(cli.commands) >= QUICK_EXIT
    writers = {
        "fetch",
        "build",
        "merge",
        "demo",
        "publish",
        "pull",
        "update",
        "gc",
        "export",
        "report",
        "serve",
        "audit-secrets",
    }
    assert not QUICK_EXIT & writers
    assert set(cli.commands) == QUICK_EXIT | writers  # a new command is placed on purpose
