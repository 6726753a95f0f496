"""From ranked chunk rows to ranked entities: collapse each retriever's ranking to one
entry per entity, fuse the two by reciprocal rank fusion (score = sum of
1 / (RRF_K + rank)), and diversify by maximal marginal relevance."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ghindex.query.hits import Hit, SameEntity, make_hit

# Small k weighs the top of each list more: on the eval sets k = 10 beat 20, 40 and 60
# (bench/README.md), and it keeps a found item clearly above the many near-misses.
RRF_K = 10


def group(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows by entity, entities in the order of their best row."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["entity"], []).append(row)
    return grouped


def fuse(dense: list[dict], sparse: list[dict], mode: str, rrf_k: float = RRF_K) -> list[Hit]:
    """Entity rankings of each retriever, fused (hybrid) or as they are. `rrf_k` is
    RRF_K but for `bench/eval_replay.py`, which measures other values."""
    lists = [("dense", dense), ("sparse", sparse)]
    chunk_rank: dict[tuple[str, int], int] = {}  # (retriever, row id) -> rank
    entity_rank: dict[tuple[str, str], int] = {}  # (retriever, entity) -> rank
    rows_of: dict[str, dict[int, dict[str, Any]]] = {}  # entity -> row id -> row
    for name, rows in lists:
        seen = 0
        for position, row in enumerate(rows, 1):
            chunk_rank[(name, row["_rowid"])] = position
            if (name, row["entity"]) not in entity_rank:
                seen += 1
                entity_rank[(name, row["entity"])] = seen
            rows_of.setdefault(row["entity"], {}).setdefault(row["_rowid"], row)

    def row_score(row: dict[str, Any]) -> float:
        if mode == "hybrid":
            return max(
                1.0 / (rrf_k + chunk_rank[(n, row["_rowid"])])
                for n, _ in lists
                if (n, row["_rowid"]) in chunk_rank
            )
        return float(row["_score"])

    hits = []
    for entity, rows in rows_of.items():
        d, s = entity_rank.get(("dense", entity)), entity_rank.get(("sparse", entity))
        score = (
            sum(1.0 / (rrf_k + r) for r in (d, s) if r is not None)
            if mode == "hybrid"
            else max(float(r["_score"]) for r in rows.values())
        )
        best = min(
            rows.values(),
            key=lambda r: min(chunk_rank.get((n, r["_rowid"]), 10**9) for n, _ in lists),
        )
        hit = make_hit(best, score, d, s, with_snippet=False)  # made for the few returned
        hit.same_entity = same_entity(list(rows.values()), best, row_score)
        hits.append(hit)
    hits.sort(key=lambda h: (-h.score, min(h.dense_rank or 10**9, h.sparse_rank or 10**9)))
    return hits


# At most TYPE_CAP results of one type (issue, pull request, commit, ...) in each block of
# TYPE_BLOCK: the type a question resembles (a pull request's title reads like other pull
# requests) must not take every place from the type it asks about. Lower caps helped that
# more and cost where one type is the answer to most questions (bench/README.md, #34).
TYPE_CAP = 8
TYPE_BLOCK = 10


def cap_types(hits: list[Hit], cap: int = TYPE_CAP, block: int = TYPE_BLOCK) -> list[Hit]:
    """`hits` in order, but with at most `cap` of one entity type in each `block` of
    them: a hit over the cap waits for the next block. A block short of other types is
    filled in order."""
    out: list[Hit] = []
    rest = list(hits)
    while rest:
        taken: list[Hit] = []
        left: list[Hit] = []
        counts: dict[str, int] = {}
        for hit in rest:
            if len(taken) < block and counts.get(hit.entity_type, 0) < cap:
                taken.append(hit)
                counts[hit.entity_type] = counts.get(hit.entity_type, 0) + 1
            else:
                left.append(hit)
        short = block - len(taken)
        if short > 0:  # too few of other types: the block takes the next hits as they come
            place = {id(h): n for n, h in enumerate(rest)}
            taken = sorted(taken + left[:short], key=lambda h: place[id(h)])
            left = left[short:]
        out += taken
        rest = left
    return out


def same_entity(
    rows: list[dict[str, Any]], best: dict[str, Any], score: Callable[[dict[str, Any]], float]
) -> list[SameEntity]:
    """The other rows of an entity (one per handle, best first), excluding `best`'s handle."""
    seen: dict[str, SameEntity] = {}
    for row in sorted(rows, key=lambda r: -score(r)):
        if row["handle"] != best["handle"] and row["handle"] not in seen:
            seen[row["handle"]] = SameEntity(row["handle"], row["type"], round(score(row), 6))
    return list(seen.values())


def diversify(hits: list[Hit], lambda_: float, k: int) -> list[Hit]:
    """Maximal marginal relevance over the representatives' vectors."""
    from ghindex.query.rerank import mmr

    pool = hits[: max(3 * k, 30)]
    if len(pool) < 2:
        return hits
    import numpy as np

    width = next((len(h.vector) for h in pool if h.vector is not None), 0)
    if not width:
        return hits
    blank = np.zeros(width, dtype=np.float32)  # a row read by its words only
    vectors = np.stack([blank if h.vector is None else np.asarray(h.vector) for h in pool])
    relevance = [h.rerank_score if h.rerank_score is not None else h.score for h in pool]
    order = mmr(pool, vectors, relevance, lambda_=lambda_, k=len(pool))
    return [pool[i] for i in order] + hits[len(pool) :]
