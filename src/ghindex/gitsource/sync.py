"""Syncing a local checkout (and its wiki) into the state database.

Per repository, `sync_state` holds the last indexed commit of each git surface
('git_docs', 'git_commits', 'git_wiki') in `cursor`, and that commit's committer
time in `high_water_mark`. A run compares the cursor with the commit to index:

- initial: no cursor yet; everything is read;
- unchanged: same commit; nothing is read;
- incremental: the new commit descends from the cursor; only new commits and the
  docs that differ between the two trees are read;
- reconcile: the cursor is not an ancestor any more (a force push, another branch):
  commits that left the branch are deleted, missing ones read, and every doc read
  again from the new commit;
- full: every row of the source is replaced.

Each source is written in one transaction together with its cursor move.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from ghindex.config import parse_repo
from ghindex.gitsource.commits import commit_time, plan_commits, sync_commits
from ghindex.gitsource.docs import DOCS, WIKI, sync_docs
from ghindex.gitsource.repo import (
    Git,
    GitSourceError,
    Objects,
    has_commit,
    is_ancestor,
    open_repository,
    resolve_branch,
    shallow_commits,
)
from ghindex.state.cursors import get_cursor, set_cursor
from ghindex.state.database import transaction

DEFAULT_WEB_URL = "https://github.com"


@dataclass(frozen=True)
class GitReport:
    """What one sync of a checkout or a wiki did."""

    repo: str
    source: str  # git | wiki
    path: str
    commit: str  # the new cursor: the commit now indexed
    previous: str | None  # the cursor before this run
    mode: str  # initial | unchanged | incremental | reconcile | full
    shallow: bool  # the clone is shallow: history before its boundary is not indexed
    docs_added: int = 0
    docs_updated: int = 0
    docs_removed: int = 0
    docs_renamed: int = 0
    docs_read: int = 0
    docs_skipped: int = 0
    commits_added: int = 0
    commits_removed: int = 0
    files: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def sync_git(
    con: duckdb.DuckDBPyConnection,
    repo: str,
    path: Path,
    *,
    branch: str | None = None,
    full: bool = False,
    web_url: str = DEFAULT_WEB_URL,
) -> GitReport:
    """Index the docs and the commits of `repo`'s checkout at `path`.

    The commit indexed is the checkout's HEAD, or the tip of `branch`. `web_url` is
    the GitHub host the row URLs point at (GitHub Enterprise: its https URL).
    """
    started = time.perf_counter()
    repo = parse_repo(repo)
    git = open_repository(Path(path))
    head = resolve_branch(git, branch)
    shallow = shallow_commits(git)
    now = datetime.now(UTC)
    web_url = web_url.rstrip("/")
    docs_previous = get_cursor(con, repo, DOCS.surface)
    commits_previous = get_cursor(con, repo, "git_commits")
    docs_mode = classify(git, docs_previous, head, full=full)
    commits_mode = (  # the two cursors move together: usually one answer serves both
        docs_mode
        if commits_previous == docs_previous
        else classify(git, commits_previous, head, full=full)
    )
    if commits_mode == "reconcile" and shallow:
        raise GitSourceError(
            f"{git.path} is a shallow clone that does not reach the last indexed commit "
            f"{(commits_previous or '')[:12]}: fetch full history (git fetch --unshallow, "
            "or actions/checkout with fetch-depth: 0), or rebuild with `ghindex build --full`"
        )
    with Objects(git) as objects, transaction(con):
        docs = sync_docs(
            con,
            git,
            objects,
            DOCS,
            repo=repo,
            head=head,
            previous=docs_previous,
            mode=docs_mode,
            shallow=shallow,
            web_url=web_url,
            now=now,
        )
        plan = plan_commits(
            con,
            git,
            repo=repo,
            head=head,
            previous=commits_previous,
            mode=commits_mode,
            shallow=shallow,
        )
        commits = sync_commits(
            con, git, objects, plan, repo=repo, shallow=shallow, web_url=web_url, now=now
        )
        mark = commit_time(objects, head)
        set_cursor(con, repo, DOCS.surface, head, mark, docs.seen)
        set_cursor(con, repo, "git_commits", head, mark, commits.added)
    return GitReport(
        repo=repo,
        source="git",
        path=str(git.path),
        commit=head,
        previous=commits_previous,
        mode=commits_mode,
        shallow=bool(shallow),
        **docs.report(),
        commits_added=commits.added,
        commits_removed=commits.removed,
        files=commits.files,
        seconds=round(time.perf_counter() - started, 3),
    )


def sync_wiki(
    con: duckdb.DuckDBPyConnection,
    repo: str,
    path: Path,
    *,
    full: bool = False,
    web_url: str = DEFAULT_WEB_URL,
) -> GitReport:
    """Index the pages of `repo`'s wiki from a clone of `owner/name.wiki.git` at `path`."""
    started = time.perf_counter()
    repo = parse_repo(repo)
    git = open_repository(Path(path))
    head = resolve_branch(git, None)
    shallow = shallow_commits(git)
    web_url = web_url.rstrip("/")
    previous = get_cursor(con, repo, WIKI.surface)
    mode = classify(git, previous, head, full=full)
    with Objects(git) as objects, transaction(con):
        pages = sync_docs(
            con,
            git,
            objects,
            WIKI,
            repo=repo,
            head=head,
            previous=previous,
            mode=mode,
            shallow=shallow,
            web_url=web_url,
            now=datetime.now(UTC),
        )
        set_cursor(con, repo, WIKI.surface, head, commit_time(objects, head), pages.seen)
    return GitReport(
        repo=repo,
        source="wiki",
        path=str(git.path),
        commit=head,
        previous=previous,
        mode=mode,
        shallow=bool(shallow),
        **pages.report(),
        seconds=round(time.perf_counter() - started, 3),
    )


def classify(git: Git, previous: str | None, head: str, *, full: bool) -> str:
    """How a source at cursor `previous` gets to `head` (see the module docstring)."""
    if full:
        return "full"
    if previous is None:
        return "initial"
    if previous == head:
        return "unchanged"
    if has_commit(git, previous) and is_ancestor(git, previous, head):
        return "incremental"
    return "reconcile"
