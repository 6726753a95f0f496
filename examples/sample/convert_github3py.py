#!/usr/bin/env python3
"""Build ghindex's bundled sample data from github3.py's recorded API responses.

The github3.py test suite ships betamax "cassettes": real GitHub REST API
responses recorded while its integration tests ran. This script pulls every
issue and pull request payload out of them, merges the several views of each
item, and rewrites them in the shape ghindex's GraphQL queries
(src/ghindex/fetch/queries/*.graphql) return, so the sample can be loaded by
the same code that loads live fetches.

Get the input (BSD-3-Clause, see src/ghindex/sample/NOTICE):

    pip download --no-deps --no-binary :all: github3.py==4.0.1

then, from the repository root:

    python examples/sample/convert_github3py.py --sdist github3.py-4.0.1.tar.gz

``--sdist`` also accepts the extracted directory. The output is
deterministic: the same sdist always gives a byte-identical file.

Output: one JSON object per line, one line per repository, repositories
sorted by name:

    {"repository": {...}, "issues": [...], "pullRequests": [...]}

Only the standard library is used.
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
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = Path("src/ghindex/sample/github3py.jsonl")
QUERIES_DIR = REPO_ROOT / "src" / "ghindex" / "fetch" / "queries"

# Repositories kept even if they fall under --min-items.
ALWAYS_KEEP = ("betamaxpy/betamax", "sigmavirus24/github3.py", "requests/requests")

ITEM_URL = re.compile(r"^https://github\.com/([^/]+)/([^/]+)/(issues|pull)/(\d+)$")

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


# --------------------------------------------------------------------------
# Collecting and merging views

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
    if "comments" in obj:
        f["comments"] = obj["comments"]
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


def issue_node(m: dict) -> dict:
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
        "comments": {"totalCount": m.get("comments") or 0},
        "reactions": {"totalCount": m.get("reactions") or 0},
    }


def pull_node(m: dict) -> dict:
    node = issue_node(m)
    del node["stateReason"]
    if "id_PullRequest" in m:
        node["id"] = m["id_PullRequest"]
    else:  # only issue-endpoint views were recorded: derive one from the issue id
        node["id"] = legacy_id("PullRequest", m["rest_id_Issue"])
    merged_at = iso(m.get("merged_at"))
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
        "createdAt": min(i["createdAt"] for i in items),
        "updatedAt": max(i["updatedAt"] for i in items),
        "pushedAt": None,
        "defaultBranchRef": None,
    }


# --------------------------------------------------------------------------
# Self-check against the GraphQL documents


def selection(path: Path, *field_path: str) -> dict:
    """The selection set at field_path in a GraphQL document, as nested dicts.

    A deliberately small parser: enough for the fields, arguments and nested
    selections our query documents use (no fragments, no aliases).
    """
    text = re.sub(r"#[^\n]*", "", path.read_text())
    tokens = re.findall(r"[A-Za-z_]\w*|[{}()]", text)
    pos = 0

    def skip_args() -> None:
        nonlocal pos
        depth = 0
        while True:
            tok = tokens[pos]
            pos += 1
            depth += tok == "("
            depth -= tok == ")"
            if depth == 0:
                return

    def block() -> dict:
        nonlocal pos
        fields: dict[str, Any] = {}
        pos += 1  # "{"
        while tokens[pos] != "}":
            name = tokens[pos]
            pos += 1
            if tokens[pos] == "(":
                skip_args()
            fields[name] = block() if tokens[pos] == "{" else None
        pos += 1
        return fields

    while tokens[pos] != "{":
        if tokens[pos] == "(":
            skip_args()
        else:
            pos += 1
    tree = block()
    for name in field_path:
        tree = tree[name]
    return tree


def check_shape(value: Any, sel: dict, where: str) -> None:
    if not isinstance(value, dict) or set(value) != set(sel):
        got = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise SystemExit(f"shape mismatch at {where}: expected {sorted(sel)}, got {got}")
    for key, sub in sel.items():
        if sub is None or value[key] is None:
            continue
        if key == "nodes":
            for i, element in enumerate(value[key]):
                check_shape(element, sub, f"{where}.nodes[{i}]")
        else:
            check_shape(value[key], sub, f"{where}.{key}")


def self_check(rows: list[dict]) -> None:
    if not QUERIES_DIR.is_dir():
        print(f"warning: {QUERIES_DIR} not found; shape check skipped", file=sys.stderr)
        return
    repo_sel = selection(QUERIES_DIR / "repository.graphql", "repository")
    issue_sel = selection(QUERIES_DIR / "issues.graphql", "repository", "issues", "nodes")
    pr_sel = selection(QUERIES_DIR / "pull_requests.graphql", "repository", "pullRequests", "nodes")
    for row in rows:
        name = row["repository"]["nameWithOwner"]
        check_shape(row["repository"], repo_sel, name)
        for node in row["issues"]:
            check_shape(node, issue_sel, f"{name}#{node['number']}")
        for node in row["pullRequests"]:
            check_shape(node, pr_sel, f"{name}!{node['number']}")


# --------------------------------------------------------------------------


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


def convert(sdist: Path, min_items: int) -> tuple[list[dict], int]:
    views: dict[tuple[str, int], list[dict]] = {}
    repo_payloads: dict[str, list[dict]] = {}
    for _name, cassette in iter_cassettes(sdist):
        for interaction in cassette.get("http_interactions", []):
            for obj in walk(response_json(interaction)):
                if is_item(obj):
                    f = facts(obj)
                    views.setdefault((f["repo"].lower(), f["number"]), []).append(f)
                elif is_full_repo(obj) and "created_at" in obj:
                    repo_payloads.setdefault(obj["full_name"].lower(), []).append(obj)

    by_repo: dict[str, dict[str, Any]] = {}
    for (repo_key, _number), item_views in views.items():
        m = merge(item_views)
        entry = by_repo.setdefault(repo_key, {"name": m["repo"], "issues": [], "pulls": []})
        if m["is_pr"]:
            entry["pulls"].append(pull_node(m))
        else:
            entry["issues"].append(issue_node(m))

    keep = {k.lower() for k in ALWAYS_KEEP}
    rows = []
    for repo_key, entry in by_repo.items():
        count = len(entry["issues"]) + len(entry["pulls"])
        if count < min_items and repo_key not in keep:
            continue
        issues = sorted(entry["issues"], key=lambda n: n["number"])
        pulls = sorted(entry["pulls"], key=lambda n: n["number"])
        repo = repository_node(entry["name"], repo_payloads.get(repo_key, []), issues + pulls)
        rows.append({"repository": repo, "issues": issues, "pullRequests": pulls})
    missing = keep - {r["repository"]["nameWithOwner"].lower() for r in rows}
    if missing:
        raise SystemExit(f"expected repositories missing from the cassettes: {sorted(missing)}")
    rows.sort(key=lambda r: (r["repository"]["nameWithOwner"].lower(), r["repository"]["url"]))
    counter = [0]
    rows = [redact(r, counter) for r in rows]
    return rows, counter[0]


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
    args = parser.parse_args(argv)
    out = args.out or REPO_ROOT / DEFAULT_OUT

    rows, redactions = convert(args.sdist, args.min_items)
    self_check(rows)

    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")

    for row in rows:
        print(
            f"{row['repository']['nameWithOwner']:32} "
            f"issues={len(row['issues']):4} pullRequests={len(row['pullRequests']):4}",
            file=sys.stderr,
        )
    print(f"redacted credential-like strings: {redactions}", file=sys.stderr)
    print(f"wrote {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
