"""The six MCP tools, each one call on the served `Snapshot` (`query/snapshot.py`).

Each takes typed arguments (validated by the server from `server.py`'s signatures)
and returns a compact dict in the tools' own shape, inside the envelope. Nothing here
writes anywhere: the state database is opened read-only, and `sql` runs with external
access and extensions disabled.
"""

from __future__ import annotations

from typing import Any

from ghindex.query.filters import Filters
from ghindex.query.hits import Hit
from ghindex.query.snapshot import SQL_TIMEOUT, Snapshot
from ghindex.serve.holder import SnapshotHolder

MAX_TOP_K = 50
MAX_HANDLES = 50
SQL_MAX_ROWS = 1000


def envelope(snapshot: Snapshot, body: dict[str, Any]) -> dict[str, Any]:
    """Every answer says which snapshot it comes from and how old that is."""
    return {"snapshot_id": snapshot.snapshot_id, "snapshot_age_seconds": snapshot.age_seconds(),
            **body}  # fmt: skip


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
) -> dict[str, Any]:
    if query is None or not query.strip():  # no query: the newest items the filters select
        response = snapshot.scan(chosen, k=top_k, sort="updated_desc" if sort == "relevance"
                                 else sort, expand=graph_expand, hops=graph_hops)  # fmt: skip
    else:
        response = snapshot.search(query, chosen, k=top_k, mode=mode, rerank=rerank, sort=sort,
                                   expand=graph_expand, hops=graph_hops)  # fmt: skip
    body: dict[str, Any] = {
        "mode": response.mode,
        "results": [_result(h, reranked=rerank) for h in response.results],
        "filters_unmatched": response.filters_unmatched,
        "truncated": bool(response.truncated),
    }
    if response.notes:
        body["notes"] = response.notes
    if response.graph_results is not None:
        body["graph_results"] = response.graph_results
    return envelope(snapshot, body)


def fetch(snapshot: Snapshot, handles: list[str], max_chars: int) -> dict[str, Any]:
    return envelope(snapshot, snapshot.fetch(handles, max_chars=max_chars))


def related(snapshot: Snapshot, handle: str, hops: int) -> dict[str, Any]:
    return envelope(snapshot, snapshot.related(handle, hops=hops).as_dict())


def context(snapshot: Snapshot, question: str, chosen: Filters, max_tokens: int) -> dict[str, Any]:
    """The most relevant passages that fit `max_tokens`, each with its citation."""
    return envelope(snapshot, snapshot.context(question, chosen, max_tokens=max_tokens))


def sql(snapshot: Snapshot, query: str, max_rows: int, timeout: float = SQL_TIMEOUT) -> dict:
    """One read-only statement over the state database, with row and time limits."""
    result = snapshot.sql(query, max_rows=max_rows, timeout=timeout)
    return envelope(
        snapshot,
        {
            "columns": result.columns,
            "rows": result.rows,
            "row_count": len(result.rows),
            "truncated": result.truncated,
            "truncated_reason": result.reason,
            "elapsed_ms": result.elapsed_ms,
        },
    )


def status(holder: SnapshotHolder) -> dict[str, Any]:
    holder.follow_rebuilds()
    snapshot = holder.current
    sync = holder.sync_status()
    if snapshot is None:
        return {
            "snapshot_id": None,
            "snapshot_age_seconds": None,
            "status": holder._empty_reason(),
            "sync": sync,
        }
    manifest = snapshot.manifest
    return envelope(
        snapshot,
        {
            "status": "serving",
            "created_at": manifest.get("created_at"),
            "built_at": manifest.get("built_at"),
            "repos": manifest.get("repos", {}),
            "counts": manifest.get("counts", {}),
            "model": manifest.get("model"),
            "sync": sync,
        },
    )


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
    return result
