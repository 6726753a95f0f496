"""Git sources on real repositories built here: docs, commits, diffs, the wiki."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.errors import ConfigError
from ghindex.gitsource import (
    GitSourceError,
    RemoteRepo,
    parse_remote_url,
    repo_from_remote,
    sync_git,
    sync_wiki,
)
from ghindex.gitsource import commits as commits_module
from ghindex.index import table as index
from ghindex.state.database import open_state

T0 = datetime(2024, 1, 1, tzinfo=UTC)
AUTHOR = ("Octo Cat", "1+octo@users.noreply.github.com")
COMMITTER = ("Release Bot", "bot@example.com")


class Repo:
    """A git repository in a temporary directory, with deterministic commit times."""

    def __init__(self, path: Path, *, branch: str = "main") -> None:
        self.path = path
        self.clock = 0
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", branch)

    def env(self) -> dict[str, str]:
        when = T0 + timedelta(hours=self.clock)
        stamp = f"{int(when.timestamp())} +0200"
        return {
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            "HOME": str(self.path.parent),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": AUTHOR[0],
            "GIT_AUTHOR_EMAIL": AUTHOR[1],
            "GIT_COMMITTER_NAME": COMMITTER[0],
            "GIT_COMMITTER_EMAIL": COMMITTER[1],
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
        }

    def git(self, *args: str) -> str:
        proc = subprocess.run(
            ["git", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", *args],
            cwd=self.path,
            env=self.env(),
            capture_output=True,
            check=True,
        )
        return proc.stdout.decode().strip()

    def write(self, name: str, content: str | bytes) -> None:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")

    def remove(self, name: str) -> None:
        (self.path / name).unlink()

    def commit(self, message: str) -> str:
        self.clock += 1
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def clean(self) -> None:
        """Drop uncommitted changes."""
        self.git("reset", "-q", "--hard")
        self.git("clean", "-q", "-fd")

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def when(self, sha: str) -> datetime:
        return datetime.fromtimestamp(int(self.git("log", "-1", "--format=%ct", sha)), UTC)


@pytest.fixture
def con(tmp_path):
    connection = open_state(tmp_path / "state.duckdb")
    yield connection
    connection.close()


def query(con, sql, *params):
    return con.execute(sql, list(params)).fetchall()


def docs(con, kind="doc"):
    """handle -> (path, title, body, commit_sha, last_commit_sha, url)"""
    rows = query(
        con,
        "SELECT handle, path, title, body, commit_sha, last_commit_sha, url FROM docs "
        "WHERE kind = ? ORDER BY handle",
        kind,
    )
    return {r[0]: r[1:] for r in rows}


def commit_shas(con):
    return {r[0] for r in query(con, "SELECT sha FROM commits WHERE repo = 'o/n'")}


def files_of(con, sha):
    """path -> (status, old_path, similarity, additions, deletions, is_binary)"""
    rows = query(
        con,
        "SELECT path, status, old_path, similarity, additions, deletions, is_binary "
        "FROM commit_files WHERE sha = ? ORDER BY path",
        sha,
    )
    return {r[0]: r[1:] for r in rows}


def cursor(con, surface):
    return query(
        con,
        "SELECT cursor, high_water_mark FROM sync_state WHERE repo = 'o/n' AND surface = ?",
        surface,
    )


@pytest.fixture
def project(tmp_path):
    """main: c1 -> c2 -> c3 -> merge of feature (f1); side branch s1 off main; a dirty
    work tree on top."""
    repo = Repo(tmp_path / "project")
    repo.write("README.md", "# Hello *project*\n\nIntro.\n")
    repo.write("docs/guide.rst", "Guide\n=====\n\nRead this.\n")
    repo.write("docs/stable.md", "Stable\n======\n\nNever changes.\n")
    repo.write("docs/naïve notes.md", "no heading here\n")
    repo.write("CONTRIBUTING", "Be kind.\n")
    repo.write("src/app.py", "print(1)\n")
    repo.write("logo.png", b"\x89PNG\0\0\x01binary")
    c1 = repo.commit("Start\n\nThe first commit.")
    repo.write("docs/guide.rst", "Guide\n=====\n\nRead this.\nAnd this.\n")
    c2 = repo.commit("Extend the guide")
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("docs/feature.md", "---\ntitle: The feature\n---\n\n# Not the title\n")
    f1 = repo.commit("Add the feature page")
    repo.git("checkout", "-q", "main")
    repo.write("README.md", "# Hello *project*\n\nIntro, revised.\n")
    c3 = repo.commit("Revise the intro")
    repo.clock += 1
    repo.git("merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature")
    merge = repo.head()
    repo.git("checkout", "-q", "-b", "side")
    repo.write("docs/side.md", "# Side\n")
    side = repo.commit("Off the default branch")
    repo.git("checkout", "-q", "main")
    # Uncommitted: a staged edit, an unstaged edit and an untracked doc.
    repo.write("CONTRIBUTING", "Staged, not committed.\n")
    repo.git("add", "CONTRIBUTING")
    repo.write("README.md", "# Dirty work tree\n")
    repo.write("docs/draft.md", "# Draft\n")
    repo.shas = {"c1": c1, "c2": c2, "f1": f1, "c3": c3, "merge": merge, "side": side}
    return repo


def test_first_run_reads_docs_and_commits_of_the_branch_from_git_objects(con, project):
    s = project.shas

    report = sync_git(con, "o/n", project.path)

    assert (report.repo, report.source, report.commit, report.previous) == (
        "o/n",
        "git",
        s["merge"],
        None,
    )
    assert (report.mode, report.shallow) == ("initial", False)
    assert (report.docs_added, report.docs_updated, report.docs_removed) == (6, 0, 0)
    assert (report.docs_read, report.commits_added, report.commits_removed) == (6, 5, 0)
    assert report.files == 7 + 1 + 1 + 1 + 1
    blob = f"https://github.com/o/n/blob/{s['merge']}"
    assert docs(con) == {
        "o/n:CONTRIBUTING": (
            "CONTRIBUTING",
            "CONTRIBUTING",
            "Be kind.\n",
            s["merge"],
            s["c1"],
            f"{blob}/CONTRIBUTING",
        ),
        "o/n:README.md": (
            "README.md",
            "Hello project",
            "# Hello *project*\n\nIntro, revised.\n",
            s["merge"],
            s["c3"],
            f"{blob}/README.md",
        ),
        "o/n:docs/feature.md": (
            "docs/feature.md",
            "The feature",
            "---\ntitle: The feature\n---\n\n# Not the title\n",
            s["merge"],
            s["f1"],
            f"{blob}/docs/feature.md",
        ),
        "o/n:docs/guide.rst": (
            "docs/guide.rst",
            "Guide",
            "Guide\n=====\n\nRead this.\nAnd this.\n",
            s["merge"],
            s["c2"],
            f"{blob}/docs/guide.rst",
        ),
        "o/n:docs/naïve notes.md": (
            "docs/naïve notes.md",
            "naïve notes.md",
            "no heading here\n",
            s["merge"],
            s["c1"],
            f"{blob}/docs/na%C3%AFve%20notes.md",
        ),
        "o/n:docs/stable.md": (
            "docs/stable.md",
            "Stable",
            "Stable\n======\n\nNever changes.\n",
            s["merge"],
            s["c1"],
            f"{blob}/docs/stable.md",
        ),
    }
    readme = query(
        con,
        "SELECT repo, kind, blob_sha, size, last_changed_at, fetched_at IS NOT NULL "
        "FROM docs WHERE handle = 'o/n:README.md'",
    )
    assert readme == [
        (
            "o/n",
            "doc",
            project.git("rev-parse", f"{s['merge']}:README.md"),
            len("# Hello *project*\n\nIntro, revised.\n"),
            project.when(s["c3"]),
            True,
        )
    ]
    assert commit_shas(con) == {s["c1"], s["c2"], s["f1"], s["c3"], s["merge"]}
    assert cursor(con, "git_commits") == [(s["merge"], project.when(s["merge"]))]
    assert cursor(con, "git_docs") == [(s["merge"], project.when(s["merge"]))]


def test_commit_rows_are_exact(con, project):
    s = project.shas
    sync_git(con, "o/n", project.path)

    row = query(
        con,
        "SELECT handle, repo, sha, parents, author_name, author_login, committer_name, "
        "committer_login, authored_at, committed_at, subject, message, url, files_changed, "
        "additions, deletions FROM commits WHERE sha = ?",
        s["c1"],
    )
    assert row == [
        (
            f"o/n@{s['c1']}",
            "o/n",
            s["c1"],
            [],
            "Octo Cat",
            "octo",
            "Release Bot",
            None,
            T0 + timedelta(hours=1),
            T0 + timedelta(hours=1),
            "Start",
            "Start\n\nThe first commit.",
            f"https://github.com/o/n/commit/{s['c1']}",
            7,
            14,
            0,
        )
    ]
    assert files_of(con, s["c1"]) == {
        "CONTRIBUTING": ("A", None, None, 1, 0, False),
        "README.md": ("A", None, None, 3, 0, False),
        "docs/guide.rst": ("A", None, None, 4, 0, False),
        "docs/naïve notes.md": ("A", None, None, 1, 0, False),
        "docs/stable.md": ("A", None, None, 4, 0, False),
        "logo.png": ("A", None, None, None, None, True),
        "src/app.py": ("A", None, None, 1, 0, False),
    }
    # The merge is diffed against its first parent: it brings the feature page.
    merge = query(con, "SELECT parents, files_changed FROM commits WHERE sha = ?", s["merge"])
    assert merge == [([s["c3"], s["f1"]], 1)]
    assert files_of(con, s["merge"]) == {"docs/feature.md": ("A", None, None, 5, 0, False)}
    patch = query(
        con,
        "SELECT handle, commit_handle, patch, patch_truncated FROM commit_files "
        "WHERE sha = ? AND path = 'docs/guide.rst'",
        s["c2"],
    )
    expected = project.git("diff", "--no-color", s["c1"], s["c2"], "--", "docs/guide.rst")
    assert patch == [(f"o/n@{s['c2']}:docs/guide.rst", f"o/n@{s['c2']}", expected + "\n", False)]
    assert "+And this.\n" in patch[0][2]


def test_second_run_reads_only_what_changed(con, project):
    s = project.shas
    sync_git(con, "o/n", project.path)
    project.clean()
    project.write("docs/guide.rst", "Guide\n=====\n\nRead this.\nAnd this.\nAnd that.\n")
    project.git("mv", "CONTRIBUTING", "CONTRIBUTING.md")
    project.git("mv", "docs/feature.md", "docs/features.md")
    project.write("docs/features.md", "---\ntitle: The features\n---\n\n# Not the title\n")
    project.remove("README.md")
    project.write("docs/new.md", "New\n---\n\ntext\n")
    project.write("data.bin", b"\0\1\2\3")
    project.write("src/app.py", "print(2)\n")
    c4 = project.commit("Reorganise the docs")

    report = sync_git(con, "o/n", project.path)

    assert (report.mode, report.previous, report.commit) == ("incremental", s["merge"], c4)
    counts = (report.docs_added, report.docs_updated, report.docs_removed, report.docs_renamed)
    assert counts == (1, 1, 1, 2)
    assert (report.docs_read, report.commits_added, report.commits_removed) == (4, 1, 0)
    assert report.files == 7
    assert files_of(con, c4) == {
        "CONTRIBUTING.md": ("R", "CONTRIBUTING", 100, 0, 0, False),
        "README.md": ("D", None, None, 0, 3, False),
        "data.bin": ("A", None, None, None, None, True),
        "docs/features.md": ("R", "docs/feature.md", 55, 1, 1, False),
        "docs/guide.rst": ("M", None, None, 1, 0, False),
        "docs/new.md": ("A", None, None, 4, 0, False),
        "src/app.py": ("M", None, None, 1, 1, False),
    }
    now = docs(con)
    assert sorted(now) == [
        "o/n:CONTRIBUTING.md",
        "o/n:docs/features.md",
        "o/n:docs/guide.rst",
        "o/n:docs/naïve notes.md",
        "o/n:docs/new.md",
        "o/n:docs/stable.md",
    ]
    # Re-read docs point at the new commit; an unchanged one keeps the commit it was
    # read at (its content is the same at both).
    assert now["o/n:docs/guide.rst"][2:5] == (
        "Guide\n=====\n\nRead this.\nAnd this.\nAnd that.\n",
        c4,
        c4,
    )
    assert now["o/n:docs/features.md"][1] == "The features"
    assert now["o/n:CONTRIBUTING.md"][3:5] == (c4, c4)
    assert now["o/n:docs/stable.md"][3:5] == (s["merge"], s["c1"])
    assert cursor(con, "git_commits") == [(c4, project.when(c4))]

    again = sync_git(con, "o/n", project.path)

    assert again.mode == "unchanged"
    assert again.as_dict() | {"seconds": 0} == {
        "repo": "o/n",
        "source": "git",
        "path": str(project.path.resolve()),
        "commit": c4,
        "previous": c4,
        "mode": "unchanged",
        "shallow": False,
        "docs_added": 0,
        "docs_updated": 0,
        "docs_removed": 0,
        "docs_renamed": 0,
        "docs_read": 0,
        "docs_skipped": 0,
        "commits_added": 0,
        "commits_removed": 0,
        "files": 0,
        "seconds": 0,
    }


def test_a_force_push_drops_the_rewritten_commits(con, project):
    s = project.shas
    project.clean()
    project.write("docs/new.md", "# New\n")
    project.git("mv", "CONTRIBUTING", "CONTRIBUTING.md")
    project.remove("README.md")
    dropped = project.commit("Soon rewritten")
    sync_git(con, "o/n", project.path)
    assert dropped in commit_shas(con)

    project.git("reset", "-q", "--hard", s["merge"])
    project.write("docs/stable.md", "Stable\n======\n\nChanged after all.\n")
    c5 = project.commit("Replacement")
    report = sync_git(con, "o/n", project.path)

    assert (report.mode, report.previous, report.commit) == ("reconcile", dropped, c5)
    assert (report.commits_added, report.commits_removed) == (1, 1)
    counts = (report.docs_added, report.docs_updated, report.docs_removed, report.docs_renamed)
    assert counts == (1, 1, 1, 1)
    assert report.docs_read == 6
    assert commit_shas(con) == {s["c1"], s["c2"], s["f1"], s["c3"], s["merge"], c5}
    assert query(con, "SELECT count(*) FROM commit_files WHERE sha = ?", dropped) == [(0,)]
    now = docs(con)
    assert sorted(now) == [
        "o/n:CONTRIBUTING",
        "o/n:README.md",
        "o/n:docs/feature.md",
        "o/n:docs/guide.rst",
        "o/n:docs/naïve notes.md",
        "o/n:docs/stable.md",
    ]
    # After a rewrite every doc is read again and points at the new commit.
    assert {row[3] for row in now.values()} == {c5}
    assert now["o/n:docs/stable.md"][4] == c5
    assert now["o/n:README.md"][4] == s["c3"]
    assert cursor(con, "git_commits") == [(c5, project.when(c5))]
    assert cursor(con, "git_docs") == [(c5, project.when(c5))]


def test_another_clone_reset_to_an_older_commit_reconciles(con, project, tmp_path):
    s = project.shas
    sync_git(con, "o/n", project.path)
    fresh = tmp_path / "fresh"
    subprocess.run(
        ["git", "clone", "-q", "-b", "main", str(project.path), str(fresh)],
        check=True,
        env=project.env(),
    )
    subprocess.run(["git", "-C", str(fresh), "reset", "-q", "--hard", s["c3"]], check=True)

    report = sync_git(con, "o/n", fresh)

    assert (report.mode, report.commits_added, report.commits_removed) == ("reconcile", 0, 2)
    assert (report.docs_removed, report.docs_updated, report.docs_read) == (1, 0, 5)
    assert commit_shas(con) == {s["c1"], s["c2"], s["c3"]}
    assert sorted(docs(con)) == [
        "o/n:CONTRIBUTING",
        "o/n:README.md",
        "o/n:docs/guide.rst",
        "o/n:docs/naïve notes.md",
        "o/n:docs/stable.md",
    ]


def test_the_cursor_commit_missing_from_the_clone_still_finds_exact_renames(con, project, tmp_path):
    s = project.shas
    project.clean()
    project.git("mv", "docs/stable.md", "docs/renamed.md")
    gone = project.commit("Only in the first clone")
    sync_git(con, "o/n", project.path)
    project.git("reset", "-q", "--hard", s["merge"])
    project.git("mv", "docs/stable.md", "docs/moved.md")
    c5 = project.commit("Moved elsewhere")
    project.git("reflog", "expire", "--expire=now", "--all")
    project.git("branch", "-D", "side", "feature")
    project.git("gc", "-q", "--prune=now")
    assert subprocess.run(["git", "-C", str(project.path), "cat-file", "-e", gone]).returncode

    report = sync_git(con, "o/n", project.path)

    assert (report.mode, report.commits_removed, report.commits_added) == ("reconcile", 1, 1)
    assert (report.docs_renamed, report.docs_added, report.docs_removed) == (1, 0, 0)
    assert "o/n:docs/moved.md" in docs(con)
    assert c5 in commit_shas(con)


def test_full_rebuild_gives_the_same_rows(con, project):
    sync_git(con, "o/n", project.path)
    before_docs = query(con, "SELECT * EXCLUDE (fetched_at) FROM docs ORDER BY handle")
    before_files = query(con, "SELECT * EXCLUDE (fetched_at) FROM commit_files ORDER BY handle")

    report = sync_git(con, "o/n", project.path, full=True)

    assert (report.mode, report.commits_added, report.commits_removed) == ("full", 5, 5)
    assert (report.docs_added, report.docs_updated, report.docs_removed) == (0, 0, 0)
    assert report.docs_read == 6
    assert query(con, "SELECT * EXCLUDE (fetched_at) FROM docs ORDER BY handle") == before_docs
    after_files = query(con, "SELECT * EXCLUDE (fetched_at) FROM commit_files ORDER BY handle")
    assert after_files == before_files


def test_an_explicit_branch_is_indexed_instead_of_head(con, project):
    s = project.shas
    project.git("checkout", "-q", "-f", "side")

    report = sync_git(con, "o/n", project.path, branch="main")

    assert report.commit == s["merge"]
    assert s["side"] not in commit_shas(con)
    with pytest.raises(ConfigError, match=r"^no branch 'nope' in .*: fetch it"):
        sync_git(con, "o/n", project.path, branch="nope")


def test_type_changes_and_patch_limits(con, tmp_path, monkeypatch):
    repo = Repo(tmp_path / "r")
    repo.write("target.txt", "hello\n")
    repo.write("link", "plain file\n")
    repo.commit("files")
    repo.remove("link")
    (repo.path / "link").symlink_to("target.txt")
    repo.write("big.txt", "".join(f"line {i:05} {'x' * 40}\n" for i in range(5000)))
    repo.write("wide.txt", "y" * 300_000 + "\n")  # one line longer than git's pipe
    c2 = repo.commit("symlink and big files")

    sync_git(con, "o/n", repo.path)

    assert files_of(con, c2) == {
        "big.txt": ("A", None, None, 5000, 0, False),
        "link": ("T", None, None, 1, 1, False),
        "wide.txt": ("A", None, None, 1, 0, False),
    }
    big, link, wide = query(
        con,
        "SELECT patch, patch_truncated FROM commit_files WHERE sha = ? ORDER BY path",
        c2,
    )
    assert big[1] is True
    assert len(big[0].encode()) <= 100_000 and big[0].endswith("\n")
    assert big[0].startswith("diff --git a/big.txt b/big.txt\nnew file mode 100644\n")
    assert link[1] is False
    assert link[0].count("diff --git a/link b/link\n") == 2  # git splits a type change
    assert wide[1] is True
    assert wide[0].startswith("diff --git a/wide.txt b/wide.txt\n")
    assert wide[0].endswith("+++ b/wide.txt\n@@ -0,0 +1 @@\n")

    # Past a commit's patch budget, files keep their counts but no patch.
    monkeypatch.setattr(commits_module, "MAX_COMMIT_PATCH_BYTES", 300)
    sync_git(con, "o/n", repo.path, full=True)
    assert query(
        con,
        "SELECT path, patch IS NULL, patch_truncated, additions FROM commit_files "
        "WHERE sha = ? ORDER BY path",
        c2,
    ) == [("big.txt", False, True, 5000), ("link", True, True, 1), ("wide.txt", True, True, 1)]


def test_wiki_pages(con, tmp_path):
    wiki = Repo(tmp_path / "n.wiki", branch="master")
    wiki.write("Home.md", "Welcome to the wiki.\n")
    wiki.write("Page-Name.md", "# A heading that is not the title\n\nBody.\n")
    wiki.write("sub/Deep-Page.rst", "Deep\n====\n")
    wiki.write("_Sidebar.md", "* [[Home]]\n")
    wiki.write("diagram.png", b"\x89PNG\0")
    first = wiki.commit("Initial wiki")

    report = sync_wiki(con, "o/n", wiki.path)

    assert (report.source, report.mode, report.commit) == ("wiki", "initial", first)
    assert (report.docs_added, report.docs_read, report.commits_added) == (3, 3, 0)
    assert docs(con, "wiki") == {
        "o/n:wiki/Deep-Page": (
            "sub/Deep-Page.rst",
            "Deep Page",
            "Deep\n====\n",
            first,
            first,
            "https://github.com/o/n/wiki/Deep-Page",
        ),
        "o/n:wiki/Home": (
            "Home.md",
            "Home",
            "Welcome to the wiki.\n",
            first,
            first,
            "https://github.com/o/n/wiki/Home",
        ),
        "o/n:wiki/Page-Name": (
            "Page-Name.md",
            "Page Name",
            "# A heading that is not the title\n\nBody.\n",
            first,
            first,
            "https://github.com/o/n/wiki/Page-Name",
        ),
    }

    wiki.write("Home.md", "Welcome, again.\n")
    wiki.git("mv", "Page-Name.md", "Renamed-Page.md")
    wiki.remove("sub/Deep-Page.rst")
    wiki.write("Home.md", "Welcome, again.\n")
    second = wiki.commit("Edit, rename, delete")
    wiki.write("Home.md", "Not committed.\n")

    report = sync_wiki(con, "o/n", wiki.path)

    assert (report.mode, report.previous, report.commit) == ("incremental", first, second)
    counts = (report.docs_added, report.docs_updated, report.docs_removed, report.docs_renamed)
    assert counts == (0, 1, 1, 1)
    assert report.docs_read == 2
    pages = docs(con, "wiki")
    assert sorted(pages) == ["o/n:wiki/Home", "o/n:wiki/Renamed-Page"]
    assert pages["o/n:wiki/Home"][2:5] == ("Welcome, again.\n", second, second)
    assert pages["o/n:wiki/Renamed-Page"][3:5] == (second, second)
    assert cursor(con, "git_wiki") == [(second, wiki.when(second))]
    assert cursor(con, "git_docs") == []


def test_wiki_and_docs_of_one_repository_live_side_by_side(con, project, tmp_path):
    wiki = Repo(tmp_path / "n.wiki", branch="master")
    wiki.write("Home.md", "Hi\n")
    wiki.commit("wiki")

    sync_git(con, "o/n", project.path)
    sync_wiki(con, "o/n", wiki.path)
    sync_git(con, "o/n", project.path, full=True)

    kinds = query(con, "SELECT kind, count(*) FROM docs GROUP BY kind ORDER BY kind")
    assert kinds == [("doc", 6), ("wiki", 1)]


def test_shallow_clones(con, tmp_path):
    origin = Repo(tmp_path / "origin")
    shas = []
    for i in range(4):
        origin.write("README.md", f"# Version {i}\n")
        origin.write(f"file{i}.txt", f"{i}\n")
        shas.append(origin.commit(f"commit {i}"))
    url = f"file://{origin.path}"
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "2", url, str(clone)], check=True)

    report = sync_git(con, "o/n", clone)

    assert (report.shallow, report.commits_added, report.files) == (True, 2, 2)
    assert commit_shas(con) == {shas[2], shas[3]}
    boundary = query(
        con,
        "SELECT files_changed, additions, parents FROM commits WHERE sha = ?",
        shas[2],
    )
    assert boundary == [(None, None, [shas[1]])]
    assert query(con, "SELECT last_commit_sha FROM docs") == [(shas[3],)]

    for i in range(4, 6):
        origin.write(f"file{i}.txt", f"{i}\n")
        shas.append(origin.commit(f"commit {i}"))
    later = tmp_path / "later"
    subprocess.run(["git", "clone", "-q", "--depth", "1", url, str(later)], check=True)
    with pytest.raises(GitSourceError, match="fetch full history") as error:
        sync_git(con, "o/n", later)
    assert "\n" not in str(error.value)
    assert str(error.value).endswith("or rebuild with `ghindex build --full`")
    assert commit_shas(con) == {shas[2], shas[3]}

    subprocess.run(["git", "-C", str(later), "fetch", "-q", "--unshallow"], check=True)
    report = sync_git(con, "o/n", later)

    assert (report.mode, report.shallow, report.commits_added) == ("incremental", False, 4)
    assert commit_shas(con) == set(shas)
    assert query(con, "SELECT count(*) FROM commits WHERE files_changed IS NULL") == [(0,)]
    assert files_of(con, shas[2]) == {
        "README.md": ("M", None, None, 1, 1, False),
        "file2.txt": ("A", None, None, 1, 0, False),
    }


def test_a_failure_mid_sync_leaves_the_state_as_it_was(con, project, monkeypatch):
    def broken(*args, **kwargs):
        raise GitSourceError("simulated failure")

    monkeypatch.setattr("ghindex.gitsource.sync.sync_commits", broken)
    with pytest.raises(GitSourceError, match="simulated failure"):
        sync_git(con, "o/n", project.path)

    assert query(con, "SELECT count(*) FROM docs") == [(0,)]
    assert query(con, "SELECT count(*) FROM sync_state") == [(0,)]


def test_git_environment_of_the_caller_does_not_leak_in(con, project, tmp_path, monkeypatch):
    other = Repo(tmp_path / "other")
    other.write("OTHER.md", "# Other\n")
    other.commit("other")
    monkeypatch.setenv("GIT_DIR", str(other.path / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other.path))

    sync_git(con, "o/n", project.path)

    assert "o/n:OTHER.md" not in docs(con)
    assert "o/n:README.md" in docs(con)


def test_paths_that_cannot_be_indexed(con, tmp_path):
    (tmp_path / "plain").mkdir()
    empty = Repo(tmp_path / "empty")
    (empty.path / "sub").mkdir()
    cases = [
        (tmp_path / "missing", r"does not exist: pass the path of a git checkout"),
        (tmp_path / "plain", r"is not a git repository: pass the path of a git checkout"),
        (empty.path / "sub", r"is not the top of a git repository \(it is inside .*empty\)"),
        (empty.path, r"has no commits"),
    ]
    for path, message in cases:
        with pytest.raises(ConfigError, match=message) as error:
            sync_git(con, "o/n", path)
        assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="not a repository"):
        sync_git(con, "not a repo", empty.path)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/octo/hello.git", RemoteRepo("octo/hello", "https://github.com")),
        ("https://github.com/octo/hello", RemoteRepo("octo/hello", "https://github.com")),
        (
            "https://x-access-token:secret@github.com/octo/hello.git",
            RemoteRepo("octo/hello", "https://github.com"),
        ),
        ("git@github.com:octo/hello.git", RemoteRepo("octo/hello", "https://github.com")),
        (
            "ssh://git@ssh.github.com:443/octo/hello.git",
            RemoteRepo("octo/hello", "https://github.com"),
        ),
        (
            "git@ghe.example.com:team/tool.git",
            RemoteRepo("team/tool", "https://ghe.example.com"),
        ),
        (
            "https://ghe.example.com:8443/team/tool",
            RemoteRepo("team/tool", "https://ghe.example.com:8443"),
        ),
        (
            "https://github.com/octo/hello.wiki.git",
            RemoteRepo("octo/hello", "https://github.com", is_wiki=True),
        ),
        ("https://gitlab.com/group/sub/project.git", None),
        ("/srv/git/hello.git", None),
        ("file:///srv/octo/hello.git", None),
    ],
)
def test_parse_remote_url(url, expected):
    assert parse_remote_url(url) == expected


def test_repo_from_remote(tmp_path):
    repo = Repo(tmp_path / "r")
    with pytest.raises(ConfigError, match="no remote 'origin': give the repository with --repo"):
        repo_from_remote(repo.path)
    repo.git("remote", "add", "origin", "https://user:hunter2@example.com/a/b/c.git")
    with pytest.raises(ConfigError, match=r"remote URL https://\*\*\*@example.com/a/b/c.git"):
        repo_from_remote(repo.path)
    repo.git("remote", "set-url", "origin", "git@github.com:octo/hello.git")
    assert repo_from_remote(repo.path) == RemoteRepo("octo/hello", "https://github.com")


@pytest.mark.slow
def test_build_reads_git_sources_named_by_their_remote(project, tmp_path, run, isolated):
    """`ghindex build --git PATH` reads the clone into the state before indexing."""
    project.git("remote", "add", "origin", "git@github.com:octo/project.git")
    wiki = Repo(tmp_path / "project.wiki", branch="master")
    wiki.write("Home.md", "Welcome to the wiki.\n")
    wiki.commit("Add home")
    wiki.git("remote", "add", "origin", "https://github.com/octo/project.wiki.git")
    work = isolated / "work"  # nothing fetched: git sources alone make an index

    result = run("build", "--git", str(project.path), "--wiki", str(wiki.path), "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(g["repo"], g["source"], g["mode"]) for g in report["git"]] == [
        ("octo/project", "git", "initial"),
        ("octo/project", "wiki", "initial"),
    ]
    state = open_state(work / "state.duckdb", read_only=True)
    try:
        handles = [h for (h,) in state.execute("SELECT handle FROM docs ORDER BY 1").fetchall()]
        commits = state.execute("SELECT count(*) FROM commits").fetchall()
    finally:
        state.close()
    assert "octo/project:README.md" in handles and "octo/project:wiki/Home" in handles
    assert commits == [(5,)]

    again = run("build", "--git", str(project.path), "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["git"][0]["mode"] == "unchanged"


def test_build_says_when_a_clone_has_no_known_remote(project, run):
    result = run("build", "--git", str(project.path))

    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: cannot tell which repository {project.path}")
    assert result.stderr.endswith("give the repository with --repo owner/name\n")


@pytest.mark.slow
def test_every_commit_is_searchable_even_without_a_text_diff(project, run):
    """Diff documents per changed text file; a commit with none gets its message indexed."""
    project.git("remote", "add", "origin", "https://github.com/octo/project.git")
    project.clean()
    project.write("logo.png", b"\x89PNG\0\0\x02other binary")
    binary_only = project.commit("Refresh the logo artwork")

    result = run("build", "--git", str(project.path), "--json")

    assert result.exit_code == 0, result.output
    found = run("search", "refresh the logo artwork", "--mode", "sparse", "--json")
    hits = json.loads(found.stdout)["results"]
    assert hits[0]["entity"] == f"octo/project@{binary_only}"
    assert (hits[0]["type"], hits[0]["entity_type"]) == ("diff", "commit")
    readme = run("search", "revised intro", "--mode", "sparse", "--json")
    first = json.loads(readme.stdout)["results"][0]
    commit = f"octo/project@{project.shas['c3']}"  # "Revise the intro", README.md changed
    assert first["entity"] == commit
    assert first["handle"] in (commit, f"{commit}:README.md")  # by its subject, or its diff


def test_commit_messages_link_what_they_name_and_what_they_close(con, project):
    s = project.shas
    project.clean()
    project.write("src/app.py", "print(2)\n")
    fix = project.commit("Print two (#7)\n\nFixes #3, see o/other#4.")
    sync_git(con, "o/n", project.path)

    def links():
        return query(
            con,
            "SELECT src, dst, kind, source_field FROM edges WHERE source_field = 'message' "
            "ORDER BY kind, dst",
        )

    assert links() == [
        (f"o/n@{fix}", "o/n#3", "closes", "message"),
        (f"o/n@{fix}", "o/n#3", "references", "message"),
        (f"o/n@{fix}", "o/n#7", "references", "message"),
        (f"o/n@{fix}", "o/other#4", "references", "message"),
    ]
    # the commit leaves the branch: its links go with it
    project.git("reset", "-q", "--hard", s["merge"])
    project.commit("Replacement")
    sync_git(con, "o/n", project.path)
    assert links() == []


def test_every_commit_has_a_summary_row_beside_its_file_diffs(con, project):
    from ghindex.index.documents import DocumentSettings, iter_documents

    sync_git(con, "o/n", project.path)
    docs = list(iter_documents(con))
    summaries = {d.handle: d for d in docs if d.handle == d.entity and d.type == "diff"}

    assert set(summaries) == {f"o/n@{sha}" for sha in commit_shas(con)}
    first = summaries[f"o/n@{project.shas['c1']}"]
    assert (first.title, first.preamble) == ("Start", "The first commit.")
    assert first.entity_type == "commit"
    listed = [
        r[0] for r in query(con, "SELECT path FROM commit_files WHERE sha = ?", project.shas["c1"])
    ]
    assert first.body == "Files: " + ", ".join(sorted(listed))
    # without summaries, only a commit with no text diff is indexed by its message
    plain = list(iter_documents(con, DocumentSettings(commit_summary=False)))
    assert not [d for d in plain if d.handle == d.entity and d.type == "diff"]
    assert len(plain) == len(docs) - len(summaries)


@pytest.mark.slow
def test_a_commit_is_read_by_meaning_through_its_summary_and_by_words_through_its_diffs(
    project, run, isolated
):
    """A commit's file-diff rows are indexed for full-text search but get no vector: the
    summary row (message and files) stands for the commit in dense search."""
    project.git("remote", "add", "origin", "https://github.com/octo/project.git")
    result = run("build", "--git", str(project.path), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)

    table = index.connect(isolated / "work" / "lance").open_table(index.CHUNKS)
    rows = table.to_arrow().to_pylist()
    diffs = [r for r in rows if r["type"] == "diff" and r["handle"] != r["entity"]]
    summaries = [r for r in rows if r["type"] == "diff" and r["handle"] == r["entity"]]
    assert diffs and summaries
    assert all(r["vector"] is None for r in diffs)
    assert all(r["vector"] is not None for r in rows if r not in diffs)
    assert report["embedded"] == len({r["content_hash"] for r in rows if r["vector"] is not None})
    # dense search finds commits by their summaries; full-text search still reads diffs
    dense = json.loads(run("search", "revise the intro", "--mode", "dense", "--json").stdout)
    assert dense["results"]
    assert not [r for r in dense["results"] if r["type"] == "diff" and r["handle"] != r["entity"]]
    words = json.loads(run("search", "intro", "--mode", "sparse", "-k", "20", "--json").stdout)
    shown = {r["handle"] for r in words["results"]} | {
        s["handle"] for r in words["results"] for s in r.get("same_entity", [])
    }
    assert any(h.endswith(":README.md") for h in shown)


# bytes that are not prose: no NUL, mostly not UTF-8 (what a PNG or a gzip holds)
_BINARY = st.tuples(st.binary(min_size=64, max_size=4000), st.binary(max_size=64)).map(
    # bytes from 0x80 up never start valid UTF-8: a compressed blob; some ASCII inside
    lambda parts: bytes(0x80 | b for b in parts[0]) + parts[1].replace(b"\0", b" ")
)
_PROSE = st.tuples(
    st.lists(st.sampled_from(["the", "docs", "say", "how", "to", "build", "it"]), min_size=60),
    st.lists(st.sampled_from(["Caf\xe9", "na\xefve", "r\xe9sum\xe9"]), max_size=3),
).map(lambda parts: " ".join(parts[1] + parts[0]).encode("latin-1"))


@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(binary=_BINARY, prose=_PROSE)
def test_a_binary_doc_without_nul_bytes_is_skipped_and_latin1_prose_read(tmp_path, binary, prose):
    """A `.md` whose bytes are binary is skipped even with no NUL byte (it would be
    indexed as U+FFFD garbage); an old README in Latin-1, a few bytes not UTF-8, is read."""
    where = tmp_path / uuid.uuid4().hex[:8]
    repo = Repo(where / "repo")
    repo.write("docs/logo.md", binary)
    repo.write("docs/old.md", prose)
    repo.commit("docs")
    connection = open_state(where / "state.duckdb")
    try:
        sync_git(connection, "o/n", repo.path)
        assert [path for (path,) in query(connection, "SELECT path FROM docs")] == ["docs/old.md"]
    finally:
        connection.close()


@pytest.mark.parametrize("wiki_remote", [False, True])
def test_a_clone_given_as_the_other_kind_is_refused_by_its_remote(
    project, tmp_path, run, wiki_remote
):
    """--wiki with an ordinary repository's clone (or --git with a wiki's) is one line,
    not a wiki of README pages (or a repository of wiki pages) taken silently."""
    url = "https://github.com/octo/project" + (".wiki.git" if wiki_remote else ".git")
    project.git("remote", "add", "origin", url)
    flag, other = ("--git", "--wiki") if wiki_remote else ("--wiki", "--git")

    result = run("build", flag, str(project.path))

    assert result.exit_code == 1
    what = "the wiki of octo/project" if wiki_remote else "octo/project"
    assert result.stderr == (
        f"Error: {flag} {project.path} is a clone of {what}, by its remote: pass it with {other}\n"
    )
