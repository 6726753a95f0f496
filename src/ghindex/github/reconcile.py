"""Stored items checked against GitHub by node id: items an earlier page could not give,
read again, and, after a `--full` run's complete listings, the stored items they lack,
confirmed gone or moved and removed unless the guard against mass removal holds them back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ghindex.errors import GitHubError, RateLimited
from ghindex.github import listings
from ghindex.github.client import GraphQLClient
from ghindex.state import gaps, items
from ghindex.state.database import transaction
from ghindex.state.rows import Node

Say = Callable[[str], None]

# A --full run removes nothing when it would remove more than this share of a
# repository's stored issues, pull requests and discussions, and more than GUARD_MIN
# of them: a token that lost access, or a listing GitHub cut short, must never empty
# the index. `fetch --full --force` removes them.
GUARD_SHARE = 0.10
GUARD_MIN = 10

# How an item read again by id is stored, per surface.
_SAVE = {
    "issues": items.save_issues,
    "pull_requests": items.save_pull_requests,
    "discussions": items.save_discussions,
}


@dataclass
class Outcome:
    """What checking a repository's stored items against GitHub did, for the caller's
    report: items stored per surface, handles removed (deleted or moved), kept (the token
    may not read them, or the guard held them back) and left as gaps with their reasons."""

    stored: dict[str, int] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    transferred: list[str] = field(default_factory=list)
    inaccessible: list[str] = field(default_factory=list)
    held_back: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {surface, handle, reason}


def read_gaps_again(con, client: GraphQLClient, repo: str, say: Say) -> Outcome | None:
    """Items an earlier page (of this run or one before) could not give, read by id;
    None when there were none. The outcome's `skipped` holds every item gap still open,
    so it replaces the item gaps this run's pages met (those with a handle)."""
    rows = gaps.waiting(con, repo)
    if not rows:
        return None
    done = Outcome()
    pending: dict[str, list[str]] = {}
    for surface, node_id, _handle in rows:
        pending.setdefault(surface, []).append(node_id)
    known = {node_id: handle for _surface, node_id, handle in rows}
    say(
        f"{repo}: reading {sum(map(len, pending.values()))} items again that an earlier "
        "page could not give or store"
    )
    try:
        located = listings.items_by_id(client, pending)
    except RateLimited:
        raise
    except GitHubError as exc:
        # The gaps stay for the next run; this one goes on (and removes nothing for them).
        reason = f"could not read them again: {exc}"
        done.skipped += [
            {"surface": surface, "handle": handle, "reason": reason}
            for surface, _node_id, handle in rows
        ]
        return done
    settled = {}
    for name, where in located.items():
        places = {i: _where(n, repo, name) for i, n in where.found.items()}
        here = [where.found[i] for i, place in places.items() if place == "here"]
        # gaps are few, so each is tried alone first: one that cannot be stored stays a
        # gap, with its cause, and never fails the repository
        bad = {n["id"]: cause for n, cause in items.unstorable(con, _SAVE[name], repo, here)}
        unreadable = {
            **where.unreadable,
            **{
                i: "GitHub did not say which repository it is in"
                for i, place in places.items()
                if place == "unknown"
            },
            **bad,
        }
        moved = [i for i, place in places.items() if place == "moved"]
        settled[name] = ([n for n in here if n["id"] not in bad], moved, unreadable)
    with transaction(con):
        for name, (here, moved, unreadable) in settled.items():
            where = located[name]
            done.stored[name] = _SAVE[name](con, repo, here)
            gone = [known[i] for i in [*where.gone, *moved] if known.get(i)]
            items.delete_items(con, name, gone)
            done.deleted += [known[i] for i in where.gone if known.get(i)]
            done.transferred += [known[i] for i in moved if known.get(i)]
            gaps.clear(con, repo, name, [*(n["id"] for n in here), *where.gone, *moved])
            for node_id, reason in unreadable.items():
                gaps.record(con, repo, name, node_id, known.get(node_id), reason)
                done.skipped.append(
                    {"surface": name, "handle": known.get(node_id), "reason": reason}
                )
    return done


def reconcile(
    con, client: GraphQLClient, repo: str, complete: set[str], force: bool, say: Say
) -> Outcome:
    """After the `complete` listings (surfaces listed to their end): confirm each stored
    item they lack with GitHub, then remove it."""
    done = Outcome()
    start = _run_start(con, repo)
    waiting = {node_id for ids in gaps.items(con, repo).values() for node_id in ids}
    candidates = {
        node_id: (table, handle)
        for table in ("issues", "pull_requests", "discussions")
        if table in complete  # an incomplete listing proves nothing
        for handle, node_id in con.execute(
            f"SELECT handle, node_id FROM {table} WHERE repo = ? AND fetched_at < ?",
            [repo, start],
        ).fetchall()
        if node_id and node_id not in waiting
    }
    if not candidates:
        return done
    say(f"{repo}: confirming {len(candidates)} items missing from the listings")
    where = listings.locate(client, list(candidates))
    places = {i: _where(n, repo, candidates[i][0]) for i, n in where.found.items()}
    unknown = {i for i, place in places.items() if place == "unknown"}
    done.inaccessible = sorted(candidates[i][1] for i in [*where.unreadable, *unknown])
    moved = {i for i, place in places.items() if place == "moved"}
    removals = sorted(where.gone | moved, key=lambda i: candidates[i][1])
    if not removals:
        return done
    stored = _stored_items(con, repo)
    if not force and len(removals) > GUARD_MIN and len(removals) > GUARD_SHARE * stored:
        done.held_back = [candidates[i][1] for i in removals]
        say(
            f"{repo}: {len(removals)} of {stored} stored items look deleted or moved; "
            f"nothing was removed (more than {GUARD_SHARE:.0%}): check the token's access, "
            "then run `ghindex fetch --full --force` to remove them"
        )
        return done
    gone: dict[str, list[str]] = {}
    for node_id in removals:
        table, handle = candidates[node_id]
        gone.setdefault(table, []).append(handle)
        (done.transferred if node_id in moved else done.deleted).append(handle)
    with transaction(con):
        for table, handles in gone.items():
            items.delete_items(con, table, handles)
    return done


def _where(node: Node, repo: str, table: str) -> str:
    """Where a found item lives now: "here", "moved" (another repository, or another
    kind of item: an issue converted to a discussion answers as a Discussion), or
    "unknown" (GitHub did not say which repository)."""
    typename = node.get("__typename")
    if typename and typename != listings.TYPENAMES[table]:
        return "moved"
    name = (node.get("repository") or {}).get("nameWithOwner")
    if not isinstance(name, str):
        return "unknown"
    return "here" if name == repo else "moved"


def _stored_items(con, repo: str) -> int:
    return sum(
        con.execute(f"SELECT count(*) FROM {table} WHERE repo = ?", [repo]).fetchone()[0]
        for table in ("issues", "pull_requests", "discussions")
    )


def _run_start(con, repo: str) -> datetime:
    """Rows of this repo fetched before this run's repository row was written."""
    return con.execute("SELECT fetched_at FROM repos WHERE repo = ?", [repo]).fetchall()[0][0]
