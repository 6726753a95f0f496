"""The six MCP tools as plain query functions over one snapshot.

Each takes typed arguments (validated by the server from `server.py`'s signatures)
and returns a compact dict. Nothing here writes anywhere: the state database is
opened read-only, and `sql` runs with external access and extensions disabled.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from ghindex.query.search import Filters, Hit, SearchResponse
from ghindex.serve.holder import Snapshot, SnapshotHolder

MAX_TOP_K = 50
MAX_HANDLES = 50
SQL_MAX_ROWS = 1000
SQL_TIMEOUT = 10.0


def envelope(snapshot: Snapshot, body: dict[str, Any]) -> dict[str, Any]:
    """Every answer says which snapshot it comes from and how old that is."""
    return {"snapshot_id": snapshot.snapshot_id, "snapshot_age_seconds": snapshot.age_seconds(),
            **body}  # fmt: skip


def filters(
    repo: str | None = None,
    type: str | None = None,
    state: str | None = None,
    labels: list[str] | None = None,
    author: str | None = None,
    assignee: str | None = None,
    milestone: str | None = None,
    path_prefix: str | None = None,
    since: date | datetime | None = None,
    until: date | datetime | None = None,
) -> Filters:
    return Filters(
        repos=(repo,) if repo else (),
        types=(type,) if type else (),
        states=(state,) if state else (),
        labels=tuple(labels or ()),
        authors=(author,) if author else (),
        assignees=(assignee,) if assignee else (),
        milestones=(milestone,) if milestone else (),
        path_prefix=path_prefix or None,
        since=since,
        until=until,
    )


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
    searcher = snapshot.searcher
    truncated = False
    if query is None or not query.strip():
        response, truncated = searcher.scan(
            filters=chosen, k=top_k, sort="updated_desc" if sort == "relevance" else sort
        )
    else:
        response = searcher.search(query, filters=chosen, k=top_k, mode=mode, rerank=rerank)
        if sort == "updated_desc":
            response.results.sort(key=lambda h: h.updated_at or "", reverse=True)
        elif sort == "created_desc":  # a hit carries no creation time: look its item up
            created = _created(snapshot, [h.entity for h in response.results])
            response.results.sort(key=lambda h: created.get(h.entity, ""), reverse=True)
    body: dict[str, Any] = {
        "mode": response.mode,
        "results": [_result(h, reranked=rerank) for h in response.results],
        "filters_unmatched": response.filters_unmatched,
        "truncated": truncated,
    }
    if response.notes:
        body["notes"] = response.notes
    if graph_expand:
        body["graph_results"] = _expand(snapshot, response, graph_hops)
    return envelope(snapshot, body)


def fetch(snapshot: Snapshot, handles: list[str], max_chars: int) -> dict[str, Any]:
    from ghindex.query.handles import UnknownHandle
    from ghindex.query.show import show

    found, missing = [], []
    with snapshot.searcher.state() as con:
        for handle in handles:
            try:
                found.append(show(con, handle, max_chars=max_chars))
            except UnknownHandle:
                missing.append(handle)
    return envelope(snapshot, {"items": found, "not_found": missing})


def related(snapshot: Snapshot, handle: str, hops: int) -> dict[str, Any]:
    from ghindex.query.graph import related as find_related

    with snapshot.searcher.state() as con:
        result = find_related(con, handle, hops=hops, nearest_items=snapshot.searcher.nearest)
    return envelope(snapshot, result.as_dict())


def context(snapshot: Snapshot, question: str, chosen: Filters, max_tokens: int) -> dict[str, Any]:
    """The most relevant passages that fit `max_tokens`, each with its citation."""
    response = snapshot.searcher.search(question, filters=chosen, k=20, mode="hybrid")
    passages, kept, used = [], [], 0
    for hit in response.results:
        text = getattr(hit, "_text", "") or hit.snippet
        cost = _tokens(text) + 30  # the citation fields cost a little too
        if used + cost > max_tokens:
            if not passages and max_tokens > 60:  # always give the best one, cut to fit
                text = text[: (max_tokens - 40) * 4]
                cost = _tokens(text) + 30
            else:
                continue
        passages.append(
            {
                "handle": hit.entity,
                "matched": hit.handle,
                "type": hit.entity_type,
                "title": hit.title,
                "url": hit.url,
                "state": hit.state,
                "author": hit.author,
                "author_association": hit.author_association,
                "text": text,
            }
        )
        kept.append(hit)
        used += cost
    body: dict[str, Any] = {"question": question, "passages": passages, "tokens": used}
    body["filters_unmatched"] = response.filters_unmatched
    if not passages:
        body["note"] = (
            "nothing in the snapshot matches this question: say that no source was found "
            "instead of answering from memory"
        )
    elif not any(h.dense_rank and h.sparse_rank for h in kept):
        body["note"] = (
            "no passage matched by both meaning and wording: treat these as weak leads and "
            "check them before relying on them"
        )
    return envelope(snapshot, body)


def sql(snapshot: Snapshot, query: str, max_rows: int, timeout: float = SQL_TIMEOUT) -> dict:
    """One read-only statement over the state database, with row and time limits."""
    from ghindex.query.sql import run_on

    with snapshot.searcher.state() as con:
        result = run_on(con, query, max_rows, timeout)
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
    sync = {k: v for k, v in vars(holder.sync).items() if v is not None}
    if "store" in sync:  # as messages show it: no user, password or query string
        from ghindex.snapshot.stores import shown

        sync["store"] = shown(sync["store"])
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


def _expand(snapshot: Snapshot, response: SearchResponse, hops: int) -> list[dict[str, Any]]:
    from ghindex.query.graph import neighbours
    from ghindex.query.handles import UnknownHandle

    shown = {h.entity for h in response.results}
    found: dict[str, dict[str, Any]] = {}
    with snapshot.searcher.state() as con:
        for hit in response.results:
            try:
                near = neighbours(con, hit.entity, hops=hops)
            except UnknownHandle:
                continue
            for n in near:
                if n.handle in shown or n.handle in found:
                    continue
                found[n.handle] = {
                    "handle": n.handle,
                    "type": n.type,
                    "title": n.title,
                    "url": n.url,
                    "hop": n.hop,
                    "from": hit.entity if n.hop == 1 else n.via,
                    "kind": n.kind,
                    "direction": n.direction,
                }
    return list(found.values())


def _created(snapshot: Snapshot, entities: list[str]) -> dict[str, str]:
    """When each item was created: its own first chunk's `created_at`, as a scan sorts."""
    if not entities:
        return {}
    listed = ", ".join("'" + e.replace("'", "''") + "'" for e in entities)
    where = (f"entity IN ({listed}) AND chunk_index = 0 "
             "AND (type = entity_type OR entity_type = 'commit')")  # fmt: skip
    rows = snapshot.searcher.table.search().where(where).select(["entity", "created_at"])
    return {r["entity"]: r["created_at"].isoformat() for r in rows.limit(None).to_list()
            if r["created_at"] is not None}  # fmt: skip


def _tokens(text: str) -> int:
    """Tokens an LLM will count, roughly: four characters each."""
    return (len(text) + 3) // 4
