"""Reading a retrieval eval set, and storing its corpus in a ghindex state database
the way ghindex's own readers store what they read (used by eval_retrieval.py).

An eval set is a folder with `corpus.jsonl` and `queries.jsonl` (see
/work/shared/eval/README.md). Per record type:

- issue, pull_request, discussion: GraphQL nodes shaped as the fetch queries
  select them, every nested connection complete, through `store.items.save_*`;
  comment records (URL '…/issues/N#issuecomment-ID') go into their item's
  `comments` connection when the item is in the corpus;
- release: release nodes through `store.items.replace_releases`; the tag is the
  record's `tag`, else its id after 'release:', else its title;
- diff (a commit: message, a 'Files: …' paragraph, the unified diff): one
  `commits` row and one `commit_files` row per `diff --git` section, built by
  gitsource's own row builders; listed files without a section get a row
  without a patch, like files past gitsource's patch budget;
- doc, wiki: `docs` rows, titled the way gitsource titles them, with the body's
  git blob id.

Any other type is skipped with a warning. The repository is the one in the
record's URL, else the one most records with the same id prefix have.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ghindex.gitsource.commits import Commit, FileChange, Person, _commit_row, _file_row
from ghindex.gitsource.docs import DOCS, WIKI
from ghindex.state import edges, items
from ghindex.state.database import transaction
from ghindex.state.rows import upsert
from ghindex.vocabulary.handles import (
    comment_handle,
    doc_handle,
    item_handle,
    release_handle,
    wiki_handle,
)

FALLBACK_TIME = "2000-01-01T00:00:00Z"  # for records without dates (docs, releases)
EMPTY_PAGE = {"hasNextPage": False, "endCursor": None}

# record type -> how it is stored; anything else is skipped with a warning
TYPES = {
    "issue": "issue",
    "pull_request": "pull_request",
    "pr": "pull_request",
    "pull": "pull_request",
    "discussion": "discussion",
    "comment": "comment",
    "issue_comment": "comment",
    "diff": "commit",
    "commit": "commit",
    "doc": "doc",
    "wiki": "wiki",
    "release": "release",
}

_REPO_URL = re.compile(r"^(https?://[^/\s]+)/([^/\s]+)/([^/\s#?]+)")
_NUMBER_URL = re.compile(r"/(?:issues|pull|pulls|discussions)/(\d+)")
_COMMENT_URL = re.compile(
    r"/(?:issues|pull|discussions)/(\d+)#(?:issuecomment|discussioncomment)-(\d+)"
)
_COMMIT_URL = re.compile(r"/commit/([0-9a-fA-F]{7,64})")
_BLOB_URL = re.compile(r"/blob/([^/]+)/(.+?)(?:[?#].*)?$")
_DIFF_START = re.compile(r"^diff --git ", re.M)
_SHA = re.compile(r"^[0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?$")


def say(message: str) -> None:
    print(f"[eval {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------- the set


@dataclass
class EvalSet:
    name: str
    corpus: list[dict[str, Any]]
    queries: list[dict[str, Any]]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_set(directory: Path, limit_queries: int | None, limit_docs: int | None) -> EvalSet:
    """The set, optionally cut down: queries spread evenly over the file, and the
    documents they need (relevant and excluded) before any other documents."""
    corpus = read_jsonl(directory / "corpus.jsonl")
    queries = spread(read_jsonl(directory / "queries.jsonl"), limit_queries)
    if limit_docs is not None and limit_docs < len(corpus):
        needed = {i for q in queries for i in [*q["relevant_ids"], *q.get("exclude_ids", [])]}
        kept = [r for r in corpus if r["id"] in needed]
        if len(kept) > limit_docs:
            say(f"--limit-docs {limit_docs}: keeping the {len(kept)} documents the queries need")
        others = [r for r in corpus if r["id"] not in needed]
        kept_ids = {r["id"] for r in kept + spread(others, max(0, limit_docs - len(kept)))}
        corpus = [r for r in corpus if r["id"] in kept_ids]
    return EvalSet(directory.resolve().name, corpus, queries)


def spread(rows: list[Any], count: int | None) -> list[Any]:
    """`count` rows evenly spaced over `rows`, in order (all of them for None)."""
    if count is None or count >= len(rows):
        return list(rows)
    return [rows[i * len(rows) // count] for i in range(count)]


# -------------------------------------------------------------------- the loader


@dataclass
class Loaded:
    handles: dict[str, str] = field(default_factory=dict)  # handle -> corpus id
    stored: Counter = field(default_factory=Counter)  # table -> rows written
    skipped: Counter = field(default_factory=Counter)  # reason -> records


def store_corpus(con, records: Sequence[dict[str, Any]]) -> Loaded:
    """Write the records into the state database, in one transaction."""
    loaded = Loaded()
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    records = with_repos(records)
    for record in records:
        kind = TYPES.get(str(record.get("type", "")).lower())
        if kind is None:
            loaded.skipped[f"type {record.get('type')!r} has no table"] += 1
        else:
            groups[kind].append(record)

    with transaction(con):
        for repo in sorted({record_repo(r) for r in records}):
            items.save_repository(con, {"nameWithOwner": repo, "url": f"https://github.com/{repo}"})
        comments = _comments_by_parent(groups["comment"], loaded)
        merged = merge_commits(groups["commit"])
        threads = {"issue": [], "pull_request": [], "discussion": []}
        for kind, nodes in threads.items():
            for record in groups[kind]:
                repo, number = record_repo(record), record_number(record)
                if number is None:
                    loaded.skipped[f"{kind} without a number"] += 1
                    continue
                handle = item_handle(repo, number)
                kids = comments.pop(handle, [])
                for comment_id, node in kids:
                    loaded.handles[comment_handle(handle, node["databaseId"])] = comment_id
                node = thread_node(record, kind, number, [n for _, n in kids])
                if kind == "pull_request" and (repo, number) in merged:
                    node["mergeCommit"] = {"oid": merged[(repo, number)]}
                nodes.append((repo, node))
                _remember(loaded, handle, record)
        for kids in comments.values():
            loaded.skipped["comment whose issue or pull request is not in the corpus"] += len(kids)
        savers = {
            "issue": items.save_issues,
            "pull_request": items.save_pull_requests,
            "discussion": items.save_discussions,
        }
        for kind, nodes in threads.items():
            for repo, group in itertools.groupby(sorted(nodes, key=lambda p: p[0]), lambda p: p[0]):
                loaded.stored[_TABLES[kind]] += savers[kind](con, repo, [n for _, n in group])

        releases: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for record in groups["release"]:
            repo, node = record_repo(record), release_node(record)
            releases[repo].append(node)
            _remember(loaded, release_handle(repo, node["tagName"]), record)
        for repo, nodes in releases.items():
            loaded.stored["releases"] += items.replace_releases(con, repo, nodes)

        docs = [doc_row(r, kind) for kind in ("doc", "wiki") for r in groups[kind]]
        for row, record in zip(docs, groups["doc"] + groups["wiki"], strict=True):
            _remember(loaded, row["handle"], record)
        upsert(con, "docs", "handle", docs)
        loaded.stored["docs"] += len(docs)

        commits, files = [], []
        for record in groups["commit"]:
            row, file_rows = commit_rows(record)
            commits.append(row)
            files.extend(file_rows)
            _remember(loaded, row["handle"], record)
        upsert(con, "commits", "handle", commits)
        upsert(con, "commit_files", "handle", files)
        for repo in {c["repo"] for c in commits}:
            edges.replace_commit_links(con, repo, [c for c in commits if c["repo"] == repo])
        loaded.stored["commits"] += len(commits)
        loaded.stored["commit_files"] += len(files)
    return loaded


_TABLES = {"issue": "issues", "pull_request": "pull_requests", "discussion": "discussions"}


def _remember(loaded: Loaded, handle: str, record: dict[str, Any]) -> None:
    if handle in loaded.handles and loaded.handles[handle] != record["id"]:
        loaded.skipped["record with the handle of an earlier record (earlier one dropped)"] += 1
    loaded.handles[handle] = record["id"]


def record_repo(record: dict[str, Any]) -> str:
    """'owner/name' from the record's GitHub URL, else from its id's prefix."""
    if record.get("_repo"):
        return record["_repo"]
    match = _REPO_URL.match(record.get("url") or "")
    if match:
        return f"{match[2]}/{match[3].removesuffix('.git')}"
    prefix = re.sub(r"[^A-Za-z0-9._-]", "-", str(record["id"]).split(":", 1)[0]) or "set"
    return f"eval/{prefix}"


def with_repos(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with their repository in `_repo`: a record without a GitHub URL
    takes the repository most records with the same id prefix have."""
    by_prefix: dict[str, Counter] = defaultdict(Counter)
    for record in records:
        if _REPO_URL.match(record.get("url") or ""):
            by_prefix[str(record["id"]).split(":", 1)[0]][record_repo(record)] += 1
    named = []
    for record in records:
        repo = record_repo(record)
        if not _REPO_URL.match(record.get("url") or ""):
            seen = by_prefix.get(str(record["id"]).split(":", 1)[0])
            repo = seen.most_common(1)[0][0] if seen else repo
        named.append({**record, "_repo": repo})
    return named


def record_number(record: dict[str, Any]) -> int | None:
    if str(record.get("number") or "").isdigit():
        return int(record["number"])
    match = _NUMBER_URL.search(record.get("url") or "")
    if match:
        return int(match[1])
    tail = re.search(r"(\d+)$", str(record["id"]))
    return int(tail[1]) if tail else None


def github_time(value: Any, fallback: str = FALLBACK_TIME) -> str:
    """An ISO time as GitHub writes it ('2015-03-01T12:00:00Z'); naive means UTC."""
    if not value:
        return fallback
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _times(record: dict[str, Any]) -> tuple[str, str]:
    created = record.get("created_at") or record.get("updated_at")
    updated = record.get("updated_at") or record.get("created_at")
    return github_time(created), github_time(updated)


def connection(nodes: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A connection read to its end, as the fetch queries return it."""
    nodes = list(nodes)
    return {"totalCount": len(nodes), "pageInfo": dict(EMPTY_PAGE), "nodes": nodes}


def _author(record: dict[str, Any]) -> dict[str, Any]:
    """The record's author; unknown stays unknown (a null `author` would mean the
    deleted-account "ghost" on GitHub, which the corpus does not say)."""
    login = record.get("author")
    if isinstance(login, dict):
        login = login.get("login")
    return {"__typename": "User", "login": str(login) if login else None}


def _labels(record: dict[str, Any]) -> list[str]:
    names = []
    for label in record.get("labels") or []:
        name = label.get("name") if isinstance(label, dict) else label
        if name:
            names.append(str(name))
    return names


def merge_commits(commits: Sequence[dict[str, Any]]) -> dict[tuple[str, int], str]:
    """(repo, pull request number) -> the sha of its merge commit: a commit record that
    says it merged a pull request ("Merge ...") and carries that pull request's number, as
    the eval sets record the merge script's commits. GitHub gives each merged pull request
    its `mergeCommit`; the loader gives the pull request node the same."""
    found = {}
    for record in commits:
        number = record_number(record)
        if number is not None and str(record.get("title") or "").startswith("Merge "):
            found[(record_repo(record), number)] = _record_sha(record)
    return found


def thread_node(
    record: dict[str, Any], kind: str, number: int, comments: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """An issue, pull request or discussion node as the fetch queries select it."""
    created, updated = _times(record)
    repo = record_repo(record)
    state = str(record.get("state") or "open").upper()
    allowed = ("OPEN", "CLOSED", "MERGED") if kind == "pull_request" else ("OPEN", "CLOSED")
    if state not in allowed:
        state = "CLOSED"
    path = {"issue": "issues", "pull_request": "pull", "discussion": "discussions"}[kind]
    node: dict[str, Any] = {
        "id": None,
        "number": number,
        "title": record.get("title") or "",
        "body": record.get("body") or "",
        "url": record.get("url") or f"https://github.com/{repo}/{path}/{number}",
        "locked": False,
        "author": _author(record),
        "authorAssociation": None,
        "createdAt": created,
        "updatedAt": updated,
        "closedAt": None if state == "OPEN" else updated,
        "labels": connection(
            {"name": name, "color": None, "description": None} for name in _labels(record)
        ),
        "comments": connection(comments),
        "reactions": {"totalCount": 0},
    }
    if kind == "discussion":
        node.update(
            closed=state != "OPEN",
            stateReason=None,
            category=None,
            answer=None,
            answerChosenAt=None,
            answerChosenBy=None,
            upvoteCount=0,
        )
        return node
    node.update(
        state=state,
        milestone=None,
        assignees=connection([]),
        timelineItems=connection([]),
    )
    if kind == "issue":
        node.update(stateReason=None, parent=None)
    else:
        node.update(
            isDraft=False,
            merged=state == "MERGED",
            mergedAt=updated if state == "MERGED" else None,
            baseRefName=None,
            headRefName=None,
            additions=None,
            deletions=None,
            changedFiles=None,
            mergeCommit=None,
            reviews=connection([]),
            reviewThreads=connection([]),
            closingIssuesReferences=connection([]),
            commits=connection([]),
        )
    return node


def _comments_by_parent(
    records: Sequence[dict[str, Any]], loaded: Loaded
) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Comment nodes (with their corpus ids) by the handle of the item they are on."""
    found: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for record in records:
        url = record.get("url") or ""
        match = _COMMENT_URL.search(url)
        number = int(match[1]) if match else record.get("parent_number")
        if not isinstance(number, int):
            loaded.skipped["comment without its item's number"] += 1
            continue
        database_id = int(match[2]) if match else zlib.crc32(str(record["id"]).encode())
        created, updated = _times(record)
        node = {
            "id": None,
            "databaseId": database_id,
            "url": url,
            "body": record.get("body") or "",
            "isMinimized": False,
            "author": _author(record),
            "authorAssociation": None,
            "createdAt": created,
            "updatedAt": updated,
            "reactions": {"totalCount": 0},
            "replies": connection([]),
            "replyTo": None,
        }
        found[item_handle(record_repo(record), number)].append((record["id"], node))
    return found


def release_node(record: dict[str, Any]) -> dict[str, Any]:
    """A release node as releases.graphql selects it; the tag comes from the record's
    `tag`, else its id after 'release:', else its title."""
    created, updated = _times(record)
    tag = record.get("tag")
    if not tag and ":release:" in f":{record['id']}":
        tag = str(record["id"]).rsplit("release:", 1)[1]
    tag = tag or re.sub(r"^(?:version|release)\s+", "", record.get("title") or "", flags=re.I)
    return {
        "id": None,
        "databaseId": None,
        "tagName": tag,
        "name": record.get("title"),
        "description": record.get("body") or "",
        "url": record.get("url") or None,
        "isDraft": False,
        "isPrerelease": False,
        "isLatest": False,
        "author": _author(record),
        "tagCommit": None,
        "createdAt": created,
        "publishedAt": created,
        "updatedAt": updated,
    }


def doc_row(record: dict[str, Any], kind: str) -> dict[str, Any]:
    """A `docs` row as gitsource writes it: the title is derived from the text the
    way `ghindex build --git` derives it; the blob sha is the body's git blob id."""
    url = record.get("url") or ""
    blob = _BLOB_URL.search(url)
    path = record.get("path") or (unquote(blob[2]) if blob else None)
    path = path or str(record["id"]).rsplit(":", 1)[-1]
    body = record.get("body") or ""
    data = body.encode("utf-8")
    source = DOCS if kind == "doc" else WIKI
    commit = blob[1] if blob and _SHA.match(blob[1]) else record.get("sha")
    repo = record_repo(record)
    handle = source.handle(repo, path) or (
        doc_handle(repo, path) if kind == "doc" else wiki_handle(repo, Path(path).stem)
    )
    return {
        "handle": handle,
        "repo": repo,
        "kind": source.kind,
        "path": path,
        "title": source.title(body, path, handle) or record.get("title") or path,
        "body": body,
        "commit_sha": commit or hashlib.sha256(data).hexdigest()[:40],
        "blob_sha": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
        "size": len(data),
        "last_commit_sha": None,
        "last_changed_at": github_time(record.get("updated_at"))
        if record.get("updated_at")
        else None,
        "url": url or f"https://github.com/{repo}/blob/HEAD/{path}",
        "fetched_at": datetime.now(UTC),
    }


def commit_rows(record: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The `commits` row and `commit_files` rows of a diff record.

    Its body is the message, a 'Files: a, b' paragraph and the unified diff of the
    files; listed files without a section in the diff (cut from the record) get a
    row without a patch, like files past gitsource's patch budget.
    """
    message, listed, patch = split_commit_body(record.get("body") or "")
    message = message or record.get("title") or ""
    sha = _record_sha(record)
    when = datetime.fromisoformat(github_time(record.get("created_at")).replace("Z", "+00:00"))
    person = Person(_author(record)["login"] if _author(record) else None, None, when)
    changes = file_changes(patch, listed)
    repo = record_repo(record)
    url = record.get("url") or ""
    match = _REPO_URL.match(url)
    web = match[1] if match else "https://github.com"
    now = datetime.now(UTC)
    row = _commit_row(repo, Commit(sha, [], person, person, message), changes, web, now)
    if url:
        row["url"] = url
    return row, [_file_row(repo, sha, change, now) for change in changes]


def _record_sha(record: dict[str, Any]) -> str:
    if record.get("sha"):
        return str(record["sha"]).lower()
    match = _COMMIT_URL.search(record.get("url") or "")
    if match:
        return match[1].lower()
    return str(record["id"]).rsplit(":", 1)[-1].lower()


def split_commit_body(body: str) -> tuple[str, list[str], str]:
    """(message, files listed in the 'Files:' paragraph, unified diff)."""
    start = _DIFF_START.search(body)
    head, patch = (body[: start.start()], body[start.start() :]) if start else (body, "")
    head = head.rstrip()
    listed: list[str] = []
    at = head.rfind("\n\nFiles: ")
    if at >= 0 or head.startswith("Files: "):
        names = head[at + len("\n\nFiles: ") :] if at >= 0 else head[len("Files: ") :]
        listed = [n.strip() for n in names.replace("\n", " ").split(", ") if n.strip()]
        head = head[:at] if at >= 0 else ""
    return head.strip("\n"), listed, patch


def file_changes(patch: str, listed: Sequence[str] = ()) -> list[FileChange]:
    """One change per `diff --git` section, then the listed files no section covers."""
    bounds = [m.start() for m in _DIFF_START.finditer(patch)] + [len(patch)]
    changes = [file_change(patch[a:b]) for a, b in itertools.pairwise(bounds)]
    seen = {c.path for c in changes} | {c.old_path for c in changes if c.old_path}
    for path in dict.fromkeys(listed):
        if path not in seen:
            changes.append(FileChange(status="M", path=path, patch=None, patch_truncated=True))
    return changes


def file_change(section: str) -> FileChange:
    """A FileChange from one `diff --git a/X b/Y` section of a unified diff."""
    lines = section.split("\n")
    old, new = _header_paths(lines[0])
    status, old_path, similarity, binary = "M", None, None, False
    hunk = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
    for line in lines[1:hunk]:
        if line.startswith("new file mode"):
            status = "A"
        elif line.startswith("deleted file mode"):
            status = "D"
        elif line.startswith(("rename from ", "copy from ")):
            status = "R" if line.startswith("rename") else "C"
            old_path = line.split(" from ", 1)[1]
        elif line.startswith(("rename to ", "copy to ")):
            new = line.split(" to ", 1)[1]
        elif line.startswith("similarity index "):
            digits = line.removeprefix("similarity index ").rstrip("%")
            similarity = int(digits) if digits.isdigit() else None
        elif line.startswith("--- a/"):
            old = line[len("--- a/") :].rstrip("\t")
        elif line.startswith("+++ b/"):
            new = line[len("+++ b/") :].rstrip("\t")
        elif line.startswith(("Binary files ", "GIT binary patch")):
            binary = True
    body = lines[hunk:]
    return FileChange(
        status=status,
        path=(old if status == "D" else new) or new or old or "",
        old_path=old_path if status in "RC" else None,
        similarity=similarity,
        additions=None if binary else sum(1 for ln in body if ln.startswith("+")),
        deletions=None if binary else sum(1 for ln in body if ln.startswith("-")),
        is_binary=binary,
        patch=section,
        patch_truncated=False,
    )


def _header_paths(header: str) -> tuple[str | None, str | None]:
    """a/X and b/Y of 'diff --git a/X b/Y' (paths with spaces: the split with X == Y)."""
    rest = header.removeprefix("diff --git ").strip()
    splits = [m.start() for m in re.finditer(r" b/", rest)]
    if not rest.startswith("a/") or not splits:
        return None, None
    pairs = [(rest[2:at], rest[at + 3 :]) for at in splits]
    return next((p for p in pairs if p[0] == p[1]), pairs[0])
