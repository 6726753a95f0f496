"""Paths from git are bytes: a crafted tree can hold `..` or `.` entries, and file names
need not be UTF-8. Handles never leave the repository and never merge two files."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_gitsource import Repo, query

from ghindex.gitsource import sync_git
from ghindex.gitsource.repo import path_text, tree_path
from ghindex.state.database import open_state


@pytest.fixture
def con(tmp_path):
    con = open_state(tmp_path / "state.duckdb")
    yield con
    con.close()


def _git(repo: Repo, *args: str, input_text: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=repo.path,
        env=repo.env(),
        input=input_text.encode(),
        capture_output=True,
        check=True,
    )
    return done.stdout.decode().strip()


def _crafted_commit(repo: Repo) -> str:
    """A commit whose tree holds `docs/../x.md` and `docs/./y.md` beside `docs/guide.md`:
    git mktree writes what it is told."""

    def blob(text: str) -> str:
        return _git(repo, "hash-object", "-w", "--stdin", input_text=text)

    inner = _git(repo, "mktree", input_text=f"100644 blob {blob('# Escaped')}\tx.md\n")
    here = _git(repo, "mktree", input_text=f"100644 blob {blob('# Here')}\ty.md\n")
    docs = _git(
        repo,
        "mktree",
        input_text=f"040000 tree {inner}\t..\n040000 tree {here}\t.\n"
        f"100644 blob {blob('# Guide')}\tguide.md\n",
    )
    top = _git(repo, "mktree", input_text=f"040000 tree {docs}\tdocs\n")
    sha = _git(repo, "commit-tree", top, "-m", "crafted", input_text="")
    repo.git("update-ref", "refs/heads/main", sha)
    return sha


def test_a_crafted_dot_dot_entry_never_becomes_a_handle(con, tmp_path):
    repo = Repo(tmp_path / "repo")
    repo.write("README.md", "# Hello\n")
    repo.commit("first")
    _crafted_commit(repo)

    sync_git(con, "o/n", repo.path)

    handles = [r[0] for r in query(con, "SELECT handle FROM docs ORDER BY 1")]
    assert handles == ["o/n:docs/guide.md"]


@pytest.mark.skipif(os.uname().sysname == "Darwin", reason="file names must be UTF-8 there")
def test_two_names_that_are_not_utf8_stay_two_docs(con, tmp_path):
    repo = Repo(tmp_path / "repo")
    (repo.path / "docs").mkdir()
    for raw in (b"docs/caf\xe9.md", b"docs/caf\xe8.md"):
        with open(os.path.join(os.fsencode(repo.path), raw), "wb") as f:
            f.write(b"# Cafe\n")
    repo.commit("latin-1 names")

    sync_git(con, "o/n", repo.path)

    handles = sorted(r[0] for r in query(con, "SELECT handle FROM docs"))
    assert handles == ["o/n:docs/caf\\xe8.md", "o/n:docs/caf\\xe9.md"]


@given(st.lists(st.binary(min_size=1, max_size=12), min_size=2, max_size=6, unique=True))
def test_different_names_are_different_texts(names):
    names = [n.replace(b"\\", b"") for n in names]
    texts = {path_text(n) for n in set(names)}
    assert len(texts) == len(set(names))


@given(st.lists(st.sampled_from(["docs", "a", "..", ".", "", "b.md"]), min_size=1, max_size=5))
def test_a_path_with_an_empty_dot_or_dot_dot_part_is_refused(parts):
    path = "/".join(parts).encode()
    refused = any(p in ("", ".", "..") for p in parts)
    assert (tree_path(path) is None) == refused
