"""The six MCP tools, each one call on the served `Snapshot` (`query/snapshot.py`).

Each takes typed arguments (validated by the server from `server.py`'s signatures)
and returns a compact dict in the tools' own shape, inside the envelope, within the
answer budget (`budget.py`): cut at a whole result, row or neighbour, with where to go
on. Nothing here writes anywhere: the state database is opened read-only, and `sql`
runs in a sandboxed child process.
"""

from __future__ import annotations

from typing import Any

from ghindex.query.filters import Filters
from ghindex.query.hits import Hit
from ghindex.query.snapshot import SQL_TIMEOUT, Snapshot
from ghindex.serve import budget
from ghindex.serve.holder import SnapshotHolder
from ghindex.vocabulary import hidden
from ghindex.vocabulary.limits import HANDLES, MAX_OFFSET
from ghindex.vocabulary.tokens import most_chars

MAX_TOP_K = 50
MAX_HANDLES = HANDLES
MAX_SEARCH_OFFSET = 150  # a search ranks offset + top_k items
SQL_MAX_ROWS = 1000
# where to read what `budget.hold` cut from a list inside an answer
SEE_ALL_ROWS = "fetch an item for all its matching rows and links"
ALL_REPOS = "sql `SELECT * FROM sync_state` lists every repository's cursors"


def _links_sql(handle: str) -> str:
    quoted = handle.replace("'", "''")[:200]
    return f"`SELECT * FROM edges WHERE src = '{quoted}' OR dst = '{quoted}'`"


def envelope(snapshot: Snapshot, body: dict[str, Any]) -> dict[str, Any]:
    """Every answer says which snapshot it comes from and how old that is; its text
    comes without what renders as nothing (`vocabulary/hidden.py`), each item that
    carried some counting them in `hidden_characters`."""
    return {
        "snapshot_id": snapshot.snapshot_id,
        "snapshot_age_seconds": snapshot.age_seconds(),
        **hidden.cleaned(body),
    }


def filters(**given: Any) -> Filters:
    """The tools' flat filter arguments (`repo`, `type`, `labels`, ...) as `Filters`."""
    return Filters.of(**given)


def search(
    snapshot: Snapshot,
    query: str | None,
    chosen: Filters,
    *,
    top_k: int = 10,
    mode: str = "hybrid",
    rerank: bool = False,
    sort: str = "relevance",
    graph_expand: bool = False,
    graph_hops: int = 1,
    offset: int = 0,
) -> dict[str, Any]:
    k = offset + top_k  # the results from `offset` on: the ranking is the same
    response = snapshot.find(
        query,
        chosen,
        k=k,
        mode=mode,
        rerank=rerank,
        sort=sort,
        expand=graph_expand,
        hops=graph_hops,
    )
    results = response.results[offset:]
    body: dict[str, Any] = {
        "mode": response.mode,
        "results": [_result(h, reranked=rerank) for h in results],
        "filters_unmatched": response.filters_unmatched,
        "truncated": bool(response.truncated),
    }
    if response.notes:
        body["notes"] = response.notes
    if response.graph_results is not None:
        body["graph_results"] = response.graph_results
    answer = envelope(snapshot, body)
    limit = budget.budget()
    # linked items go first, then whole results from the end
    budget.fit(answer, "graph_results", limit, None, what="linked items")
    budget.fit(answer, "results", limit, offset, what="results", most=MAX_SEARCH_OFFSET)
    budget.hold(answer, limit, more=SEE_ALL_ROWS)
    return answer


def fetch(snapshot: Snapshot, handles: list[str], max_chars: int, skip: int = 0) -> dict:
    """The items within `max_chars` and the answer budget, whichever is smaller."""
    limit = budget.budget()
    room = min(max_chars, most_chars(limit))
    for _ in range(4):
        answer = envelope(snapshot, snapshot.fetch(handles, max_chars=room, skip=skip))
        spent = budget.cost(answer)
        if spent <= limit or room <= 400:
            break
        room = max(int(room * limit / spent * 0.9), 400)
    budget.hold(answer, limit, more="fetch fewer handles at a time")
    return answer


def related(snapshot: Snapshot, handle: str, hops: int, offset: int = 0) -> dict[str, Any]:
    body = snapshot.related(handle, hops=hops).as_dict()
    body["neighbours"] = body["neighbours"][offset:]
    answer = envelope(snapshot, body)
    limit = budget.budget()
    budget.fit(answer, "nearest", limit, None, what="nearest items")
    budget.fit(answer, "neighbours", limit, offset, what="linked items", most=MAX_OFFSET)
    budget.hold(answer, limit, more=f"sql over edges lists every link: {_links_sql(handle)}")
    return answer


def context(snapshot: Snapshot, question: str, chosen: Filters, max_tokens: int) -> dict[str, Any]:
    """The most relevant passages that fit `max_tokens` (and the answer budget), each
    with its citation."""
    room = min(max_tokens, budget.budget() - 600)  # the fields around the passages
    answer = envelope(snapshot, snapshot.context(question, chosen, max_tokens=room))
    budget.fit(answer, "passages", budget.budget(), None, what="passages")
    budget.hold(answer, budget.budget())
    return answer


def sql(
    snapshot: Snapshot, query: str, max_rows: int, timeout: float = SQL_TIMEOUT, offset: int = 0
) -> dict:
    """One read-only statement over the state database, with row, time and token limits."""
    limit = budget.budget()
    result = snapshot.sql(
        query, max_rows=max_rows, timeout=timeout, offset=offset, max_bytes=most_chars(limit)
    )
    answer = envelope(
        snapshot,
        {
            "columns": result.columns,
            "rows": result.rows,
            "row_count": len(result.rows),
            "truncated": result.truncated,
            "truncated_reason": result.reason,
            "elapsed_ms": result.elapsed_ms,
            **({"hint": result.hint} if result.hint else {}),
        },
    )
    if budget.fit(answer, "rows", limit, offset, what="rows", most=MAX_OFFSET):
        answer["row_count"] = len(answer["rows"])
    elif result.truncated and result.reason and result.reason.startswith("cut at"):
        if offset + len(result.rows) <= MAX_OFFSET:
            answer["next_offset"] = offset + len(result.rows)
            answer["truncated_reason"] += f"; ask again with offset={answer['next_offset']}"
        else:
            answer["truncated_reason"] += f"; the rest lies past offset {MAX_OFFSET:,}"
    # a row is never cut into fewer columns: what is too big inside it is
    if budget.hold(answer, limit, whole=("columns", "rows")):
        answer["row_count"] = len(answer["rows"])
    return answer


def status(holder: SnapshotHolder) -> dict[str, Any]:
    holder.follow_rebuilds()
    snapshot = holder.current
    sync = holder.sync_status()
    if snapshot is None:
        return {
            "snapshot_id": None,
            "snapshot_age_seconds": None,
            **hidden.cleaned({"status": holder.empty_reason(), "sync": sync}),
        }
    summary = snapshot.status(check=False)
    # the envelope says which snapshot and how old; where it lies on the server is not
    # the agent's business
    for key in ("source", "snapshot_id", "age_seconds"):
        summary.pop(key, None)
    answer = envelope(snapshot, {"status": "serving", **summary, "sync": sync})
    budget.hold(answer, budget.budget(), more=ALL_REPOS)
    return answer


def _result(hit: Hit, *, reranked: bool) -> dict[str, Any]:
    result = {
        "handle": hit.entity,
        "type": hit.entity_type,
        "repo": hit.repo,
        "number": hit.number,
        "title": hit.title,
        "state": hit.state,
        "url": hit.url,
        "updated_at": hit.updated_at,
        "snippet": hit.snippet,
        "score": hit.score,
        "dense_rank": hit.dense_rank,
        "sparse_rank": hit.sparse_rank,
    }
    if hit.handle != hit.entity:
        result["matched"] = {"handle": hit.handle, "type": hit.type}
    result["author"] = hit.author
    result["author_association"] = hit.author_association
    if reranked and hit.rerank_score is not None:
        result["rerank_score"] = hit.rerank_score
    if hit.exact:
        result["exact"] = True
    if hit.same_entity:
        result["same_entity"] = [vars(r) for r in hit.same_entity]
    if hit.fixed_by:
        result["fixed_by"] = hit.fixed_by
    if hit.closes:
        result["closes"] = hit.closes
    if hit.near:
        result["near"] = hit.near
    return result
