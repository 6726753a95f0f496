"""`ghindex fetch`: pull GitHub pages and store them, moving each cursor only
after the rows it covers are committed.

Every repository is looked up before anything is written, so a typo in one
`--repo` or a bad token leaves the state database exactly as it was. After that
each page is stored in one transaction together with its cursor move: a crash or
an error mid-run keeps every committed page, and the next run resumes from the
last committed high-water mark.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ghindex.errors import GhindexError
from ghindex.fetch import issues as fetch_issues
from ghindex.fetch.client import GraphQLClient
from ghindex.store import save
from ghindex.store.state import open_state, transaction

# Items updated this close to the high-water mark are fetched again: GitHub's
# timestamps have one-second resolution and its search index lags writes a little.
OVERLAP = timedelta(minutes=5)

Progress = Callable[[str], None]


@dataclass
class RepoReport:
    repo: str
    issues: int = 0
    pull_requests: int = 0


@dataclass
class FetchReport:
    run_id: str
    repos: list[RepoReport] = field(default_factory=list)
    requests: int = 0
    rate_limit: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "repos": [vars(r) for r in self.repos],
            "requests": self.requests,
            "rate_limit": self.rate_limit,
        }


def fetch(
    state_path: Path,
    client: GraphQLClient,
    repos: Sequence[str],
    *,
    full: bool = False,
    progress: Progress | None = None,
) -> FetchReport:
    """Fetch issues and pull requests of `repos` into the state database."""
    say = progress or (lambda _msg: None)
    report = FetchReport(run_id=str(uuid.uuid4()))
    started = datetime.now(UTC)

    # Phase 1: every repository must exist before anything is written.
    metadata = []
    for repo in repos:
        say(f"{repo}: looking up")
        metadata.append(fetch_issues.repository(client, repo))

    # Phase 2: store page by page.
    con = open_state(state_path)
    try:
        try:
            for node in metadata:
                with transaction(con):
                    repo = save.save_repository(con, node)
                repo_report = RepoReport(repo)
                report.repos.append(repo_report)
                repo_report.issues = _sync_issues(con, client, repo, full, say)
                repo_report.pull_requests = _sync_pull_requests(con, client, repo, full, say)
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


def _sync_issues(con, client: GraphQLClient, repo: str, full: bool, say: Progress) -> int:
    """Ascending by updatedAt from the mark: each committed page moves the mark."""
    mark = None if full else save.get_high_water_mark(con, repo, "issues")
    since = mark - OVERLAP if mark else None
    stored = 0
    for nodes in fetch_issues.issue_pages(client, repo, since):
        newest = save.newest_update(nodes)
        with transaction(con):
            save.save_issues(con, repo, nodes)
            save.set_high_water_mark(con, repo, "issues", newest, len(nodes))
        stored += len(nodes)
        say(f"{repo}: {stored} issues")
    return stored


def _sync_pull_requests(con, client: GraphQLClient, repo: str, full: bool, say: Progress) -> int:
    """Descending by updatedAt: stop at the first item older than the mark.

    The mark moves once the whole pass is stored, because a descending pass only
    covers everything newer than the mark when it reaches the mark.
    """
    mark = None if full else save.get_high_water_mark(con, repo, "pull_requests")
    stop_before = mark - OVERLAP if mark else None
    stored = 0
    newest: datetime | None = None
    for nodes in fetch_issues.pull_request_pages(client, repo):
        fresh = [n for n in nodes if _newer(n, stop_before)]
        with transaction(con):
            save.save_pull_requests(con, repo, fresh)
        stored += len(fresh)
        newest = max([newest, save.newest_update(fresh)], key=_sortable)
        say(f"{repo}: {stored} pull requests")
        if len(fresh) < len(nodes):
            break
    with transaction(con):
        save.set_high_water_mark(con, repo, "pull_requests", newest, stored)
    return stored


def _finish(con, report: FetchReport, client, started, status: str, error: str | None) -> None:
    report.requests = client.requests
    report.rate_limit = client.last_rate_limit
    with transaction(con):
        save.record_run(
            con,
            run_id=report.run_id,
            command="fetch",
            started_at=started,
            status=status,
            repos=[r.repo for r in report.repos],
            stats=report.as_dict(),
            error=error,
        )


def _newer(node: dict[str, Any], limit: datetime | None) -> bool:
    return limit is None or save.github_time(node["updatedAt"]) >= limit


def _sortable(value: datetime | None) -> datetime:
    return value or datetime.min.replace(tzinfo=UTC)
