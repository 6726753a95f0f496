"""Walking the reference graph: the neighbours of one item, one or two hops out.

`edges` holds links as they were seen, events included. What holds now is decided
here, inside the one recursive query that walks the graph:

- `connected` holds for a pair (in either direction) unless a `disconnected` of the
  pair is at least as recent; `duplicate_of` holds unless an `unmarked_duplicate_of` of
  the same duplicate and canonical is at least as recent. The undoing events themselves
  are not neighbours (these pairs are `ghindex.vocabulary.edges.UNDOES`). An event
  without a time counts as the earliest.
- Every other kind is a fact as it was last read, and holds.

`include_history=True` walks the raw events instead, undoing ones included.

One neighbour is one (item, kind, direction) relation, with every place the link was
seen in `provenance`: a pull request that closes an issue and mentions it is two
neighbours (`closes` and `mentions`); an issue mentioned in a body and in two comments
is one, with three provenance entries. At hop 2 the relation is the one between the
neighbour and `via`, the hop-1 item it was reached through; a node reached at hop 1 is
not repeated at hop 2, and one reached through several hop-1 items is listed once per
`via`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb

from ghindex.errors import GhindexError
from ghindex.query.handles import resolve_handle
from ghindex.vocabulary.edges import KINDS  # strongest first: neighbours of a hop in this order
from ghindex.vocabulary.handles import SUB_ITEM
from ghindex.vocabulary.limits import is_number
from ghindex.vocabulary.times import iso_time

NearestItems = Callable[[str, int], list[dict[str, Any]]]
"""Hook for the items nearest to a handle in the vector index: (handle, k) -> up to k
items (dicts with at least `handle`), best first. `related` takes one; none exists yet."""


@dataclass(frozen=True)
class Provenance:
    source_handle: str  # the item, comment, review or doc whose data holds the link
    source_field: str  # body | comment | closingIssuesReferences | timeline:<Event> | doc | ...
    created_at: datetime | None  # when the link was made, when GitHub says

    def as_dict(self) -> dict[str, Any]:
        return {
            "source_handle": self.source_handle,
            "source_field": self.source_field,
            "created_at": iso_time(self.created_at),
        }


@dataclass(frozen=True)
class Neighbour:
    handle: str
    kind: str
    direction: str  # out: the link goes from the start (or `via`) to this item; in: the reverse
    hop: int
    via: str | None  # hop 2: the hop-1 item this one was reached through
    type: str | None  # issue | pull_request | discussion | release | doc | wiki_doc | commit
    title: str | None
    state: str | None  # open | closed | merged, for issues, pull requests and discussions
    url: str | None
    provenance: tuple[Provenance, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "handle": self.handle,
            "kind": self.kind,
            "direction": self.direction,
            "hop": self.hop,
            "via": self.via,
            "type": self.type,
            "title": self.title,
            "state": self.state,
            "url": self.url,
            "provenance": [p.as_dict() for p in self.provenance],
        }


@dataclass
class Related:
    handle: str  # as asked
    resolved: str  # the item it names
    neighbours: list[Neighbour]
    nearest: list[dict[str, Any]] | None = field(default=None)  # None: not computed

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "handle": self.handle,
            "resolved": self.resolved,
            "neighbours": [n.as_dict() for n in self.neighbours],
        }
        if self.nearest is not None:
            found["nearest"] = self.nearest
        return found

    def as_text(self) -> str:
        start = (
            self.resolved if self.resolved == self.handle else f"{self.handle} ({self.resolved})"
        )
        if not self.neighbours:
            lines = [f"{start}: no links in the snapshot"]
        else:
            count = len(self.neighbours)
            lines = [f"{start}: {count} link{'' if count == 1 else 's'}"]
            lines += _table(self.neighbours)
        if self.nearest is not None:
            lines.append("nearest items:")
            lines += [f"  {n['handle']}  {n.get('title') or ''}".rstrip() for n in self.nearest]
        return "\n".join(lines)


def related(
    con: duckdb.DuckDBPyConnection,
    handle: str,
    *,
    hops: int = 1,
    kinds: Sequence[str] | None = None,
    include_history: bool = False,
    nearest_items: NearestItems | None = None,
    k_nearest: int = 10,
) -> Related:
    """What `ghindex related` and the MCP `related` tool answer: the item `handle` names,
    its graph neighbours, and (when `nearest_items` is given) its nearest items."""
    resolved = resolve_handle(con, handle)
    found = neighbours(con, resolved, hops=hops, kinds=kinds, include_history=include_history)
    nearest = nearest_items(resolved, k_nearest) if nearest_items else None
    return Related(handle=handle, resolved=resolved, neighbours=found, nearest=nearest)


def neighbours(
    con: duckdb.DuckDBPyConnection,
    handle: str,
    hops: int = 1,
    kinds: Iterable[str] | None = None,
    *,
    include_history: bool = False,
) -> list[Neighbour]:
    """The items linked to `handle`, in both directions, `hops` (1 or 2) links out.

    `handle` is resolved first (a comment starts from its item, a sha prefix from its
    commit). `kinds` keeps only links of those kinds, at every hop. Sorted by hop, then
    via, then kind (strongest first, in the order of KINDS), then handle.
    """
    if hops not in (1, 2):
        raise GhindexError(f"hops must be 1 or 2, not {hops}")
    wanted = _check_kinds(kinds)
    start = resolve_handle(con, handle)
    rows = con.execute(
        _NEIGHBOURS_SQL.format(graph="raw" if include_history else "current"),
        {"start": start, "hops": hops, "kinds": wanted, "sub_item": SUB_ITEM},
    ).fetchall()
    found = [
        Neighbour(
            handle=row[1],
            kind=row[3],
            direction=row[4],
            hop=row[0],
            via=row[2],
            type=row[5],
            title=row[6],
            state=row[7],
            url=row[8],
            provenance=tuple(
                Provenance(p["source_handle"], p["source_field"], p["created_at"]) for p in row[9]
            ),
        )
        for row in rows
    ]
    found.sort(
        key=lambda n: (
            n.hop,
            handle_order(n.via or ""),
            _kind_order(n.kind),
            handle_order(n.handle),
            n.direction,
        )
    )
    return found


def fix_links(
    con: duckdb.DuckDBPyConnection, handles: Iterable[str], *, around: bool = False
) -> dict[str, dict[str, list[str]]]:
    """For each handle: the pull requests and commits that close it (`fixed_by`), and the
    items it closes (`closes`), from every `closes` link (closingIssuesReferences, the
    closer of a ClosedEvent, a cross-reference that will close their target, a closing
    keyword in a pull request's body or a commit message).

    Only pull requests and commits count as closers: a `closes` link from an item the state
    holds as an issue or discussion is ignored. One from an item of a repository that is
    not indexed is kept, since GitHub records only pull requests and commits as closers.
    Every handle asked for is a key, with empty lists when nothing closes it; `around`
    adds the items at the other end of those links as keys too, with all of their own
    links (one query for a search that lifts them into its results).
    """
    asked = list(dict.fromkeys(handles))
    links: dict[str, dict[str, list[str]]] = {h: {"fixed_by": [], "closes": []} for h in asked}
    if not asked:
        return links
    sql = _FIX_LINKS_AROUND_SQL if around else _FIX_LINKS_SQL
    rows = con.execute(sql, {"handles": asked, "sub_item": SUB_ITEM}).fetchall()
    if around:
        for closer, closed in rows:
            for end in (closer, closed):
                links.setdefault(end, {"fixed_by": [], "closes": []})
    for closer, closed in rows:
        if closed in links:
            links[closed]["fixed_by"].append(closer)
        if closer in links:
            links[closer]["closes"].append(closed)
    for entry in links.values():
        for key in entry:
            entry[key] = sorted(set(entry[key]), key=handle_order)
    return links


def merge_commits(con: duckdb.DuckDBPyConnection, handles: Iterable[str]) -> dict[str, list[str]]:
    """The merge commit of each pull request among `handles` that has one (its
    `commit_in_pr` link from the pull request's `mergeCommit`): the same change, as a
    commit."""
    asked = list(dict.fromkeys(handles))
    if not asked:
        return {}
    rows = con.execute(
        "SELECT DISTINCT dst, src FROM edges WHERE kind = 'commit_in_pr' "
        "AND source_field = 'mergeCommit' AND list_contains($handles, dst)",
        {"handles": asked},
    ).fetchall()
    found: dict[str, list[str]] = {}
    for pull, commit in rows:
        found.setdefault(pull, []).append(commit)
    return {pull: sorted(commits) for pull, commits in found.items()}


def handle_order(handle: str) -> tuple:
    """Sorts 'o/r#9' before 'o/r#10'."""
    return tuple(
        (0, int(part), "") if is_number(part) else (1, 0, part)
        for part in _DIGITS.split(handle)
        if part
    )


_DIGITS = re.compile(r"([0-9]+)")


def _kind_order(kind: str) -> tuple[int, str]:
    return (KINDS.index(kind), "") if kind in KINDS else (len(KINDS), kind)


def _check_kinds(kinds: Iterable[str] | None) -> list[str] | None:
    if kinds is None:
        return None
    wanted = list(dict.fromkeys(kinds))
    unknown = [k for k in wanted if k not in KINDS]
    if unknown:
        raise GhindexError(f"unknown link kind {unknown[0]!r}: use one of {', '.join(KINDS)}")
    return wanted or None


def _table(found: list[Neighbour]) -> list[str]:
    """hop, direction, kind, handle, (via,) title: aligned columns, the title last."""
    show_via = any(n.via for n in found)
    header = ["hop", "dir", "kind", "handle", *(["via"] if show_via else []), "title"]
    rows = [header]
    for n in found:
        via = [n.via or ""] if show_via else []
        rows.append([str(n.hop), _ARROWS[n.direction], n.kind, n.handle, *via, n.title or ""])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


_ARROWS = {"out": "->", "in": "<-"}


# Parameters: $start (resolved handle), $hops, $kinds (NULL: every kind), $sub_item
# (the pattern of comment handles, mapped to their item). {graph} is `current` (what
# holds now) or `raw` (every event as recorded).
_NEIGHBOURS_SQL = """
WITH RECURSIVE
raw AS (
    SELECT * FROM (
        SELECT regexp_replace(src, $sub_item, '\\1') AS src,
               regexp_replace(dst, $sub_item, '\\1') AS dst,
               kind, source_handle, source_field, created_at
        FROM edges
    ) WHERE src <> dst
),
events AS (
    SELECT *,
           kind IN ('disconnected', 'unmarked_duplicate_of') AS undoes,
           CASE WHEN kind IN ('connected', 'disconnected') THEN 'connected'
                ELSE 'duplicate_of' END AS fact,
           -- a connection has no direction; a duplicate does
           CASE WHEN kind IN ('connected', 'disconnected') THEN least(src, dst) ELSE src END AS a,
           CASE WHEN kind IN ('connected', 'disconnected') THEN greatest(src, dst) ELSE dst END AS b
    FROM raw
    WHERE kind IN ('connected', 'disconnected', 'duplicate_of', 'unmarked_duplicate_of')
),
last_undone AS (
    SELECT fact, a, b, max(coalesce(created_at, '-infinity'::TIMESTAMPTZ)) AS at
    FROM events WHERE undoes GROUP BY fact, a, b
),
current AS (
    SELECT * FROM raw
    WHERE kind NOT IN ('connected', 'disconnected', 'duplicate_of', 'unmarked_duplicate_of')
    UNION ALL
    SELECT e.src, e.dst, e.kind, e.source_handle, e.source_field, e.created_at
    FROM events e LEFT JOIN last_undone u USING (fact, a, b)
    WHERE NOT e.undoes AND (u.at IS NULL OR e.created_at > u.at)
),
graph AS (
    SELECT * FROM {graph}
    WHERE $kinds::VARCHAR[] IS NULL OR list_contains($kinds::VARCHAR[], kind)
),
adjacent AS (
    SELECT src AS node, dst AS other, kind, 'out' AS direction,
           source_handle, source_field, created_at
    FROM graph
    UNION ALL
    SELECT dst, src, kind, 'in', source_handle, source_field, created_at FROM graph
),
reach(hop, node, via) AS (
    SELECT 0, $start::VARCHAR, NULL::VARCHAR
    UNION
    SELECT r.hop + 1, a.other, CASE WHEN r.hop = 0 THEN NULL ELSE r.node END
    FROM reach r JOIN adjacent a ON a.node = r.node
    WHERE r.hop < $hops
),
found AS (
    SELECT hop, node, via FROM reach
    WHERE hop = 1
       OR (hop = 2 AND node <> $start AND node NOT IN (SELECT node FROM reach WHERE hop = 1))
),
relations AS (
    SELECT f.hop, f.node AS handle, f.via, a.kind, a.direction,
           list({{'source_handle': a.source_handle, 'source_field': a.source_field,
                  'created_at': a.created_at}}
                ORDER BY a.created_at NULLS LAST, a.source_handle, a.source_field) AS provenance
    FROM found f
    JOIN adjacent a ON a.node = coalesce(f.via, $start) AND a.other = f.node
    GROUP BY f.hop, f.node, f.via, a.kind, a.direction
),
items AS (
    SELECT handle, 'issue' AS type, title, lower(state) AS state, url FROM issues
    UNION ALL SELECT handle, 'pull_request', title, lower(state), url FROM pull_requests
    UNION ALL SELECT handle, 'discussion', title, lower(state), url FROM discussions
    UNION ALL SELECT handle, 'release', coalesce(name, tag), NULL, url FROM releases
    UNION ALL SELECT handle, CASE kind WHEN 'wiki' THEN 'wiki_doc' ELSE 'doc' END, title, NULL,
        url FROM docs
    UNION ALL SELECT handle, 'commit', subject, NULL, url FROM commits
)
SELECT r.hop, r.handle, r.via, r.kind, r.direction, i.type, i.title, i.state, i.url, r.provenance
FROM relations r LEFT JOIN items i ON i.handle = r.handle
"""

# Parameters: $handles, $sub_item. (closer, closed) pairs touching any of $handles.
_CLOSES = """
WITH closes AS (
    SELECT DISTINCT regexp_replace(src, $sub_item, '\\1') AS closer,
                    regexp_replace(dst, $sub_item, '\\1') AS closed
    FROM edges WHERE kind = 'closes'
), pairs AS (
    SELECT closer, closed FROM closes
    WHERE closer <> closed
      AND closer NOT IN (SELECT handle FROM issues UNION ALL SELECT handle FROM discussions)
)"""
_FIX_LINKS_SQL = (
    _CLOSES
    + """
SELECT closer, closed FROM pairs
WHERE list_contains($handles, closer) OR list_contains($handles, closed)
"""
)
# ... and the pairs touching the other ends of those
_FIX_LINKS_AROUND_SQL = (
    _CLOSES
    + """, ends AS (
    SELECT unnest($handles) AS handle
    UNION SELECT closer FROM pairs WHERE list_contains($handles, closed)
    UNION SELECT closed FROM pairs WHERE list_contains($handles, closer)
)
SELECT closer, closed FROM pairs
WHERE closer IN (SELECT handle FROM ends) OR closed IN (SELECT handle FROM ends)
"""
)
