"""One item in full, from the state database: `ghindex show` and the MCP `fetch` tool.

An issue comes with its comments in order; a pull request with its comments,
reviews and review threads; a discussion with its comments, replies and answer; a
commit with its message and per-file patches; a doc, a wiki page or a release with
its text. Every piece of text written by a person is returned as data under
`text`, next to who wrote it and their association with the repository, so a
reader can tell a maintainer's words from an anonymous comment.

An answer is at most `max_chars` characters of JSON, headers included: an item's own
text, then its comments, reviews, review threads or files in reading order, each whole,
until the next would not fit (only the first piece read is ever cut inside its text).
What is left out is counted under `omitted`, and `next_skip` says where to go on:
`skip=next_skip` starts the item there (`pieces`), never as empty stubs.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from ghindex.query.handles import UnknownHandle, resolve_handle
from ghindex.vocabulary.times import iso_time

DEFAULT_MAX_CHARS = 20_000


def show(
    con: duckdb.DuckDBPyConnection,
    handle: str,
    max_chars: int = DEFAULT_MAX_CHARS,
    skip: int = 0,
) -> dict:
    """The item `handle` names (a comment or review names its item), from piece `skip`
    (0: its own text; 1: its first comment, review, thread or file) on."""
    resolved = resolve_handle(con, handle)
    for loader in (_thread, _discussion, _release, _doc, _commit):
        item = loader(con, resolved)
        if item is not None:
            break
    else:  # resolve_handle found it in a table no loader reads
        raise UnknownHandle(f"no item {handle!r} in the snapshot")
    if resolved != handle.strip():
        item["requested"] = handle
    return _budget(item, max_chars, skip)


def _rows(con, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _one(con, sql: str, params: list[Any]) -> dict[str, Any] | None:
    found = _rows(con, sql, params)
    return found[0] if found else None


def _post(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A piece of text and who wrote it."""
    post = {
        "handle": row["handle"],
        "author": row.get("author"),
        "author_association": row.get("author_association"),
        "created_at": iso_time(row.get("created_at")),
        "url": row.get("url"),
    }
    post.update(extra)
    post["text"] = row.get("body") or ""
    return post


def _thread(con, handle: str) -> dict[str, Any] | None:
    kind, row = "issue", _one(con, "SELECT * FROM issues WHERE handle = ?", [handle])
    if row is None:
        kind, row = (
            "pull_request",
            _one(con, "SELECT * FROM pull_requests WHERE handle = ?", [handle]),
        )
    if row is None:
        return None
    item = _header(con, row, kind)
    item["comments"] = [
        _post(c)
        for c in _rows(
            con,
            "SELECT * FROM comments WHERE parent_handle = ? ORDER BY created_at, handle",
            [handle],
        )
    ]
    if kind == "pull_request":
        item.update(
            merged=row.get("merged"),
            merged_at=iso_time(row.get("merged_at")),
            draft=row.get("is_draft"),
            base=row.get("base_ref"),
            head=row.get("head_ref"),
        )
        item["reviews"] = [
            _post(r, state=r["state"])
            for r in _rows(
                con,
                "SELECT * FROM reviews WHERE parent_handle = ? ORDER BY created_at, handle",
                [handle],
            )
        ]
        item["review_threads"] = _threads(con, handle)
    links = _links(con, handle)
    item.update(links)
    return item


def _threads(con, handle: str) -> list[dict[str, Any]]:
    threads: dict[str, dict[str, Any]] = {}
    for c in _rows(
        con,
        "SELECT * FROM review_comments WHERE parent_handle = ? ORDER BY created_at, handle",
        [handle],
    ):
        key = c.get("thread_id") or c["handle"]
        thread = threads.setdefault(
            key,
            {
                "path": c.get("path"),
                "line": c.get("line") or c.get("original_line"),
                "resolved": c.get("is_resolved"),
                "outdated": c.get("is_outdated"),
                "diff_hunk": c.get("diff_hunk"),
                "comments": [],
            },
        )
        thread["comments"].append(_post(c, reply_to=c.get("reply_to")))
    return list(threads.values())


def _discussion(con, handle: str) -> dict[str, Any] | None:
    row = _one(con, "SELECT * FROM discussions WHERE handle = ?", [handle])
    if row is None:
        return None
    item = _header(con, row, "discussion")
    item.update(category=row.get("category"), answer=row.get("answer_handle"))
    item["comments"] = [
        _post(c, reply_to=c.get("reply_to"), is_answer=c.get("is_answer"))
        for c in _rows(
            con,
            "SELECT * FROM comments WHERE parent_handle = ? ORDER BY created_at, handle",
            [handle],
        )
    ]
    item.update(_links(con, handle))
    return item


def _release(con, handle: str) -> dict[str, Any] | None:
    row = _one(con, "SELECT * FROM releases WHERE handle = ?", [handle])
    if row is None:
        return None
    return {
        "handle": handle,
        "type": "release",
        "repo": row["repo"],
        "title": row.get("name") or row["tag"],
        "tag": row["tag"],
        "url": row.get("url"),
        "author": row.get("author"),
        "published_at": iso_time(row.get("published_at")),
        "prerelease": row.get("is_prerelease"),
        "text": row.get("body") or "",
    }


def _doc(con, handle: str) -> dict[str, Any] | None:
    row = _one(con, "SELECT * FROM docs WHERE handle = ?", [handle])
    if row is None:
        return None
    return {
        "handle": handle,
        "type": "wiki_doc" if row["kind"] == "wiki" else "doc",
        "repo": row["repo"],
        "title": row.get("title"),
        "path": row.get("path"),
        "url": row.get("url"),
        "commit": row.get("commit_sha"),
        "last_changed_at": iso_time(row.get("last_changed_at")),
        "text": row.get("body") or "",
    }


def _commit(con, handle: str) -> dict[str, Any] | None:
    row = _one(con, "SELECT * FROM commits WHERE handle = ?", [handle])
    if row is None:
        return None
    files = _rows(con, "SELECT * FROM commit_files WHERE commit_handle = ? ORDER BY path", [handle])
    return {
        "handle": handle,
        "type": "commit",
        "repo": row["repo"],
        "title": row.get("subject"),
        "sha": row["sha"],
        "url": row.get("url"),
        "author": row.get("author_login") or row.get("author_name"),
        "authored_at": iso_time(row.get("authored_at")),
        "text": row.get("message") or "",
        "files": [
            {
                "handle": f["handle"],
                "path": f["path"],
                "old_path": f.get("old_path"),
                "status": f["status"],
                "additions": f.get("additions"),
                "deletions": f.get("deletions"),
                "text": f.get("patch") or "",
            }
            for f in files
        ],
        **_links(con, handle),
    }


def _header(con, row: dict[str, Any], kind: str) -> dict[str, Any]:
    labels = [
        r["label"]
        for r in _rows(
            con, "SELECT label FROM issue_labels WHERE handle = ? ORDER BY 1", [row["handle"]]
        )
    ]
    assignees = [
        r["login"]
        for r in _rows(
            con, "SELECT login FROM assignees WHERE handle = ? ORDER BY 1", [row["handle"]]
        )
    ]
    return {
        "handle": row["handle"],
        "type": kind,
        "repo": row["repo"],
        "number": row["number"],
        "title": row["title"],
        "state": (row.get("state") or "").lower() or None,
        "state_reason": row.get("state_reason"),
        "url": row["url"],
        "labels": labels,
        "assignees": assignees,
        "milestone": row.get("milestone"),
        "author": row.get("author"),
        "author_association": row.get("author_association"),
        "created_at": iso_time(row.get("created_at")),
        "updated_at": iso_time(row.get("updated_at")),
        "closed_at": iso_time(row.get("closed_at")),
        "text": row.get("body") or "",
    }


def _links(con, handle: str) -> dict[str, list[str]]:
    from ghindex.query.graph import fix_links

    found = fix_links(con, [handle]).get(handle, {})
    return {"fixed_by": list(found.get("fixed_by", [])), "closes": list(found.get("closes", []))}


# An item's lists of pieces, in reading order after its own text.
PIECES = ("comments", "reviews", "review_threads", "files")


def size(value: Any) -> int:
    """Characters of `value` as compact JSON."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def _texts(node: Any) -> int:
    if isinstance(node, dict):
        own = len(node["text"]) if isinstance(node.get("text"), str) else 0
        return own + sum(_texts(v) for k, v in node.items() if k != "text")
    if isinstance(node, list):
        return sum(_texts(v) for v in node)
    return 0


def _budget(item: dict[str, Any], max_chars: int, skip: int = 0) -> dict[str, Any]:
    """`item` within `max_chars` of JSON, from piece `skip` on (see the module's docstring)."""
    total = _texts(item)
    pieces = [(key, piece) for key in PIECES for piece in item.get(key) or []]
    lists = {key: item.pop(key) for key in PIECES if key in item}
    passed = 0  # text characters read in an earlier answer
    if skip > 0:
        passed = len(item.get("text") or "") + sum(_texts(p) for _, p in pieces[: skip - 1])
        item["text"], item["text_skipped"] = "", True
    # what the answer's own fields cost: counts, flags and the position to go on from
    reserve = 160 + sum(len(key) + 8 for key in lists)
    used = size(item) + reserve
    stopped = False
    if used > max_chars and item["text"]:  # the first piece read is cut to fit
        keep = max(len(item["text"]) - (used - max_chars), 0)
        item["text"], item["text_truncated"] = item["text"][:keep], True
        used, stopped = size(item) + reserve, True
    given = bool(item["text"])
    kept: dict[str, list[Any]] = {key: [] for key in lists}
    omitted: dict[str, int] = {}
    next_skip = None
    for index, (key, piece) in enumerate(pieces, start=1):
        if index < skip:
            continue
        cost = size(piece) + 1
        if not stopped and used + cost > max_chars:
            stopped = True
            if not given and isinstance(piece.get("text"), str):  # nothing read yet: cut it
                over = used + cost - max_chars
                piece["text"] = piece["text"][: max(len(piece["text"]) - over, 0)]
                piece["text_truncated"] = True
                kept[key].append(piece)
                continue
        if stopped:
            next_skip = index if next_skip is None else next_skip
            omitted[key] = omitted.get(key, 0) + 1
            continue
        kept[key].append(piece)
        used += cost
        given = True
    item.update(kept)
    item["chars"] = total
    item["returned_chars"] = _texts(item)
    item["truncated"] = item["returned_chars"] + passed < total
    if omitted:
        item["omitted"] = omitted
        item["next_skip"] = next_skip
    return item
