#!/usr/bin/env python3
"""Build ghindex's bundled sample data from github3.py's recorded API responses.

The github3.py test suite ships betamax "cassettes": real GitHub REST API
responses recorded while its integration tests ran. This script pulls every
issue, pull request, comment, review, review comment, release and issue event
out of them, merges the several views of each object, and rewrites them in the
shape ghindex's GraphQL queries (src/ghindex/github/queries/*.graphql) return,
so the sample can be loaded by the same code that loads live fetches.

Get the input (BSD-3-Clause, see src/ghindex/sample/NOTICE):

    pip download --no-deps --no-binary :all: github3.py==4.0.1

then, from the repository root:

    python examples/sample/convert_github3py.py --sdist github3.py-4.0.1.tar.gz

``--sdist`` also accepts the extracted directory. The output is
deterministic: the same sdist always gives a byte-identical file.

Output: one JSON object per line, one line per repository, repositories
sorted by name:

    {"repository": {...}, "issues": [...], "pullRequests": [...],
     "discussions": [...], "releases": [...]}

Nested connections (an issue's comments, a pull request's reviews...) are
written as GraphQL returns them, complete on one page:
``{"totalCount": n, "pageInfo": {"hasNextPage": false, "endCursor": null},
"nodes": [...]}``.

The conversion uses only the standard library. Before writing, the output is
checked field by field against the assembled query documents and GitHub's
schema; that check needs graphql-core and a ghindex source tree, and is skipped
with a warning when they are missing (--no-check skips it on purpose).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import io
import json
import re
import sys
import tarfile
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = Path("src/ghindex/sample/github3py.jsonl")
SCHEMA_PATH = REPO_ROOT / "tests" / "github_schema" / "schema.graphql"

# Repositories kept even if they fall under --min-items.
ALWAYS_KEEP = ("betamaxpy/betamax", "sigmavirus24/github3.py", "requests/requests")

ITEM_URL = re.compile(r"^https://github\.com/([^/]+)/([^/]+)/(issues|pull)/(\d+)$")
# The API address of an issue or pull request: comments and reviews point to it.
API_ITEM_URL = re.compile(r"^https://api\.github\.com/repos/([^/]+/[^/]+)/(?:issues|pulls)/(\d+)$")
API_REPO_URL = re.compile(r"^https://api\.github\.com/repos/([^/]+/[^/]+)/")
# Requests whose response lists one item's events or one pull request's commits.
ITEM_EVENTS_URI = re.compile(r"^https://api\.github\.com/repos/([^/]+/[^/]+)/issues/(\d+)/events\b")
PULL_COMMITS_URI = re.compile(
    r"^https://api\.github\.com/repos/([^/]+/[^/]+)/pulls/(\d+)/commits\b"
)
LATEST_RELEASE_URI = re.compile(r"^https://api\.github\.com/repos/([^/]+/[^/]+)/releases/latest$")
SHA = re.compile(r"^[0-9a-f]{40}$")

# Patterns of real-looking secrets. Cassettes replace tokens with placeholders,
# so none are expected; anything that matches is replaced and counted.
SECRET_PATTERNS = [
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"(?i)\b(?:token|bearer)\s+[0-9a-f]{40}\b"),
]


# --------------------------------------------------------------------------
# Reading cassettes


def iter_cassettes(sdist: Path) -> Iterator[tuple[str, dict]]:
    """Yield (file name, parsed cassette) in file-name order."""
    found: list[tuple[str, bytes]] = []
    if sdist.is_file():
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                parts = member.name.split("/")
                if (
                    member.isfile()
                    and len(parts) >= 3
                    and parts[-3:-1] == ["tests", "cassettes"]
                    and parts[-1].endswith(".json")
                ):
                    fh = tar.extractfile(member)
                    assert fh is not None
                    found.append((parts[-1], fh.read()))
    else:
        candidates = [sdist / "tests" / "cassettes", *sdist.glob("*/tests/cassettes")]
        cdir = next((c for c in candidates if c.is_dir()), None)
        if cdir is None:
            raise SystemExit(f"no tests/cassettes directory under {sdist}")
        found = [(p.name, p.read_bytes()) for p in cdir.glob("*.json")]
    if not found:
        raise SystemExit(f"no cassettes found in {sdist}")
    for name, raw in sorted(found):
        yield name, json.loads(raw)


def response_json(interaction: dict) -> Any:
    """The decoded JSON body of one recorded response, or None if it is not JSON."""
    body = interaction.get("response", {}).get("body", {})
    if body.get("base64_string"):
        raw = base64.b64decode(body["base64_string"])
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None  # tarballs, zipballs and other binary downloads
    else:
        text = body.get("string") or ""
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None  # diffs, patches, HTML, plain text


def walk(value: Any) -> Iterator[dict]:
    """Every dict inside a JSON value, depth first, in document order."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk(v)


def is_item(obj: dict) -> bool:
    return (
        "number" in obj
        and "title" in obj
        and isinstance(obj.get("html_url"), str)
        and ITEM_URL.match(obj["html_url"]) is not None
    )


def is_full_repo(obj: dict) -> bool:
    return (
        isinstance(obj.get("full_name"), str)
        and "owner" in obj
        and "fork" in obj
        and isinstance(obj.get("html_url"), str)
    )


# --------------------------------------------------------------------------
# Value conventions


def iso(value: str | None) -> str | None:
    """A REST timestamp as ISO-8601 UTC with a trailing Z."""
    if value is None:
        return None
    text = value.strip()
    for fmt in ("%Y/%m/%d %H:%M:%S %z",):  # format of some very old payloads
        try:
            dt = datetime.strptime(text, fmt)
            break
        except ValueError:
            pass
    else:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def legacy_id(type_name: str, number: int | str) -> str:
    """GitHub's legacy global node id, e.g. base64("05:Issue123")."""
    return base64.b64encode(f"0{len(type_name)}:{type_name}{number}".encode()).decode()


def node_type(node_id: str) -> str | None:
    """The object type a node id names: "Issue", "PullRequest", ... or None."""
    prefixes = {"I_": "Issue", "PR_": "PullRequest", "R_": "Repository"}
    for prefix, name in prefixes.items():
        if node_id.startswith(prefix):
            return name
    try:
        decoded = base64.b64decode(node_id, validate=True).decode("ascii")
    except ValueError:
        return None
    m = re.match(r"^\d+:([A-Za-z]+?)\d+$", decoded)
    return m.group(1) if m else None


def actor(user: dict | None) -> dict | None:
    if not user or not user.get("login"):
        return None
    return {"__typename": "Bot" if user.get("type") == "Bot" else "User", "login": user["login"]}


def milestone(ms: dict | None, repo: str) -> dict | None:
    if not ms:
        return None
    url = ms.get("html_url") or f"https://github.com/{repo}/milestone/{ms['number']}"
    return {
        "number": ms["number"],
        "title": ms["title"],
        "state": str(ms["state"]).upper(),
        "dueOn": iso(ms.get("due_on")),
        "url": url,
    }


def labels(items: list[dict]) -> dict:
    return {
        "nodes": [
            {"name": lb["name"], "color": lb["color"], "description": lb.get("description")}
            for lb in items
        ]
    }


def assignees(obj: dict) -> dict:
    people = obj.get("assignees") or ([obj["assignee"]] if obj.get("assignee") else [])
    return {"nodes": [{"login": p["login"]} for p in people]}


def connection(nodes: list[Any]) -> dict:
    """A nested connection as GraphQL returns it, every node on one page."""
    return {
        "totalCount": len(nodes),
        "pageInfo": {"hasNextPage": False, "endCursor": None},
        "nodes": nodes,
    }


def api_item(url: str | None) -> tuple[str, int] | None:
    """(lower-case "owner/name", number) of an API issue or pull request address."""
    m = API_ITEM_URL.match(url or "")
    return (m.group(1).lower(), int(m.group(2))) if m else None


def commit_repo(commit_url: str | None) -> str | None:
    """ "owner/name" from a commit's API address."""
    m = API_REPO_URL.match(commit_url or "")
    return m.group(1) if m else None


def fold(views: list[dict]) -> dict:
    """Merge REST views of one object oldest first: the newest says the last word."""
    merged: dict[str, Any] = {}
    for view in sorted(views, key=lambda v: iso(v.get("updated_at")) or ""):
        merged.update(view)
    return merged


# --------------------------------------------------------------------------
# Issues and pull requests: collecting and merging views

# Keys that only matter when the view actually carries them; a view that lacks
# one must not erase what another view said.
ISSUE_KEYS = ("title", "body", "state", "locked", "created_at", "updated_at", "closed_at")


def facts(obj: dict) -> dict:
    """What one REST view says about an issue or pull request, normalised."""
    owner, name, kind, number = ITEM_URL.match(obj["html_url"]).groups()
    repo = f"{owner}/{name}"
    pulls_view = "head" in obj or "diff_url" in obj  # the pulls endpoint
    f: dict[str, Any] = {
        "repo": repo,
        "number": int(obj["number"]),
        "is_pr": kind == "pull" or bool(obj.get("pull_request")),
        "url": f"https://github.com/{repo}/{kind}/{number}",
    }
    for key in ISSUE_KEYS:
        if key in obj:
            f[key] = obj[key]
    if "user" in obj:
        f["author"] = actor(obj["user"])
    if obj.get("author_association"):
        f["author_association"] = obj["author_association"]
    if "state_reason" in obj:
        f["state_reason"] = obj["state_reason"]
    if "milestone" in obj:
        f["milestone"] = milestone(obj["milestone"], repo)
    if "labels" in obj:
        f["labels"] = labels(obj["labels"])
    if "assignees" in obj or "assignee" in obj:
        f["assignees"] = assignees(obj)
    if isinstance(obj.get("reactions"), dict):
        f["reactions"] = obj["reactions"].get("total_count", 0)
    # Identity: a pull request's own id lives only in the pulls-endpoint view;
    # the issues endpoint gives the id of the issue behind it.
    own_type = "PullRequest" if pulls_view else "Issue"
    node = obj.get("node_id")
    if node and node_type(node) not in (None, own_type):
        node = None
    f[f"id_{own_type}"] = node or legacy_id(own_type, obj["id"])
    f[f"rest_id_{own_type}"] = obj["id"]
    if pulls_view:
        if "draft" in obj:
            f["draft"] = bool(obj["draft"])
        if "merged_at" in obj:
            f["merged_at"] = obj["merged_at"]
        if "merged" in obj:
            f["merged"] = bool(obj["merged"])
        if obj.get("merge_commit_sha"):
            f["merge_commit_sha"] = obj["merge_commit_sha"]
        for side in ("base", "head"):
            if isinstance(obj.get(side), dict) and obj[side].get("ref"):
                f[f"{side}_ref"] = obj[side]["ref"]
        for key in ("additions", "deletions", "changed_files"):
            if key in obj:
                f[key] = obj[key]
    elif isinstance(obj.get("pull_request"), dict) and "merged_at" in obj["pull_request"]:
        f["merged_at"] = obj["pull_request"]["merged_at"]
    return f


def merge(views: list[dict]) -> dict:
    """Fold views oldest first, so the newest view wins every key it carries."""
    merged: dict[str, Any] = {}
    for f in sorted(views, key=lambda v: iso(v.get("updated_at")) or ""):
        merged.update(f)
    merged["is_pr"] = any(v["is_pr"] for v in views)
    if merged["is_pr"]:  # e.g. an issue later turned into a pull request
        merged["url"] = f"https://github.com/{merged['repo']}/pull/{merged['number']}"
    return merged


def issue_node(m: dict, related: dict) -> dict:
    return {
        "id": m.get("id_Issue"),  # replaced for pull requests
        "number": m["number"],
        "title": m["title"],
        "body": m.get("body") or "",
        "url": m["url"],
        "state": m["state"].upper(),
        "stateReason": (m.get("state_reason") or "").upper() or None,
        "locked": bool(m.get("locked")),
        "author": m.get("author"),
        "authorAssociation": m.get("author_association") or "NONE",
        "createdAt": iso(m["created_at"]),
        "updatedAt": iso(m["updated_at"]),
        "closedAt": iso(m.get("closed_at")),
        "milestone": m.get("milestone"),
        "labels": m.get("labels") or {"nodes": []},
        "assignees": m.get("assignees") or {"nodes": []},
        "reactions": {"totalCount": m.get("reactions") or 0},
        "parent": None,
        "comments": connection(related.get("comments", [])),
        "timelineItems": connection(related.get("timeline", [])),
    }


def pull_node(m: dict, related: dict) -> dict:
    node = issue_node(m, related)
    del node["stateReason"], node["parent"]
    if "id_PullRequest" in m:
        node["id"] = m["id_PullRequest"]
    else:  # only issue-endpoint views were recorded: derive one from the issue id
        node["id"] = legacy_id("PullRequest", m["rest_id_Issue"])
    merged_at = iso(m.get("merged_at"))
    merge_sha = m.get("merge_commit_sha")
    if merged_at is None and "merged_event" in related:
        # Recorded only through the issues endpoint, but a "merged" event says more.
        merged_at, merge_sha = related["merged_event"]
    merged = merged_at is not None or bool(m.get("merged"))
    node.update(
        {
            "state": "MERGED" if merged else m["state"].upper(),
            "isDraft": bool(m.get("draft")),
            "merged": merged,
            "mergedAt": merged_at,
            "baseRefName": m.get("base_ref") or "",
            "headRefName": m.get("head_ref") or "",
            "additions": m.get("additions") or 0,
            "deletions": m.get("deletions") or 0,
            "changedFiles": m.get("changed_files") or 0,
            "mergeCommit": {"oid": merge_sha} if merged and merge_sha else None,
            "reviews": connection(related.get("reviews", [])),
            "reviewThreads": connection(related.get("threads", [])),
            "closingIssuesReferences": connection([]),
            "commits": connection(related.get("commits", [])),
        }
    )
    return node


def repository_node(name: str, payloads: list[dict], items: list[dict]) -> dict:
    if payloads:
        r: dict[str, Any] = {}
        for p in sorted(payloads, key=lambda p: iso(p.get("updated_at")) or ""):
            r.update(p)
        node_id = r.get("node_id")
        if not node_id or node_type(node_id) != "Repository":
            node_id = legacy_id("Repository", r["id"])
        return {
            "id": node_id,
            "nameWithOwner": r["full_name"],
            "description": r.get("description"),
            "url": r["html_url"],
            "isPrivate": bool(r.get("private")),
            "isArchived": bool(r.get("archived")),
            "isFork": bool(r.get("fork")),
            "hasIssuesEnabled": bool(r.get("has_issues", True)),
            # Only payloads recorded since 2022 carry `has_discussions`.
            "hasDiscussionsEnabled": bool(r.get("has_discussions")),
            "createdAt": iso(r["created_at"]),
            "updatedAt": iso(r["updated_at"]),
            "pushedAt": iso(r.get("pushed_at")),
            "defaultBranchRef": (
                {"name": r["default_branch"]} if r.get("default_branch") else None
            ),
        }
    # Seen only through search results: no repository payload was recorded, so
    # the id is synthetic and the times span the recorded items.
    return {
        "id": base64.b64encode(f"010:Repository{name}".encode()).decode(),
        "nameWithOwner": name,
        "description": None,
        "url": f"https://github.com/{name}",
        "isPrivate": False,
        "isArchived": False,
        "isFork": False,
        "hasIssuesEnabled": True,  # it has issues
        "hasDiscussionsEnabled": False,
        "createdAt": min(i["createdAt"] for i in items),
        "updatedAt": max(i["updatedAt"] for i in items),
        "pushedAt": None,
        "defaultBranchRef": None,
    }


# --------------------------------------------------------------------------
# Comments, reviews, review threads, commits, events and releases


def own_id(obj: dict, type_name: str) -> str:
    """The recorded node id if it names a `type_name`, else GitHub's legacy id."""
    node = obj.get("node_id")
    if node and node_type(node) in (None, type_name):
        return node
    return legacy_id(type_name, obj["id"])


def comment_node(c: dict) -> dict:
    return {
        "id": own_id(c, "IssueComment"),
        "databaseId": c["id"],
        "url": c["html_url"],
        "body": c.get("body") or "",
        "isMinimized": False,
        "author": actor(c.get("user")),
        "authorAssociation": c.get("author_association") or "NONE",
        "createdAt": iso(c["created_at"]),
        "updatedAt": iso(c.get("updated_at") or c["created_at"]),
    }


def oid(sha: str | None) -> dict | None:
    return {"oid": sha} if sha else None


def review_comment_node(c: dict) -> dict:
    reply_to = c.get("in_reply_to_id")
    review = c.get("pull_request_review_id")
    return {
        "id": own_id(c, "PullRequestReviewComment"),
        "databaseId": c["id"],
        "url": c["html_url"],
        "body": c.get("body") or "",
        "path": c["path"],
        "line": c.get("line"),
        "originalLine": c.get("original_line"),
        "startLine": c.get("start_line"),
        "diffHunk": c.get("diff_hunk") or "",
        "author": actor(c.get("user")),
        "authorAssociation": c.get("author_association") or "NONE",
        "createdAt": iso(c["created_at"]),
        "updatedAt": iso(c.get("updated_at") or c["created_at"]),
        "commit": oid(c.get("commit_id")),
        "originalCommit": oid(c.get("original_commit_id")),
        "replyTo": {"databaseId": reply_to} if reply_to else None,
        "pullRequestReview": {"databaseId": review} if review else None,
    }


def review_threads(comments: list[dict]) -> list[dict]:
    """Group one pull request's review comments into threads.

    A reply's `in_reply_to_id` names the thread's first comment, which may not
    have been recorded; the thread is then the replies that were. Thread ids
    are synthetic: base64("PRRT:<id of the first comment>").
    """
    threads: dict[int, list[dict]] = {}
    for c in comments:
        threads.setdefault(c.get("in_reply_to_id") or c["id"], []).append(c)
    nodes = []
    for root, members in threads.items():
        members.sort(key=lambda c: (iso(c["created_at"]), c["id"]))
        newest = max(members, key=lambda c: (iso(c.get("updated_at") or c["created_at"]), c["id"]))
        nodes.append(
            {
                "id": base64.b64encode(f"PRRT:{root}".encode()).decode(),
                "path": members[0]["path"],
                "isResolved": False,
                # The REST API drops `position` once the diff moved on.
                "isOutdated": newest.get("position") is None,
                "resolvedBy": None,
                "comments": connection([review_comment_node(c) for c in members]),
            }
        )
    nodes.sort(key=lambda t: (t["comments"]["nodes"][0]["createdAt"], t["id"]))
    return nodes


def review_node(r: dict) -> dict:
    submitted = iso(r["submitted_at"])
    return {
        "id": own_id(r, "PullRequestReview"),
        "databaseId": r["id"],
        "url": r["html_url"],
        "body": r.get("body") or "",
        "state": r["state"].upper(),
        "author": actor(r.get("user")),
        "authorAssociation": r.get("author_association") or "NONE",
        "submittedAt": submitted,
        "createdAt": submitted,  # the REST API has no separate creation time
        "updatedAt": submitted,
        "commit": oid(r.get("commit_id")),
    }


def timeline_node(e: dict) -> dict | None:
    """An issue event as a timelineItems node, or None if ghindex does not ask for it."""
    created = iso(e["created_at"])
    commit_repository = commit_repo(e.get("commit_url"))
    if e["event"] == "referenced":
        if not (e.get("commit_id") and commit_repository):
            return None  # commitRepository is non-null in the schema
        return {
            "__typename": "ReferencedEvent",
            "createdAt": created,
            "commit": {"oid": e["commit_id"]},
            "commitRepository": {"nameWithOwner": commit_repository},
        }
    if e["event"] == "closed":
        closer = None
        if e.get("commit_id") and commit_repository:
            closer = {
                "__typename": "Commit",
                "oid": e["commit_id"],
                "repository": {"nameWithOwner": commit_repository},
            }
        return {"__typename": "ClosedEvent", "createdAt": created, "closer": closer}
    # cross-referenced, connected, marked_as_duplicate...: none recorded, and
    # the REST issue-events API does not carry their source.
    return None


def release_node(r: dict, latest: bool) -> dict:
    target = r.get("target_commitish") or ""
    return {
        "id": own_id(r, "Release"),
        "databaseId": r["id"],
        "tagName": r["tag_name"],
        "name": r.get("name"),
        "description": r.get("body"),
        "url": r["html_url"],
        "isDraft": bool(r.get("draft")),
        "isPrerelease": bool(r.get("prerelease")),
        "isLatest": latest,
        "author": {"login": r["author"]["login"]} if r.get("author") else None,
        "tagCommit": {"oid": target} if SHA.match(target) else None,
        "createdAt": iso(r["created_at"]),
        "publishedAt": iso(r.get("published_at")),
        "updatedAt": iso(r.get("published_at") or r["created_at"]),
    }


# --------------------------------------------------------------------------
# Collecting


class Recorded:
    """Every REST object of interest in the cassettes, by identity."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, int], list[dict]] = {}  # (repo, number) -> facts
        self.repos: dict[str, list[dict]] = {}
        # REST id -> views, for objects recorded in several responses
        self.comments: dict[int, list[dict]] = {}
        self.review_comments: dict[int, list[dict]] = {}
        self.reviews: dict[int, list[dict]] = {}
        self.releases: dict[int, list[dict]] = {}
        self.events: dict[int, tuple[tuple[str, int], dict]] = {}
        self.commits: dict[tuple[str, int], list[str]] = {}
        self.latest_release: dict[str, set[int]] = {}
        self.deleted: set[str] = set()  # API addresses a recorded DELETE removed

    def add_response(self, method: str, uri: str, status: int, data: Any) -> None:
        if method == "DELETE" and 200 <= status < 300:
            self.deleted.add(uri.split("?", 1)[0])
        if method != "GET" and not 200 <= status < 300:
            return
        events_of = ITEM_EVENTS_URI.match(uri)
        if (m := PULL_COMMITS_URI.match(uri)) and isinstance(data, list):
            key = (m.group(1).lower(), int(m.group(2)))
            shas = [c["sha"] for c in data if isinstance(c, dict) and c.get("sha")]
            self.commits[key] = list(dict.fromkeys(self.commits.get(key, []) + shas))
        if (m := LATEST_RELEASE_URI.match(uri)) and isinstance(data, dict) and "id" in data:
            self.latest_release.setdefault(m.group(1).lower(), set()).add(data["id"])
        for obj in walk(data):
            self.add_object(obj, events_of)

    def add_object(self, obj: dict, events_of: re.Match | None) -> None:
        html_url = obj.get("html_url") if isinstance(obj.get("html_url"), str) else ""
        if is_item(obj):
            f = facts(obj)
            self.items.setdefault((f["repo"].lower(), f["number"]), []).append(f)
        elif is_full_repo(obj) and "created_at" in obj:
            self.repos.setdefault(obj["full_name"].lower(), []).append(obj)
        elif "#issuecomment-" in html_url and "issue_url" in obj:
            self.comments.setdefault(obj["id"], []).append(obj)
        elif "#discussion_r" in html_url and "diff_hunk" in obj:
            self.review_comments.setdefault(obj["id"], []).append(obj)
        elif "#pullrequestreview-" in html_url and "state" in obj:
            if obj.get("submitted_at"):  # pending reviews are visible to their author only
                self.reviews.setdefault(obj["id"], []).append(obj)
        elif "tag_name" in obj and "/releases/" in html_url:
            self.releases.setdefault(obj["id"], []).append(obj)
        elif isinstance(obj.get("event"), str) and "created_at" in obj and "id" in obj:
            if isinstance(obj.get("issue"), dict):  # /repos/{repo}/issues/events
                m = ITEM_URL.match(obj["issue"].get("html_url") or "")
                key = (f"{m.group(1)}/{m.group(2)}".lower(), int(m.group(4))) if m else None
            elif events_of:  # /repos/{repo}/issues/{number}/events
                key = (events_of.group(1).lower(), int(events_of.group(2)))
            else:
                key = None
            if key:
                self.events[obj["id"]] = (key, obj)

    def live(self, views: dict[int, list[dict]]) -> dict[int, dict]:
        """Each object's merged view, minus those a recorded DELETE removed."""
        merged = {k: fold(v) for k, v in views.items()}
        return {k: v for k, v in merged.items() if v.get("url") not in self.deleted}


def related_objects(rec: Recorded, stats: Counter[str]) -> dict[tuple[str, int], dict]:
    """Per (repo, number): its comments, reviews, review threads, commits and events."""
    related: dict[tuple[str, int], dict[str, Any]] = {}

    def slot(key: tuple[str, int] | None, name: str) -> list | None:
        if key is None or key not in rec.items:
            stats[f"{name} without a recorded issue or pull request"] += 1
            return None
        return related.setdefault(key, {}).setdefault(name, [])

    for label, views in (
        ("issue comments", rec.comments),
        ("review comments", rec.review_comments),
        ("reviews", rec.reviews),
        ("releases", rec.releases),
    ):
        stats[f"recorded {label}"] = len(views)
        stats[f"recorded {label} deleted by a later request, dropped"] = len(views) - len(
            rec.live(views)
        )
    stats["recorded issue events"] = len(rec.events)
    for c in rec.live(rec.comments).values():
        if (nodes := slot(api_item(c.get("issue_url")), "comments")) is not None:
            nodes.append(comment_node(c))
    raw_review_comments: dict[tuple[str, int], list[dict]] = {}
    for c in rec.live(rec.review_comments).values():
        key = api_item(c.get("pull_request_url"))
        if key in rec.items:
            raw_review_comments.setdefault(key, []).append(c)
        else:
            stats["review comments without a recorded issue or pull request"] += 1
    for r in rec.live(rec.reviews).values():
        if (nodes := slot(api_item(r.get("pull_request_url")), "reviews")) is not None:
            nodes.append(review_node(r))
    for key, e in sorted(rec.events.values(), key=lambda ke: ke[1]["id"]):
        if e["event"] == "merged" and e.get("commit_id") and key in rec.items:
            related.setdefault(key, {})["merged_event"] = (iso(e["created_at"]), e["commit_id"])
        node = timeline_node(e)
        if node is not None and (nodes := slot(key, "timeline")) is not None:
            nodes.append(node)
    for key, shas in rec.commits.items():
        if (nodes := slot(key, "commits")) is not None:
            nodes.extend({"commit": {"oid": sha}} for sha in shas)
    for key, comments in raw_review_comments.items():
        related.setdefault(key, {})["threads"] = review_threads(comments)
    for entry in related.values():
        entry.get("comments", []).sort(key=lambda n: (n["createdAt"], n["databaseId"]))
        entry.get("reviews", []).sort(key=lambda n: (n["submittedAt"], n["databaseId"]))
        entry.get("timeline", []).sort(key=lambda n: n["createdAt"])  # stable: by event id
    return related


def convert(sdist: Path, min_items: int) -> tuple[list[dict], Counter[str]]:
    rec = Recorded()
    for _name, cassette in iter_cassettes(sdist):
        for interaction in cassette.get("http_interactions", []):
            request = interaction.get("request", {})
            status = interaction.get("response", {}).get("status", {}).get("code") or 0
            method, uri = request.get("method", "GET"), request.get("uri", "")
            rec.add_response(method, uri, status, response_json(interaction))

    stats: Counter[str] = Counter()
    related = related_objects(rec, stats)

    by_repo: dict[str, dict[str, Any]] = {}
    for key, item_views in rec.items.items():
        m = merge(item_views)
        entry = by_repo.setdefault(key[0], {"name": m["repo"], "issues": [], "pulls": []})
        if m["is_pr"]:
            entry["pulls"].append(pull_node(m, related.get(key, {})))
        else:
            issue_related = related.get(key, {})
            for name in ("reviews", "threads", "commits"):
                if issue_related.get(name):
                    stats[f"{name} on an issue, dropped"] += len(issue_related[name])
            entry["issues"].append(issue_node(m, issue_related))

    releases: dict[str, list[dict]] = {}
    for r in rec.live(rec.releases).values():
        repo_key = API_REPO_URL.match(r["url"]).group(1).lower()
        latest = r["id"] in rec.latest_release.get(repo_key, set())
        releases.setdefault(repo_key, []).append(release_node(r, latest))

    keep = {k.lower() for k in ALWAYS_KEEP}
    rows = []
    for repo_key, entry in by_repo.items():
        count = len(entry["issues"]) + len(entry["pulls"])
        if count < min_items and repo_key not in keep:
            stats["repositories under --min-items, dropped"] += 1
            continue
        issues = sorted(entry["issues"], key=lambda n: n["number"])
        pulls = sorted(entry["pulls"], key=lambda n: n["number"])
        repo = repository_node(entry["name"], rec.repos.get(repo_key, []), issues + pulls)
        rows.append(
            {
                "repository": repo,
                "issues": issues,
                "pullRequests": pulls,
                "discussions": [],  # github3.py's recordings predate GitHub Discussions
                "releases": sorted(
                    releases.pop(repo_key, []), key=lambda n: (n["createdAt"], n["databaseId"])
                ),
            }
        )
    stats["releases of a repository not kept, dropped"] += sum(map(len, releases.values()))
    missing = keep - {r["repository"]["nameWithOwner"].lower() for r in rows}
    if missing:
        raise SystemExit(f"expected repositories missing from the cassettes: {sorted(missing)}")
    rows.sort(key=lambda r: (r["repository"]["nameWithOwner"].lower(), r["repository"]["url"]))
    counter = [0]
    rows = [redact(r, counter) for r in rows]
    stats["redacted credential-like strings"] += counter[0]
    return rows, stats


def redact(value: Any, counter: list[int]) -> Any:
    if isinstance(value, str):
        for pattern in SECRET_PATTERNS:
            value, n = pattern.subn("[REDACTED]", value)
            counter[0] += n
        return value
    if isinstance(value, dict):
        return {k: redact(v, counter) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, counter) for v in value]
    return value


# --------------------------------------------------------------------------
# Checking the output against the query documents

# Where each key of a line comes from: query document and field path to the
# value (the repository object, or the `nodes` list of a top-level connection).
RECORD_SOURCES = {
    "repository": ("repository", ("repository",)),
    "issues": ("issues", ("repository", "issues", "nodes")),
    "pullRequests": ("pull_requests", ("repository", "pullRequests", "nodes")),
    "discussions": ("discussions", ("repository", "discussions", "nodes")),
    "releases": ("releases", ("repository", "releases", "nodes")),
}


class ShapeChecker:
    """Checks values against the selections of ghindex's assembled query documents.

    Every object must have exactly the fields its selection asks for, fragment
    spreads and inline fragments included where their type condition applies
    (abstract values say which type they are with `__typename`), and every
    value must fit its schema type: no null in a non-null field, enum values
    from the enum, and so on.
    """

    def __init__(self, schema: Any, load_query: Any) -> None:
        import graphql

        self.g = graphql
        self.schema = schema
        self.targets = {
            key: self._target(load_query(name), path)
            for key, (name, path) in RECORD_SOURCES.items()
        }

    @classmethod
    def load(cls) -> ShapeChecker | None:
        """A checker, or None (with a warning) without graphql-core, ghindex or the schema."""
        try:
            import graphql
        except ImportError:
            return _skip("graphql-core is not installed")
        try:
            from ghindex.github.graphql import load_query
        except ImportError:
            sys.path.insert(0, str(REPO_ROOT / "src"))
            try:
                from ghindex.github.graphql import load_query
            except ImportError as error:
                return _skip(f"ghindex cannot be imported ({error})")
        if not SCHEMA_PATH.is_file():
            return _skip(f"{SCHEMA_PATH} not found")
        sdl = SCHEMA_PATH.read_text(encoding="utf-8")
        schema = graphql.build_schema(sdl, assume_valid_sdl=True, assume_valid=True)
        return cls(schema, load_query)

    def check_record(self, record: dict, where: str) -> list[str]:
        """Every way `record` (one line of the sample) differs from the queries' shape."""
        problems: list[str] = []
        if set(record) != set(self.targets):
            problems.append(f"{where}: keys {sorted(record)}, expected {sorted(self.targets)}")
        for key, (type_, selections, fragments) in self.targets.items():
            if key in record:
                self.check(record[key], type_, selections, fragments, f"{where}.{key}", problems)
        return problems

    def _target(self, document: Any, path: tuple[str, ...]) -> tuple[Any, list, dict]:
        g = self.g
        fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, g.FragmentDefinitionNode)
        }
        operation = next(
            d for d in document.definitions if isinstance(d, g.OperationDefinitionNode)
        )
        parent: Any = self.schema.query_type
        selections = [operation.selection_set]
        type_: Any = parent
        for name in path:
            nodes = self._collect(parent, selections, fragments)[name]
            type_ = parent.fields[name].type
            selections = [n.selection_set for n in nodes if n.selection_set]
            parent = g.get_named_type(type_)
        return type_, selections, fragments

    def _applies(self, condition: str, runtime: Any) -> bool:
        t = self.schema.type_map[condition]
        return t is runtime or (self.g.is_abstract_type(t) and self.schema.is_sub_type(t, runtime))

    def _collect(self, runtime: Any, selection_sets: list, fragments: dict) -> dict[str, list]:
        """Response key -> field nodes, as GraphQL execution collects them for `runtime`."""
        g = self.g
        fields: dict[str, list] = {}
        pending = list(selection_sets)
        while pending:
            for sel in pending.pop(0).selections:
                if isinstance(sel, g.FieldNode):
                    key = sel.alias.value if sel.alias else sel.name.value
                    fields.setdefault(key, []).append(sel)
                elif isinstance(sel, g.InlineFragmentNode):
                    cond = sel.type_condition
                    if cond is None or self._applies(cond.name.value, runtime):
                        pending.append(sel.selection_set)
                elif isinstance(sel, g.FragmentSpreadNode):
                    fragment = fragments[sel.name.value]
                    if self._applies(fragment.type_condition.name.value, runtime):
                        pending.append(fragment.selection_set)
        return fields

    def check(
        self, value: Any, type_: Any, selections: list, fragments: dict, where: str, out: list
    ) -> None:
        g = self.g
        if value is None:
            if g.is_non_null_type(type_):
                out.append(f"{where}: null for non-null {type_}")
            return
        type_ = g.get_nullable_type(type_)
        if g.is_list_type(type_):
            if not isinstance(value, list):
                out.append(f"{where}: expected a list, got {type(value).__name__}")
                return
            for i, element in enumerate(value):
                self.check(element, type_.of_type, selections, fragments, f"{where}[{i}]", out)
            return
        if g.is_leaf_type(type_):
            if not _leaf_fits(g, type_, value):
                out.append(f"{where}: {value!r} is not a {type_.name}")
            return
        if not isinstance(value, dict):
            out.append(f"{where}: expected an object, got {type(value).__name__}")
            return
        runtime = type_
        if g.is_abstract_type(type_):
            runtime = self.schema.type_map.get(value.get("__typename") or "")
            if not (
                isinstance(runtime, g.GraphQLObjectType) and self.schema.is_sub_type(type_, runtime)
            ):
                out.append(f"{where}: __typename {value.get('__typename')!r} is not a {type_}")
                return
        fields = self._collect(runtime, selections, fragments)
        if set(value) != set(fields):
            missing = sorted(set(fields) - set(value))
            extra = sorted(set(value) - set(fields))
            out.append(f"{where}: missing {missing}, unexpected {extra}")
        for key, nodes in fields.items():
            if key not in value:
                continue
            name = nodes[0].name.value
            if name == "__typename":
                if value[key] != runtime.name:
                    out.append(f"{where}.__typename: {value[key]!r}, expected {runtime.name!r}")
                continue
            sub = [n.selection_set for n in nodes if n.selection_set]
            field_type = runtime.fields[name].type
            self.check(value[key], field_type, sub, fragments, f"{where}.{key}", out)


def _leaf_fits(g: Any, type_: Any, value: Any) -> bool:
    if g.is_enum_type(type_):
        return value in type_.values
    if type_.name == "Boolean":
        return isinstance(value, bool)
    if type_.name == "Int":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_.name == "Float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str)  # String, ID and GitHub's string-encoded scalars


def _skip(reason: str) -> None:
    print(f"warning: {reason}; shape check skipped", file=sys.stderr)
    return None


def self_check(rows: list[dict]) -> None:
    checker = ShapeChecker.load()
    if checker is None:
        return
    problems = []
    for row in rows:
        problems += checker.check_record(row, row["repository"]["nameWithOwner"])
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise SystemExit(f"the output does not match the query documents:\n  {shown}{more}")
    print("shape check: every node has exactly the selected fields", file=sys.stderr)


# --------------------------------------------------------------------------


def summary(row: dict) -> dict[str, int]:
    items = row["issues"] + row["pullRequests"]
    threads = [t for p in row["pullRequests"] for t in p["reviewThreads"]["nodes"]]
    return {
        "issues": len(row["issues"]),
        "pullRequests": len(row["pullRequests"]),
        "comments": sum(i["comments"]["totalCount"] for i in items),
        "reviewComments": sum(t["comments"]["totalCount"] for t in threads),
        "reviewThreads": len(threads),
        "reviews": sum(p["reviews"]["totalCount"] for p in row["pullRequests"]),
        "commits": sum(p["commits"]["totalCount"] for p in row["pullRequests"]),
        "timelineItems": sum(i["timelineItems"]["totalCount"] for i in items),
        "releases": len(row["releases"]),
        "discussions": len(row["discussions"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sdist",
        type=Path,
        required=True,
        help="github3.py 4.0.1 sdist: the .tar.gz or its extracted directory",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"output JSONL (default: <repo root>/{DEFAULT_OUT})",
    )
    parser.add_argument(
        "--min-items",
        type=int,
        default=3,
        help="drop repositories with fewer issues + pull requests (default: 3)",
    )
    parser.add_argument(
        "--no-check",
        action="store_true",
        help="skip checking the output against the query documents",
    )
    args = parser.parse_args(argv)
    out = args.out or REPO_ROOT / DEFAULT_OUT

    rows, stats = convert(args.sdist, args.min_items)
    if not args.no_check:
        self_check(rows)

    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")

    totals: Counter[str] = Counter()
    for row in rows:
        counts = summary(row)
        totals.update(counts)
        text = " ".join(f"{k}={v}" for k, v in counts.items())
        print(f"{row['repository']['nameWithOwner']:32} {text}", file=sys.stderr)
    print(f"{'total':32} " + " ".join(f"{k}={v}" for k, v in totals.items()), file=sys.stderr)
    for reason, n in sorted(stats.items()):
        print(f"{reason}: {n}", file=sys.stderr)
    print(f"wrote {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
