"""State files every DuckDB user can open (#47): every state database ghindex creates or
rewrites is written in `STORAGE_VERSION`, which the DuckDB 1.4 LTS and 1.5 command-line
tools read; one function creates them, and the registry's `duckdb-cli` opens the demo's
and a fetched workdir's state and runs the documented queries."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ghindex.config import DEFAULT_MODEL, Settings
from ghindex.sample.demo import load_sample
from ghindex.state.database import STORAGE_VERSION, compact, open_state, storage_version
from testkit.state import rows

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "src" / "ghindex"
CREATOR = SOURCES / "state" / "database.py"  # `_connect`: the one way a file is opened


def duckdb_cli() -> str:
    """The `duckdb` command of the registry's `duckdb-cli` (the test extra), beside this
    Python's."""
    found = shutil.which("duckdb", path=str(Path(sys.executable).parent))
    assert found, "the duckdb command is missing: pip install -e '.[test]' (duckdb-cli)"
    return found


def cli_query(state: Path, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [duckdb_cli(), "-readonly", "-csv", str(state), "-c", sql],
        capture_output=True,
        text=True,
        timeout=60,
    )


def documented_queries() -> list[str]:
    """The README's `duckdb ... -c "..."` commands and docs/analysis.md's SQL blocks (less
    those that read Parquet an export wrote)."""
    readme = re.findall(r'^duckdb (?:-\S+ )*\S+ -c "(.*)"$', (ROOT / "README.md").read_text(), re.M)
    blocks = re.findall(r"```sql\n(.*?)```", (ROOT / "docs" / "analysis.md").read_text(), re.S)
    analysis = [block for block in blocks if "read_parquet" not in block]
    assert readme and len(analysis) >= 11
    return readme + analysis


def test_one_function_opens_a_state_database_for_writing():
    """Outside `state/database.py`, DuckDB is opened read-only, in memory, or by
    ATTACH ... READ_ONLY: no other code can create a file in another storage format."""
    offending = []
    for path in sorted(SOURCES.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "duckdb.connect":
                read_only = any(
                    k.arg == "read_only" and ast.unparse(k.value) == "True" for k in node.keywords
                )
                in_memory = not node.args or ast.unparse(node.args[0]) == "':memory:'"
                if not (read_only or in_memory or path == CREATOR):
                    offending.append(where)
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) in parts:
                    continue  # read with its f-string, whole
                text = node.value
            else:
                continue
            if re.search(r"\bATTACH\s+'", text) and "READ_ONLY" not in text:
                offending.append(where)
    assert offending == []


def test_a_new_state_database_is_written_in_the_storage_version(isolated):
    con = open_state(isolated / "new.duckdb")
    try:
        assert storage_version(con) == STORAGE_VERSION
    finally:
        con.close()


@pytest.mark.slow  # the duckdb command runs as a child process
def test_a_state_written_in_a_newer_format_is_rewritten_when_next_opened_for_writing(isolated):
    path = isolated / "state.duckdb"
    open_state(path).close()
    compact(path)
    with duckdb.connect(str(path)) as con:  # as ghindex before #47 wrote it: DuckDB's default
        con.execute("CREATE TABLE newer AS SELECT 42 AS answer")
    older = isolated / "older.duckdb"
    with duckdb.connect(str(older)) as con:
        con.execute(f"ATTACH '{path}' AS s (READ_ONLY)")
        con.execute("COPY FROM DATABASE s TO older")
    older.replace(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert storage_version(con) != STORAGE_VERSION
    open_state(path).close()
    with duckdb.connect(str(path), read_only=True) as con:
        assert storage_version(con) == STORAGE_VERSION
        assert con.execute("SELECT answer FROM newer").fetchall() == [(42,)]
    assert cli_query(path, "SELECT answer FROM newer").stdout.splitlines() == ["answer", "42"]


def check_opens_in_the_cli(state: Path) -> None:
    """The CLI answers every documented query over `state` as DuckDB 2.0 itself does."""
    for sql in documented_queries():
        done = cli_query(state, sql)
        assert done.returncode == 0 and not done.stderr, (sql, done.stderr)
    first = documented_queries()[0]
    expected = rows(state.parent, first)
    assert len(cli_query(state, first).stdout.splitlines()) == len(expected) + 1


@pytest.mark.slow
def test_the_demos_state_opens_in_the_duckdb_cli(isolated):
    settings = Settings(workdir=isolated / "work" / "demo", graphql_url="", model=DEFAULT_MODEL)
    load_sample(settings)  # the demo's state, as `ghindex demo` writes it
    check_opens_in_the_cli(settings.state_path)
    answer = cli_query(settings.state_path, "SELECT count(*) AS n FROM issues")
    assert answer.stdout.splitlines() == ["n", "223"]


@pytest.mark.slow
def test_a_fetched_workdirs_state_opens_in_the_duckdb_cli(hello, run, isolated):
    assert run("fetch", "--repo", "octo/hello").exit_code == 0
    state = isolated / "work" / "state.duckdb"
    check_opens_in_the_cli(state)
    answer = cli_query(state, "SELECT handle FROM issues ORDER BY number")
    assert answer.stdout.splitlines() == ["handle", "octo/hello#1", "octo/hello#2"]
