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
an item GitHub says it cannot resolve (NOT_FOUND), or has moved to another
repository, is removed; one the token may no longer read (FORBIDDEN) is kept and
counted. When the removals would be a large share of the repository's stored
items (more than `GUARD_SHARE` of them and more than `GUARD_MIN`), nothing is
removed and the run says why; `force` removes them anyway.

What GitHub answers with an error (one item of a page, a surface the token may not
read) is left out, recorded in `fetch_gaps` and in the run's report, and the rest
is stored: items are read again by node id on the next run, a refused surface
keeps its mark. docs/github-behaviour.md lists each case. Reading items again by
node id and confirming removals (with the guard) are in `github/reconcile.py`.
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
from ghindex.errors import AnswerError, ConfigError, GhindexError, GitHubError, RepoNotFound
from ghindex.github import listings
from ghindex.github.client import GraphQLClient
from ghindex.github.reconcile import GUARD_SHARE, Outcome, read_gaps_again, reconcile
from ghindex.progress import Progress, Task
from ghindex.state import cursors, gaps, items, redact, redaction, renames
from ghindex.state.database import open_state, transaction
from ghindex.state.rows import Node, newest_update
from ghindex.vocabulary.handles import item_handle
from ghindex.vocabulary.times import readable_time

# Items updated this close to the high-water mark are fetched again: GitHub's
# timestamps have one-second resolution and its listings lag writes a little.
OVERLAP = timedelta(minutes=5)


@dataclass
class RepoReport:
    repo: str
    issues: int = 0
    pull_requests: int = 0
    discussions: int = 0
    releases: int = 0
    deleted: list[str] = field(default_factory=list)
    transferred: list[str] = field(default_factory=list)
    inaccessible: list[str] = field(default_factory=list)  # kept: this token may not read them
    hidden: list[str] = field(default_factory=list)  # stored minus parts the token may not see
    held_back: list[str] = field(default_factory=list)  # confirmed gone, kept: see GUARD_SHARE
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {surface, handle, reason}
    renamed_from: str | None = None
    complete: set[str] = field(default_factory=set)  # surfaces listed to their end
    notes: list[str] = field(default_factory=list)  # marks kept in range, and why
    started: datetime = field(default_factory=lambda: datetime.now(UTC))  # the run's start

    @property
    def partial(self) -> bool:
        """Whether something was left unread or unremoved this run."""
        return bool(self.inaccessible or self.held_back or self.skipped)

    def settle(self, outcome: Outcome) -> None:
        """Add what checking stored items against GitHub did (`github/reconcile.py`)."""
        for surface, stored in outcome.stored.items():
            setattr(self, surface, getattr(self, surface) + stored)
        self.deleted += outcome.deleted
        self.transferred += outcome.transferred
        self.inaccessible = sorted({*self.inaccessible, *outcome.inaccessible})
        self.held_back += outcome.held_back
        self.skipped += outcome.skipped

    def as_dict(self) -> dict[str, Any]:
        shown = {k: v for k, v in vars(self).items() if k not in ("complete", "notes", "started")}
        return {**shown, "partial": self.partial}

    def warnings(self) -> list[str]:
        """One line per thing this run could not read or would not remove, saying why."""
        lines = list(self.notes)
        if self.renamed_from:
            lines.append(
                f"{self.renamed_from} is now {self.repo} on GitHub: stored rows "
                "use the new name; update ghindex.toml or --repo"
            )
        for skip in self.skipped:
            what = skip["handle"] or f"{self.repo} {skip['surface'].replace('_', ' ')}"
            lines.append(f"skipped {what}: {skip['reason']} (read again on the next run)")
        if self.inaccessible:
            lines.append(
                f"{self.repo}: {_some(self.inaccessible)} can no longer be read with "
                "this token (FORBIDDEN) and were kept"
            )
        if self.held_back:
            lines.append(
                f"{self.repo}: {_some(self.held_back)} look deleted or moved, more "
                f"than {GUARD_SHARE:.0%} of the stored items, so nothing was removed: "
                "check the token's access, then run `ghindex fetch --full --force`"
            )
        if self.hidden:
            lines.append(
                f"{self.repo}: {_some(self.hidden)} stored without the parts this "
                "token may not see (FORBIDDEN below them)"
            )
        return lines


@dataclass
class FetchReport:
    run_id: str
    repos: list[RepoReport] = field(default_factory=list)
    requests: int = 0
    cost: int = 0
    client: dict[str, Any] = field(default_factory=dict)
    rate_limit: dict[str, Any] | None = None
    redactions: dict[str, int] = field(default_factory=dict)  # secrets replaced, per kind
    notes: list[str] = field(default_factory=list)  # what the run did besides fetching

    def warnings(self) -> list[str]:
        return [*self.notes, *(line for repo in self.repos for line in repo.warnings())]

    @property
    def status(self) -> str:
        """ok, or partial when some repository has gaps, unreadable or held-back items."""
        return "partial" if any(r.partial for r in self.repos) else "ok"

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "repos": [r.as_dict() for r in self.repos],
            "requests": self.requests,
            "cost": self.cost,
            "client": self.client,
            "rate_limit": self.rate_limit,
            "redactions": self.redactions,
            "warnings": self.warnings(),
        }


@dataclass(frozen=True)
class _Surface:
    name: str  # sync_state surface and table
    pages: Callable[..., Iterator[listings.Page]]
    save: Callable[[duckdb.DuckDBPyConnection, str, Sequence[Node]], int]


_ISSUES = _Surface("issues", listings.issue_pages, items.save_issues)
_PULLS = _Surface("pull_requests", listings.pull_request_pages, items.save_pull_requests)
_DISCUSSIONS = _Surface("discussions", listings.discussion_pages, items.save_discussions)


def organisation_repos(
    client: GraphQLClient, org: str, select: RepoSelection, notes: list[str] | None = None
) -> list[str]:
    """The repositories of `org` that `select` takes, by name. When GitHub's list of them
    cannot be followed to its end, those listed are taken and `notes` says why."""
    listed, short = listings.owner_repositories(client, org)
    if short is not None and not listed:
        raise GitHubError(f"{org}: GitHub's list of its repositories stopped at once: {short}")
    if short is not None and notes is not None:
        notes.append(
            f"{org}: took the {len(listed)} repositories listed before the list stopped: "
            f"{short} (run again to take the rest)"
        )
    return [n["nameWithOwner"] for n in listed if select.wants(n)]


def chosen_repos(
    client: GraphQLClient, settings: Settings, notes: list[str] | None = None
) -> list[str]:
    """The repositories a run takes: `repos`, then each of `orgs` as the selection settings
    choose, each once. An organisation of which nothing is chosen is a mistake to report;
    `notes` gets a line for each organisation whose list came short."""
    chosen = list(settings.repos)
    for org in settings.orgs:
        found = organisation_repos(client, org, settings.select, notes)
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
    force: bool = False,
    redacted: bool = True,
    progress: Progress | None = None,
    notes: Sequence[str] = (),
) -> FetchReport:
    """Fetch every surface of `repos` into the state database; `force` lets a full run
    remove more confirmed-gone items than the guard allows; `redacted` (the `redact`
    setting) keeps secrets out of the stored text. `progress` counts the items stored
    per repository and surface, and the repositories done; `notes` (from choosing the
    repositories) go into the report's warnings."""
    progress = progress or Progress()
    say = progress.note
    report = FetchReport(run_id=str(uuid.uuid4()), notes=list(notes))
    started = datetime.now(UTC)

    # Phase 1: every repository must exist before anything is written. A repository
    # GitHub answers under a name it does not confirm is refused alone, unwritten.
    metadata, refused = [], []
    for repo in repos:
        say(f"{repo}: looking up")
        try:
            node = listings.repository(client, repo)
        except listings.RepositoryRefused as exc:
            skip = {"surface": "repository", "handle": None, "reason": str(exc)}
            refused.append(RepoReport(repo, skipped=[skip], started=started))
            continue
        if all(node["id"] != other["id"] for other in metadata):  # two names, one repository
            metadata.append(node)

    # Phase 2: store page by page.
    report.repos += refused
    con = open_state(state_path)
    try:
        with transaction(con):
            reread, note = redaction.prepare(con, "github", redacted)
        con = redaction.compact_if_needed(state_path, con)
        if note:
            report.notes.append(note)
            say(note)
        try:
            with redact.tally(redacted) as counts:
                _fetch_repos(
                    con, client, metadata, report, full or reread, force, progress, started
                )
        except GhindexError as exc:
            report.redactions = dict(counts)
            _finish(con, report, client, started, "failed", redact.redact(str(exc)))
            raise
        except BaseException as exc:
            report.redactions = dict(counts)
            error = redact.redact(f"{type(exc).__name__}: {exc}")
            _finish(con, report, client, started, "failed", error)
            raise
        report.redactions = dict(counts)
        stored = {r for (r,) in con.execute("SELECT repo FROM repos").fetchall()}
        unread = sorted(stored - {r.repo for r in report.repos}) if reread else []
        if unread:  # raw text wanted, but these still hold redacted text: say so, keep trying
            report.notes.append(
                f"{', '.join(unread[:3])}{' and more' if len(unread) > 3 else ''} still hold "
                "redacted text: fetch them too (or all at once) to store their raw text"
            )
        else:
            with transaction(con):
                redaction.record(con, "github", redacted)
        _finish(con, report, client, started, report.status, None)
    finally:
        con.close()
    return report


def _fetch_repos(
    con,
    client,
    metadata: list[Node],
    report: FetchReport,
    full: bool,
    force: bool,
    progress: Progress,
    started: datetime,
) -> None:
    with progress.task("fetch", len(metadata), unit="repositories", verb="done") as counted:
        for node in metadata:
            with transaction(con):
                old = renames.previous_name(con, node.get("id"), node["nameWithOwner"])
                if old:
                    renames.rename_repo(con, old, node["nameWithOwner"])
                repo = items.save_repository(con, node)
            if old:
                progress.note(
                    f"{old} is now {repo} on GitHub (renamed or transferred): "
                    "its stored rows now use the new name"
                )
            done = RepoReport(repo, renamed_from=old, started=started)
            report.repos.append(done)
            _sync_repo(con, client, node, done, full, force, progress)
            counted.advance()


def _sync_repo(
    con, client, node: Node, done: RepoReport, full: bool, force: bool, progress: Progress
) -> None:
    repo, say = done.repo, progress.note
    if node.get("hasIssuesEnabled", True) or full:
        done.issues = _surface(con, done, "issues", progress, _sync_issues, client, full)
    done.pull_requests = _surface(
        con, done, "pull_requests", progress, _sync_descending, client, _PULLS, full
    )
    if node.get("hasDiscussionsEnabled", True) or full:
        done.discussions = _surface(
            con, done, "discussions", progress, _sync_descending, client, _DISCUSSIONS, full
        )
    done.releases = _surface(con, done, "releases", progress, _sync_releases, client)
    reread = read_gaps_again(con, client, repo, say)
    if reread is not None:
        # item gaps met by this run's pages were read again: the outcome says which remain
        done.skipped = [s for s in done.skipped if s["handle"] is None]
        done.settle(reread)
    if full:
        done.settle(reconcile(con, client, repo, done.complete, force, say))
    say(f"{repo}: done" + (" (with gaps, see the summary)" if done.partial else ""))


def _surface(con, done: RepoReport, name: str, progress: Progress, sync, client, *args) -> int:
    """Run one surface's sync, counting its items and pages in a task of its own; a
    surface GitHub refuses, answers with an error or pages without end becomes a gap
    (read again by the next run), not a failure of the run."""
    try:
        with progress.task(done.repo, unit=name.replace("_", " ")) as counted:
            stored = sync(con, client, done, *args, counted)
    except listings.SurfaceSkipped as skipped:
        reason = skipped.gap.reason
    except (AnswerError, RepoNotFound) as exc:
        reason = str(exc)  # what GitHub answered for this surface: its gap, not the run's end
    else:
        reason = None
    if reason is not None:
        with transaction(con):
            gaps.record(con, done.repo, name, "", None, reason)
        done.skipped.append({"surface": name, "handle": None, "reason": reason})
        progress.note(f"{done.repo}: skipped {name.replace('_', ' ')}: {reason}")
        return 0
    with transaction(con):
        gaps.clear(con, done.repo, name, [""])
    done.complete.add(name)
    return stored


def _sync_issues(con, client: GraphQLClient, done: RepoReport, full: bool, counted: Task) -> int:
    """Ascending by updatedAt from the mark: each committed page moves the mark."""
    repo = done.repo
    mark = None if full else _mark(con, done, "issues")
    since = mark - OVERLAP if mark else None
    stored = 0
    for pages, page in enumerate(listings.issue_pages(client, repo, since), 1):
        _commit_page(
            con,
            done,
            _ISSUES,
            page,
            then=lambda page=page: cursors.set_high_water_mark(
                con,
                repo,
                "issues",
                _newest(done, "issues", page.listed),
                len(page.nodes),
                done.started,
            ),
        )
        stored += len(page.nodes)
        counted.advance(len(page.nodes), detail=_pages(pages))
    return stored


def _sync_descending(
    con, client: GraphQLClient, done: RepoReport, surface: _Surface, full: bool, counted: Task
) -> int:
    """Newest first, stopping at the first item older than the mark.

    The mark moves once the whole pass is stored, because a descending pass only
    covers everything newer than the mark when it reaches the mark.
    """
    repo = done.repo
    mark = None if full else _mark(con, done, surface.name)
    stop_before = mark - OVERLAP if mark else None
    stored = 0
    newest: datetime | None = None
    for pages, page in enumerate(surface.pages(client, repo), 1):
        fresh = {n["id"] for n in page.listed if _newer(n, stop_before)}
        kept = listings.Page(
            listed=[n for n in page.listed if n["id"] in fresh],
            nodes=[n for n in page.nodes if n["id"] in fresh],
            gaps=[g for g in page.gaps if g.node_id in fresh],
            gone=page.gone,
            hidden=[n for n in page.hidden if n["id"] in fresh],
        )
        kept = _commit_page(con, done, surface, kept)
        stored += len(kept.nodes)
        newest = max([newest, _newest(done, surface.name, kept.listed)], key=_sortable)
        counted.advance(len(kept.nodes), detail=_pages(pages))
        if len(kept.listed) < len(page.listed):
            break
    with transaction(con):
        cursors.set_high_water_mark(con, repo, surface.name, newest, stored, done.started)
    return stored


def _commit_page(
    con,
    done: RepoReport,
    surface: _Surface,
    page: listings.Page,
    then: Callable[[], object] | None = None,
) -> listings.Page:
    """One page and what moves with it (`then`: a cursor) in one transaction. A node that
    cannot be stored becomes a gap with its cause, read again by the next run, and the
    rest of the page is stored: no single item fails a repository. Returns the page as
    stored."""
    counted = (len(done.hidden), len(done.skipped), len(done.deleted))
    try:
        with transaction(con):
            _store_page(con, done, surface, page)
            if then is not None:
                then()
        return page
    except Exception as exc:
        if not items.item_fault(exc):
            raise
        failure = exc
    del done.hidden[counted[0] :], done.skipped[counted[1] :], done.deleted[counted[2] :]
    bad = items.unstorable(con, surface.save, done.repo, page.nodes)
    if not bad:  # each node stores alone, so the page as a whole is at fault: not an item's
        raise failure
    left_out = {node["id"] for node, _cause in bad}
    kept = listings.Page(
        listed=page.listed,
        nodes=[n for n in page.nodes if n["id"] not in left_out],
        gaps=[
            *page.gaps,
            *(listings.Gap(surface.name, cause, n["id"], _number(n)) for n, cause in bad),
        ],
        gone=page.gone,
        hidden=[n for n in page.hidden if n["id"] not in left_out],
    )
    with transaction(con):
        _store_page(con, done, surface, kept)
        if then is not None:
            then()
    return kept


def _number(node: Node) -> int | None:
    """An item's number when GitHub gave a whole one (it names the gap's handle)."""
    number = node.get("number")
    return number if type(number) is int and number > 0 else None


def _store_page(con, done: RepoReport, surface: _Surface, page: listings.Page) -> None:
    """One page's items, its gaps and the items GitHub deleted while it was read."""
    repo = done.repo
    surface.save(con, repo, page.nodes)
    gaps.clear(con, repo, surface.name, [n["id"] for n in page.nodes])
    done.hidden += [item_handle(repo, n["number"]) for n in page.hidden]
    for gap in page.gaps:
        handle = item_handle(repo, gap.number) if gap.number is not None else None
        gaps.record(con, repo, surface.name, gap.node_id, handle, gap.reason)
        done.skipped.append({"surface": surface.name, "handle": handle, "reason": gap.reason})
    handles = [item_handle(repo, n["number"]) for n in page.gone]
    items.delete_items(con, surface.name, handles)
    gaps.clear(con, repo, surface.name, [n["id"] for n in page.gone])
    done.deleted += handles


def _sync_releases(con, client: GraphQLClient, done: RepoReport, counted: Task) -> int:
    """Every release, every run; only a complete list replaces the stored one."""
    repo = done.repo
    pages = []
    for page in listings.release_pages(client, repo):
        pages.append(page)
        counted.advance(len(page.nodes), detail=_pages(len(pages)))
    skipped = [gap for page in pages for gap in page.gaps]
    if skipped:
        raise listings.SurfaceSkipped(
            listings.Gap("releases", f"{len(skipped)} releases unreadable: {skipped[0].reason}")
        )
    nodes = [node for page in pages for node in page.nodes]
    with transaction(con):
        stored = items.replace_releases(con, repo, nodes)
        newest = _newest(done, "releases", nodes)
        cursors.set_high_water_mark(con, repo, "releases", newest, stored, done.started)
    return stored


def _mark(con, done: RepoReport, surface: str) -> datetime | None:
    """The surface's mark; a stored one no run could have set is named in a note, and
    the surface is listed from its start again."""
    untrusted = cursors.untrusted_mark(con, done.repo, surface)
    if untrusted is not None:
        done.notes.append(
            f"{done.repo} {surface.replace('_', ' ')}: the stored mark "
            f"{_shown_time(untrusted)} is not one a run could have set: listed from the "
            "start again"
        )
    return cursors.get_high_water_mark(con, done.repo, surface)


def _newest(done: RepoReport, surface: str, nodes: Sequence[Node]) -> datetime | None:
    """The latest update among `nodes`, for the mark. A time after the run began (or
    before any on GitHub) cannot move a mark there (`cursors.bounded_mark`): named in one
    note per surface."""
    odd = next(
        (
            (node, moment)
            for node in nodes
            if (moment := readable_time(node.get("updatedAt"))) is not None
            and cursors.bounded_mark(moment, done.started) != moment
        ),
        None,
    )
    shown = f"{done.repo} {surface.replace('_', ' ')}"
    if odd is not None and not any(n.startswith(f"{shown}: ") for n in done.notes):
        node, moment = odd
        what = item_handle(done.repo, node["number"]) if _number(node) else "an item"
        done.notes.append(
            f"{shown}: {what} says it was updated at {_shown_time(moment)}, outside what a "
            f"mark can be (from {cursors.FLOOR.year} to this run's start): the mark was "
            "kept in range"
        )
    return newest_update(nodes)


def _shown_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pages(n: int) -> str:
    return f"{n} page{'' if n == 1 else 's'}"


def _some(handles: Sequence[str], shown: int = 3) -> str:
    """ "3 items (octo/a#1, octo/a#2, octo/a#5)", at most `shown` named."""
    more = f", +{len(handles) - shown} more" if len(handles) > shown else ""
    noun = "item" if len(handles) == 1 else "items"
    return f"{len(handles)} {noun} ({', '.join(handles[:shown])}{more})"


def _finish(con, report: FetchReport, client, started, status: str, error: str | None) -> None:
    stats = client.stats() if hasattr(client, "stats") else {"requests": client.requests}
    report.requests = stats.get("requests", 0)
    report.cost = stats.get("cost", 0)
    report.client = stats
    report.rate_limit = _rate_limit_figures(client.last_rate_limit)
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


def _rate_limit_figures(answer: Any) -> dict[str, Any] | None:
    """Only the rate-limit figures ghindex reads, as plain numbers and a time: nothing
    else GitHub put there is kept."""
    if not isinstance(answer, dict):
        return None
    kept = {k: answer[k] for k in ("cost", "remaining") if isinstance(answer.get(k), int)}
    if isinstance(answer.get("resetAt"), str) and len(answer["resetAt"]) <= 40:
        kept["resetAt"] = answer["resetAt"]
    return kept


def _newer(node: Node, limit: datetime | None) -> bool:
    """Whether a node is at or past `limit`; one whose time does not read is kept, to be
    stored or recorded as a gap, never silently passed over."""
    moment = readable_time(node.get("updatedAt"))
    return limit is None or moment is None or moment >= limit


def _sortable(value: datetime | None) -> datetime:
    return value or datetime.min.replace(tzinfo=UTC)
