"""Commits of the default branch and their per-file diffs, as rows of `commits` and
`commit_files`.

Metadata comes from the commit objects (`git cat-file --batch`), diffs from one
`git diff-tree --stdin` per batch of commits: every commit is diffed against its
first parent (a root commit against the empty tree), with rename detection.
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb

from ghindex.errors import GitSourceError
from ghindex.gitsource.repo import Git, Objects, Reader, is_sha, read_raw_change, rev_list
from ghindex.state import edges
from ghindex.state.rows import insert, upsert
from ghindex.vocabulary.handles import commit_file_handle, commit_handle

# One file's stored patch is cut at a line end before this many bytes ...
MAX_PATCH_BYTES = 100_000
# ... and a commit's patches together stop at this many; later files keep their
# counts but no patch. Both set `patch_truncated`.
MAX_COMMIT_PATCH_BYTES = 1_000_000
BATCH = 1_000  # commits per diff-tree process and per write

_PERSON = re.compile(rb"^(.*?)\s*<([^>]*)>\s*(-?\d+)?\s*([+-]\d{4})?\s*$")
_NOREPLY = re.compile(r"^(?:\d+\+)?([A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)@users\.noreply\.")
# diff-tree --stdin starts each commit's output with '<sha>\0' at a line start.
_NEXT_COMMIT = re.compile(rb"^[0-9a-f]{40}(?:[0-9a-f]{24})?\0", re.M)


@dataclass
class CommitsChange:
    added: int = 0
    removed: int = 0
    files: int = 0  # commit_files rows written


@dataclass(frozen=True)
class Person:
    name: str | None
    email: str | None
    time: datetime | None


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: list[str]
    author: Person
    committer: Person
    message: str


@dataclass
class FileChange:
    status: str  # A | M | D | R | C | T
    path: str
    old_path: str | None = None
    similarity: int | None = None
    additions: int | None = None
    deletions: int | None = None
    is_binary: bool = False
    patch: str | None = None
    patch_truncated: bool = False


def parse_commit(sha: str, raw: bytes) -> Commit:
    """A commit object's parents, author, committer and message."""
    head, _, body = raw.partition(b"\n\n")
    parents: list[str] = []
    people: dict[bytes, Person] = {}
    encoding = "utf-8"
    for line in head.split(b"\n"):
        if line.startswith(b" "):
            continue  # continuation of a multi-line header (gpgsig, mergetag)
        name, _, value = line.partition(b" ")
        if name == b"parent":
            parents.append(value.decode())
        elif name in (b"author", b"committer"):
            people[name] = _person(value)
        elif name == b"encoding":
            encoding = value.decode("ascii", "replace")
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    nobody = Person(None, None, None)
    return Commit(
        sha=sha,
        parents=parents,
        author=people.get(b"author", nobody),
        committer=people.get(b"committer", nobody),
        message=body.decode(encoding, "replace").rstrip("\n"),
    )


def _person(value: bytes) -> Person:
    match = _PERSON.match(value)
    if not match:
        return Person(value.decode("utf-8", "replace").strip() or None, None, None)
    name, email, seconds, _ = match.groups()
    when = datetime.fromtimestamp(int(seconds), UTC) if seconds else None
    return Person(
        name.decode("utf-8", "replace").strip() or None,
        email.decode("utf-8", "replace").strip() or None,
        when,
    )


def github_login(email: str | None) -> str | None:
    """The login in a GitHub noreply address ('123+octocat@users.noreply.github.com')."""
    match = _NOREPLY.match(email or "")
    return match.group(1) if match else None


def diff_commits(git: Git, pairs: Sequence[tuple[str, str | None]]) -> Iterator[tuple[str, list]]:
    """(sha, file changes) for each (commit, first parent or None for a root commit).

    Commits whose diff is empty are not yielded; the others come in input order.
    """
    lines = [f"{sha} {parent}" if parent else sha for sha, parent in pairs]
    args = ("diff-tree", "--stdin", "-z", "-r", "-M", "--root", "--raw", "-p")
    flags = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-relative")
    with git.stream(*args, *flags, stdin_lines=lines) as out:
        yield from _parse_diff_tree(out)


class _Section:
    """One `diff --git` section of a patch: counted in full, kept up to a limit.

    It is fed runs of whole lines (each ending with a newline), so counting works
    on bytes at C speed instead of line by line.
    """

    __slots__ = (
        "additions",
        "binary",
        "deletions",
        "in_hunk",
        "limit",
        "parts",
        "size",
        "truncated",
    )

    def __init__(self, limit: int) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.limit = limit
        self.truncated = False
        self.additions = 0
        self.deletions = 0
        self.binary = False
        self.in_hunk = False

    def feed(self, lines: bytes) -> None:
        hunks = lines
        if not self.in_hunk:  # header lines ('index', '---', '+++', ...) come first
            if lines.startswith(b"@@"):
                start = 0
            else:
                at = lines.find(b"\n@@")
                start = at + 1 if at >= 0 else len(lines)
            header, hunks = lines[:start], lines[start:]
            if header.startswith(b"Binary files ") or b"\nBinary files " in header:
                self.binary = True
            self.in_hunk = bool(hunks)
        if hunks:  # lines starting with '+' or '-' inside hunks
            self.additions += hunks.count(b"\n+") + hunks.startswith(b"+")
            self.deletions += hunks.count(b"\n-") + hunks.startswith(b"-")
        if self.truncated:
            return
        room = self.limit - self.size
        if len(lines) > room:
            lines = lines[: lines.rfind(b"\n", 0, room) + 1]
            self.truncated = True
        if lines:
            self.parts.append(lines)
            self.size += len(lines)


_SECTION_START = re.compile(rb"^diff --git ", re.M)


def _parse_diff_tree(out: Reader) -> Iterator[tuple[str, list[FileChange]]]:
    header = out.until(b"\0")
    while header is not None:
        if not is_sha(header):
            raise GitSourceError(f"unexpected output from git diff-tree: {header[:80]!r}")
        sha = header.decode()
        raw: list[tuple[bytes, bytes, str, str, str | None]] = []
        while token := out.until(b"\0"):  # an empty token ends the raw part
            c = read_raw_change(out, token)
            raw.append((c.old_mode.encode(), c.new_mode.encode(), c.status, c.path, c.new_path))
        sections: list[_Section] = []
        budget = MAX_COMMIT_PATCH_BYTES
        while (slab := out.lines_before(_NEXT_COMMIT)) is not None:
            starts = (m.start() for m in _SECTION_START.finditer(slab))
            bounds = [*sorted({0, *starts}), len(slab)]
            for begin, end in itertools.pairwise(bounds):
                if slab.startswith(b"diff --git ", begin):
                    if sections:
                        budget -= sections[-1].size
                    sections.append(_Section(max(0, min(MAX_PATCH_BYTES, budget))))
                elif not sections:
                    raise GitSourceError(f"unexpected output from git diff-tree: {slab[:80]!r}")
                sections[-1].feed(slab[begin:end])
        yield sha, _pair_up(sha, raw, sections)
        header = out.until(b"\0")


def _pair_up(sha: str, raw: list, sections: list[_Section]) -> list[FileChange]:
    """Match raw entries with patch sections; git splits a type change into two."""
    changes = []
    queue = iter(sections)
    for old_mode, new_mode, status, first, second in raw:
        old, new = int(old_mode, 8), int(new_mode, 8)
        count = 2 if old and new and (old & 0o170000) != (new & 0o170000) else 1
        parts = [next(queue, None) for _ in range(count)]
        if None in parts:
            raise GitSourceError(f"git diff-tree printed fewer patches than files for {sha}")
        change = FileChange(status=status[0], path=second if second is not None else first)
        if second is not None:
            change.old_path = first
            change.similarity = int(status[1:]) if status[1:].isdigit() else None
        change.is_binary = any(p.binary for p in parts)
        if not change.is_binary:
            change.additions = sum(p.additions for p in parts)
            change.deletions = sum(p.deletions for p in parts)
        kept = b"".join(b"".join(p.parts) for p in parts)
        change.patch_truncated = any(p.truncated for p in parts)
        change.patch = kept.decode("utf-8", "replace") if kept else None
        changes.append(change)
    if next(queue, None) is not None:
        raise GitSourceError(f"git diff-tree printed more patches than files for {sha}")
    return changes


@dataclass
class CommitPlan:
    to_add: list[str] = field(default_factory=list)  # newest first
    to_remove: list[str] = field(default_factory=list)
    remove_all: bool = False
    retries: int = 0  # stored commits read again to complete them


def plan_commits(
    con: duckdb.DuckDBPyConnection,
    git: Git,
    *,
    repo: str,
    head: str,
    previous: str | None,
    mode: str,
    shallow: frozenset[str],
) -> CommitPlan:
    """Which commits to read and which to drop, for the sync `mode` (see sync.classify)."""
    stored = {
        r[0] for r in con.execute("SELECT sha FROM commits WHERE repo = ?", [repo]).fetchall()
    }
    plan = CommitPlan()
    if mode == "full":
        plan.remove_all = True
        plan.to_add = rev_list(git, head)
    elif mode == "incremental":
        assert previous is not None
        plan.to_add = rev_list(git, head, f"^{previous}")
    elif mode in ("initial", "reconcile"):
        every = rev_list(git, head)
        plan.to_add = [sha for sha in every if sha not in stored]
        if not shallow:  # in a shallow clone a missing commit proves nothing
            plan.to_remove = sorted(stored - set(every))
    if plan.remove_all:
        return plan
    # Commits stored without their diff (a shallow clone's boundary) get it once the
    # clone is deeper, and the history behind them is added.
    incomplete = con.execute(
        "SELECT sha FROM commits WHERE repo = ? AND files_changed IS NULL ORDER BY committed_at",
        [repo],
    ).fetchall()
    queued = set(plan.to_add) | set(plan.to_remove)
    retries = [s for (s,) in incomplete if s not in shallow and s not in queued]
    if retries:
        if mode in ("unchanged", "incremental"):
            queued.update(retries)
            plan.to_add += [s for s in rev_list(git, head) if s not in stored and s not in queued]
        plan.to_add += retries
        plan.retries = len(retries)
    return plan


def sync_commits(
    con: duckdb.DuckDBPyConnection,
    git: Git,
    objects: Objects,
    plan: CommitPlan,
    *,
    repo: str,
    shallow: frozenset[str],
    web_url: str,
    now: datetime,
) -> CommitsChange:
    """Apply a plan: drop commits that left the branch, read and write the new ones."""
    change = CommitsChange()
    if plan.remove_all:
        change.removed = con.execute(
            "SELECT count(*) FROM commits WHERE repo = ?", [repo]
        ).fetchall()[0][0]
        con.execute("DELETE FROM commit_files WHERE repo = ?", [repo])
        con.execute("DELETE FROM commits WHERE repo = ?", [repo])
        con.execute("DELETE FROM edges WHERE repo = ? AND source_field = 'message'", [repo])
    elif plan.to_remove:
        for table in ("commit_files", "commits"):
            con.execute(
                f"DELETE FROM {table} WHERE repo = ? AND list_contains(?, sha)",
                [repo, plan.to_remove],
            )
        edges.delete_from_sources(con, [commit_handle(repo, sha) for sha in plan.to_remove])
        change.removed = len(plan.to_remove)
    for start in range(0, len(plan.to_add), BATCH):
        batch = plan.to_add[start : start + BATCH]
        commits = [
            _commit_from(sha, found)
            for sha, found in zip(batch, objects.get_many(batch), strict=True)
        ]
        pairs = [(c.sha, c.parents[0] if c.parents else None) for c in commits]
        diffs = dict(diff_commits(git, [p for p in pairs if p[0] not in shallow]))
        commit_rows, file_rows = [], []
        for commit in commits:
            files = None if commit.sha in shallow else diffs.get(commit.sha, [])
            commit_rows.append(_commit_row(repo, commit, files, web_url, now))
            file_rows += [_file_row(repo, commit.sha, f, now) for f in files or []]
        con.execute(
            "DELETE FROM commit_files WHERE repo = ? AND list_contains(?, sha)", [repo, batch]
        )
        upsert(con, "commits", "handle", commit_rows)
        insert(con, "commit_files", file_rows, key=("handle",))
        edges.replace_commit_links(con, repo, commit_rows)
        change.files += len(file_rows)
    change.added = len(plan.to_add) - plan.retries
    return change


def _read_commit(objects: Objects, sha: str) -> Commit:
    return _commit_from(sha, objects.get(sha))


def _commit_from(sha: str, found: tuple[str, bytes] | None) -> Commit:
    if found is None or found[0] != "commit":
        raise GitSourceError(f"commit {sha} is missing from the repository")
    return parse_commit(sha, found[1])


def commit_time(objects: Objects, sha: str) -> datetime | None:
    return _read_commit(objects, sha).committer.time


def _commit_row(
    repo: str, commit: Commit, files: list[FileChange] | None, web_url: str, now: datetime
) -> dict[str, Any]:
    counted = [f for f in files or [] if not f.is_binary]
    return {
        "handle": commit_handle(repo, commit.sha),
        "repo": repo,
        "sha": commit.sha,
        "parents": commit.parents,
        "author_name": commit.author.name,
        "author_login": github_login(commit.author.email),
        "committer_name": commit.committer.name,
        "committer_login": github_login(commit.committer.email),
        "authored_at": commit.author.time,
        "committed_at": commit.committer.time,
        "subject": commit.message.split("\n", 1)[0].strip(),
        "message": commit.message,
        "url": f"{web_url}/{repo}/commit/{commit.sha}",
        "files_changed": None if files is None else len(files),
        "additions": None if files is None else sum(f.additions or 0 for f in counted),
        "deletions": None if files is None else sum(f.deletions or 0 for f in counted),
        "fetched_at": now,
    }


def _file_row(repo: str, sha: str, change: FileChange, now: datetime) -> dict[str, Any]:
    return {
        "handle": commit_file_handle(repo, sha, change.path),
        "repo": repo,
        "sha": sha,
        "commit_handle": commit_handle(repo, sha),
        "path": change.path,
        "old_path": change.old_path,
        "status": change.status,
        "similarity": change.similarity,
        "additions": change.additions,
        "deletions": change.deletions,
        "is_binary": change.is_binary,
        "patch": change.patch,
        "patch_truncated": change.patch_truncated,
        "fetched_at": now,
    }
