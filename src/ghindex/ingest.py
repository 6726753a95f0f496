"""`ghindex fetch`: pull GitHub pages and store them, moving each cursor only
after the rows it covers are committed.

Every repository is looked up before anything is written, so a typo in one
`--repo` or a bad token leaves the state database exactly as it was. After that
each page (items with every nested connection read to its end) is stored in one
transaction together with its cursor move: a crash or an error mid-run keeps
every committed page, and the next run resumes from the last committed mark.

Surfaces and how each is kept current:

- issues: ascending `updatedAt` from the mark (GitHub filters with `since`);
- pull requests, discussions: descending `updatedAt`, stopping at the mark
  (GitHub has no `since` for them); the mark moves when the pass is complete;
- releases: every run reads them all (they are few) and the list is the truth.

Deletions are never inferred from a listing. With `--full` every listing is
complete, and each stored item the listing lacks is looked up by node id: only
an item GitHub no longer has (or has moved to another repository) is removed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from ghindex.config import RepoSelection, Settings
from ghindex.errors import ConfigError, GhindexError
from ghindex.fetch import listings
from ghindex.fetch.client import GraphQLClient
from ghindex.store import cursors, items
from ghindex.store.rows import Node, github_time, newest_update
from ghindex.store.state import open_state, transaction

# Items updated this close to the high-water mark are fetched again: GitHub's
# timestamps have one-second resolution and its listings lag writes a little.
OVERLAP = timedelta(minutes=5)

Progress = Callable[[str], None]


@dataclass
class RepoReport:
    repo: str
    issues: int = 0
    pull_requests: int = 0
    discussions: int = 0
    releases: int = 0
    deleted: list[str] = field(default_factory=list)
    transferred: list[str] = field(default_factory=list)


@dataclass
class FetchReport:
    run_id: str
    repos: list[RepoReport] = field(default_factory=list)
    requests: int = 0
    cost: int = 0
    client: dict[str, Any] = field(default_factory=dict)
    rate_limit: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "repos": [vars(r) for r in self.repos],
            "requests": self.requests,
            "cost": self.cost,
            "client": self.client,
            "rate_limit": self.rate_limit,
        }


@dataclass(frozen=True)
class _Surface:
    name: str  # sync_state surface and table
    pages: Callable[[GraphQLClient, str], Iterator[list[Node]]]
    save: Callable[[duckdb.DuckDBPyConnection, str, Sequence[Node]], int]


_DESCENDING = (
    _Surface("pull_requests", listings.pull_request_pages, items.save_pull_requests),
    _Surface("discussions", listings.discussion_pages, items.save_discussions),
)


def organisation_repos(client: GraphQLClient, org: str, select: RepoSelection) -> list[str]:
    """The repositories of `org` that `select` takes, by name."""
    return [n["nameWithOwner"] for n in listings.owner_repositories(client, org) if select.wants(n)]


def chosen_repos(client: GraphQLClient, settings: Settings) -> list[str]:
    """The repositories a run takes: `repos`, then each of `orgs` as the selection settings
    choose, each once. An organisation of which nothing is chosen is a mistake to report."""
    chosen = list(settings.repos)
    for org in settings.orgs:
        found = organisation_repos(client, org, settings.select)
        if not found:
            raise ConfigError(
                f"{org} has no repositories that the include/exclude/archived/forks "
                "settings select: check them in ghindex.toml"
            )
        chosen += found
    return list(dict.fromkeys(chosen))


def fetch(
    state_path: Path,
    client: GraphQLClient,
    repos: Sequence[str],
    *,
    full: bool = False,
    progress: Progress | None = None,
) -> FetchReport:
    """Fetch every surface of `repos` into the state database."""
    say = progress or (lambda _msg: None)
    report = FetchReport(run_id=str(uuid.uuid4()))
    started = datetime.now(UTC)

    # Phase 1: every repository must exist before anything is written.
    metadata = []
    for repo in repos:
        say(f"{repo}: looking up")
        metadata.append(listings.repository(client, repo))

    # Phase 2: store page by page.
    con = open_state(state_path)
    try:
        try:
            for node in metadata:
                with transaction(con):
                    repo = items.save_repository(con, node)
                done = RepoReport(repo)
                report.repos.append(done)
                _sync_repo(con, client, node, done, full, say)
        except GhindexError as exc:
            _finish(con, report, client, started, "failed", str(exc))
            raise
        except BaseException as exc:
            _finish(con, report, client, started, "failed", f"{type(exc).__name__}: {exc}")
            raise
        _finish(con, report, client, started, "ok", None)
    finally:
        con.close()
    return report


def _sync_repo(con, client, node: Node, done: RepoReport, full: bool, say: Progress) -> None:
    repo = done.repo
    if node.get("hasIssuesEnabled", True) or full:
        done.issues = _sync_issues(con, client, repo, full, say)
    done.pull_requests = _sync_descending(con, client, repo, _DESCENDING[0], full, say)
    if node.get("hasDiscussionsEnabled", True) or full:
        done.discussions = _sync_descending(con, client, repo, _DESCENDING[1], full, say)
    done.releases = _sync_releases(con, client, repo, say)
    if full:
        _reconcile(con, client, done, say)


def _sync_issues(con, client: GraphQLClient, repo: str, full: bool, say: Progress) -> int:
    """Ascending by updatedAt from the mark: each committed page moves the mark."""
    mark = None if full else cursors.get_high_water_mark(con, repo, "issues")
    since = mark - OVERLAP if mark else None
    stored = 0
    for nodes in listings.issue_pages(client, repo, since):
        with transaction(con):
            items.save_issues(con, repo, nodes)
            cursors.set_high_water_mark(con, repo, "issues", newest_update(nodes), len(nodes))
        stored += len(nodes)
        say(f"{repo}: {stored} issues")
    return stored


def _sync_descending(
    con, client: GraphQLClient, repo: str, surface: _Surface, full: bool, say: Progress
) -> int:
    """Newest first, stopping at the first item older than the mark.

    The mark moves once the whole pass is stored, because a descending pass only
    covers everything newer than the mark when it reaches the mark.
    """
    mark = None if full else cursors.get_high_water_mark(con, repo, surface.name)
    stop_before = mark - OVERLAP if mark else None
    stored = 0
    newest: datetime | None = None
    for nodes in surface.pages(client, repo):
        fresh = [n for n in nodes if _newer(n, stop_before)]
        with transaction(con):
            surface.save(con, repo, fresh)
        stored += len(fresh)
        newest = max([newest, newest_update(fresh)], key=_sortable)
        say(f"{repo}: {stored} {surface.name.replace('_', ' ')}")
        if len(fresh) < len(nodes):
            break
    with transaction(con):
        cursors.set_high_water_mark(con, repo, surface.name, newest, stored)
    return stored


def _sync_releases(con, client: GraphQLClient, repo: str, say: Progress) -> int:
    nodes = [node for page in listings.release_pages(client, repo) for node in page]
    with transaction(con):
        stored = items.replace_releases(con, repo, nodes)
        cursors.set_high_water_mark(con, repo, "releases", newest_update(nodes), stored)
    say(f"{repo}: {stored} releases")
    return stored


def _reconcile(con, client: GraphQLClient, done: RepoReport, say: Progress) -> None:
    """After complete listings: confirm each missing item with GitHub, then remove it."""
    repo = done.repo
    start = _run_start(con, repo)
    candidates = {
        node_id: (table, handle)
        for table in ("issues", "pull_requests", "discussions")
        for handle, node_id in con.execute(
            f"SELECT handle, node_id FROM {table} WHERE repo = ? AND fetched_at < ?",
            [repo, start],
        ).fetchall()
        if node_id
    }
    if not candidates:
        return
    say(f"{repo}: confirming {len(candidates)} items missing from the listings")
    where = listings.locate(client, list(candidates))
    gone: dict[str, list[str]] = {}
    for node_id, node in where.items():
        table, handle = candidates[node_id]
        moved = node and (node.get("repository") or {}).get("nameWithOwner") != repo
        if node is None or moved:
            gone.setdefault(table, []).append(handle)
            (done.transferred if moved else done.deleted).append(handle)
    with transaction(con):
        for table, handles in gone.items():
            items.delete_items(con, table, handles)


def _run_start(con, repo: str) -> datetime:
    """Rows of this repo fetched before this run's repository row was written."""
    return con.execute("SELECT fetched_at FROM repos WHERE repo = ?", [repo]).fetchall()[0][0]


def _finish(con, report: FetchReport, client, started, status: str, error: str | None) -> None:
    stats = client.stats() if hasattr(client, "stats") else {"requests": client.requests}
    report.requests = stats.get("requests", 0)
    report.cost = stats.get("cost", 0)
    report.client = stats
    report.rate_limit = client.last_rate_limit
    with transaction(con):
        cursors.record_run(
            con,
            run_id=report.run_id,
            command="fetch",
            started_at=started,
            status=status,
            repos=[r.repo for r in report.repos],
            stats=report.as_dict(),
            error=error,
            requests=report.requests,
            cost=report.cost,
        )


def _newer(node: Node, limit: datetime | None) -> bool:
    return limit is None or github_time(node["updatedAt"]) >= limit


def _sortable(value: datetime | None) -> datetime:
    return value or datetime.min.replace(tzinfo=UTC)
