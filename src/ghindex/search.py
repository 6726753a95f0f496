"""Search over the `chunks` table: dense kNN, BM25, and their fusion by RRF.

Both retrievers rank chunks; results are entities (one issue, one pull request),
so each ranking is first collapsed to the best chunk per handle. Hybrid search
fuses the two entity rankings with reciprocal rank fusion,
score = sum over rankings of 1 / (60 + rank), and keeps each entity's dense and
sparse rank so a reader can see why it came back. Filters are applied inside
both retrievers (prefiltering), never after the top k is cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ghindex import index
from ghindex.embed import Embedder
from ghindex.errors import GhindexError, IndexUnusable

MODES = ("hybrid", "dense", "sparse")
RRF_K = 60
_COLUMNS = [
    "id",
    "handle",
    "repo",
    "type",
    "number",
    "title",
    "text",
    "state",
    "labels",
    "author",
    "url",
    "updated_at",
]


@dataclass(frozen=True)
class Filters:
    """Each field narrows results; several values in one field mean any of them,
    except labels, where an item must carry every label given."""

    repos: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    authors: tuple[str, ...] = ()

    def where(self) -> str | None:
        clauses = []
        for column, values in (
            ("repo", self.repos),
            ("type", self.types),
            ("state", self.states),
            ("author", self.authors),
        ):
            if values:
                clauses.append(f"{column} IN ({', '.join(_literal(v) for v in values)})")
        clauses.extend(f"array_has(labels, {_literal(label)})" for label in self.labels)
        return " AND ".join(clauses) or None

    def as_dict(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in asdict(self).items() if v}


@dataclass
class Hit:
    handle: str
    type: str
    repo: str
    number: int | None
    title: str
    url: str
    state: str | None
    labels: list[str]
    author: str | None
    updated_at: str | None
    score: float
    dense_rank: int | None
    sparse_rank: int | None
    snippet: str


@dataclass
class SearchResponse:
    query: str
    mode: str
    k: int
    filters: dict[str, list[str]]
    results: list[Hit] = field(default_factory=list)
    filters_unmatched: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Searcher:
    """Opens the index once; loads the embedding model on the first dense query."""

    def __init__(
        self, lance_path: Path, *, embedder_factory: Callable[[str], Embedder] = Embedder
    ) -> None:
        db = index.connect(lance_path)
        if index.CHUNKS not in index.table_names(db):
            raise IndexUnusable(f"no index at {lance_path}: run `ghindex build` first")
        self.table = db.open_table(index.CHUNKS)
        model = index.index_model(db)
        self.model_name = model[0] if model else None
        self._embedder_factory = embedder_factory
        self._embedder: Embedder | None = None

    def search(
        self, query: str, *, filters: Filters | None = None, k: int = 10, mode: str = "hybrid"
    ) -> SearchResponse:
        filters = filters or Filters()
        if mode not in MODES:
            raise GhindexError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
        if not query.strip():
            raise GhindexError("the search query is empty: give words to search for")
        if k < 1:
            raise GhindexError(f"k must be at least 1, not {k}")
        response = SearchResponse(query=query, mode=mode, k=k, filters=filters.as_dict())
        response.filters_unmatched = self._unmatched(filters)
        where = filters.where()
        depth = max(50, 10 * k)
        dense = self._dense(query, where, depth) if mode in ("hybrid", "dense") else []
        sparse = self._sparse(query, where, depth) if mode in ("hybrid", "sparse") else []
        response.results = _fuse(dense, sparse, mode)[:k]
        return response

    def _dense(self, query: str, where: str | None, depth: int) -> list[dict[str, Any]]:
        if self._embedder is None:
            self._embedder = self._embedder_factory(self.model_name)
        vector = self._embedder.encode([query])[0]
        search = self.table.search(vector, query_type="vector").distance_type("cosine")
        if where:
            search = search.where(where, prefilter=True)
        rows = search.select(_COLUMNS).limit(depth).to_list()
        for row in rows:
            row["_score"] = 1.0 - float(row.pop("_distance"))
        return _collapse(rows)

    def _sparse(self, query: str, where: str | None, depth: int) -> list[dict[str, Any]]:
        search = self.table.search(query, query_type="fts", fts_columns="text")
        if where:
            search = search.where(where, prefilter=True)
        return _collapse(search.select(_COLUMNS).limit(depth).to_list())

    def _unmatched(self, filters: Filters) -> list[str]:
        """Filter values that match nothing at all in the index (e.g. a misspelt repo)."""
        unmatched = []
        for name, column, values in (
            ("repo", "repo", filters.repos),
            ("type", "type", filters.types),
            ("state", "state", filters.states),
            ("label", None, filters.labels),
            ("author", "author", filters.authors),
        ):
            for value in values:
                test = (
                    f"array_has(labels, {_literal(value)})"
                    if column is None
                    else f"{column} = {_literal(value)}"
                )
                if self.table.count_rows(test) == 0:
                    unmatched.append(f"{name}={value}")
        return unmatched


def _collapse(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the best-ranked chunk of each entity, in rank order."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row["handle"], row)
    return list(seen.values())


def _fuse(dense: list[dict], sparse: list[dict], mode: str) -> list[Hit]:
    dense_rank = {row["handle"]: rank for rank, row in enumerate(dense, 1)}
    sparse_rank = {row["handle"]: rank for rank, row in enumerate(sparse, 1)}
    best: dict[str, dict[str, Any]] = {}
    for rows in (dense, sparse) if mode != "sparse" else (sparse,):
        for row in rows:
            best.setdefault(row["handle"], row)
    hits = []
    for handle, row in best.items():
        d, s = dense_rank.get(handle), sparse_rank.get(handle)
        if mode == "hybrid":
            score = sum(1.0 / (RRF_K + r) for r in (d, s) if r is not None)
            # the snippet comes from whichever retriever ranked the entity higher
            if s is not None and (d is None or s < d):
                row = sparse[s - 1]
        else:
            score = float(row["_score"])
        hits.append(_hit(row, score, d, s))
    hits.sort(key=lambda h: (-h.score, min(h.dense_rank or 10**9, h.sparse_rank or 10**9)))
    return hits


def _hit(row: dict[str, Any], score: float, dense: int | None, sparse: int | None) -> Hit:
    updated = row.get("updated_at")
    return Hit(
        handle=row["handle"],
        type=row["type"],
        repo=row["repo"],
        number=row.get("number"),
        title=row.get("title") or "",
        url=row.get("url") or "",
        state=row.get("state"),
        labels=list(row.get("labels") or []),
        author=row.get("author"),
        updated_at=updated.isoformat().replace("+00:00", "Z") if updated else None,
        score=round(score, 6),
        dense_rank=dense,
        sparse_rank=sparse,
        snippet=snippet(row.get("text") or ""),
    )


def snippet(text: str, limit: int = 240) -> str:
    """The chunk's body (without its title/handle header), on one line."""
    body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
    flat = re.sub(r"\s+", " ", body).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"
