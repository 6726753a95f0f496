"""Search over the `chunks` table: dense kNN, BM25, their fusion by RRF, an
optional cross-encoder rerank and MMR diversity.

Results are entities (an issue with its comments and reviews, a commit with its
per-file diffs, a doc). Each retriever ranks chunks; its ranking is collapsed to
one entry per entity, and hybrid search fuses the two entity rankings with
reciprocal rank fusion, score = sum of 1 / (60 + rank). The representative of an
entity is its best-ranked row; its other matching rows are listed in
`same_entity`. Filters are applied inside both retrievers (prefiltering), never
after the top k is cut. A query that is an identifier (`#123`, `owner/repo#12`,
a commit SHA or prefix, a handle, a file path) is resolved exactly first, and
ranked results fill the rest.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lancedb.query import MatchQuery

from ghindex.errors import GhindexError, IndexUnusable
from ghindex.index import table as index
from ghindex.index.embed import Embedder
from ghindex.state.rows import iso_time

if TYPE_CHECKING:
    import duckdb

MODES = ("hybrid", "dense", "sparse")
SORTS = ("relevance", "updated_desc", "created_desc")
RRF_K = 60
RERANK_CANDIDATES = 30
_COLUMNS = [
    "id", "handle", "entity", "entity_type", "repo", "type", "number", "title", "text", "state",
    "labels", "author", "author_association", "url", "updated_at", "created_at", "vector",
]  # fmt: skip
_NO_VECTOR = [c for c in _COLUMNS if c != "vector"]  # the vectors only serve MMR
_ISSUE_REF = re.compile(r"^(?:([A-Za-z0-9-]+/[A-Za-z0-9._-]+))?#(\d+)$")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_PATHLIKE = re.compile(r"^[\w.@-]+(?:/[\w.@-]+)*\.\w+$|^[\w.@-]+(?:/[\w.@-]+)+$")


@dataclass(frozen=True)
class Filters:
    """Each field narrows results. Several values in one field mean any of them,
    except `labels`, where an item must carry every label given."""

    repos: tuple[str, ...] = ()
    types: tuple[str, ...] = ()  # a document type or an entity type
    states: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()  # all of them
    any_labels: tuple[str, ...] = ()  # at least one
    not_labels: tuple[str, ...] = ()  # none of them
    authors: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    milestones: tuple[str, ...] = ()
    path_prefix: str | None = None
    since: datetime | None = None  # updated at or after
    until: datetime | None = None  # updated before
    created_since: datetime | None = None
    created_until: datetime | None = None

    def __post_init__(self) -> None:
        # a date means its midnight, and a time without a zone is UTC, as GitHub's are
        for name in ("since", "until", "created_since", "created_until"):
            object.__setattr__(self, name, _utc(getattr(self, name)))

    def clauses(self) -> list[tuple[str, str, str]]:
        """(filter name, value as given, SQL predicate), one per value."""
        found = []
        for name, column, values in (
            ("repo", "repo", self.repos),
            ("state", "state", self.states),
            ("author", "author", self.authors),
            ("milestone", "milestone", self.milestones),
        ):
            found.extend((name, v, f"{column} = {_literal(v)}") for v in values)
        found.extend(
            ("type", v, f"(type = {_literal(v)} OR entity_type = {_literal(v)})")
            for v in self.types
        )
        found.extend(("label", v, f"array_has(labels, {_literal(v)})") for v in self.labels)
        found.extend(("any_label", v, f"array_has(labels, {_literal(v)})") for v in self.any_labels)
        found.extend(
            ("not_label", v, f"NOT array_has(labels, {_literal(v)})") for v in self.not_labels
        )
        found.extend(
            ("assignee", v, f"array_has(assignees, {_literal(v)})") for v in self.assignees
        )
        if self.path_prefix:
            found.append(
                ("path", self.path_prefix, f"starts_with(path, {_literal(self.path_prefix)})")
            )
        for name, column, op, value in (
            ("since", "updated_at", ">=", self.since),
            ("until", "updated_at", "<", self.until),
            ("created_since", "created_at", ">=", self.created_since),
            ("created_until", "created_at", "<", self.created_until),
        ):
            if value is not None:
                found.append((name, value.isoformat(), f"{column} {op} {_timestamp(value)}"))
        return found

    def where(self) -> str | None:
        grouped: dict[str, list[str]] = {}
        for name, _, predicate in self.clauses():
            grouped.setdefault(name, []).append(predicate)
        parts = []
        for name, predicates in grouped.items():
            joiner = " OR " if name in ("repo", "state", "author", "milestone", "type",
                                        "any_label", "assignee") else " AND "  # fmt: skip
            parts.append("(" + joiner.join(predicates) + ")")
        return " AND ".join(parts) or None

    def as_dict(self) -> dict[str, Any]:
        shown = {}
        for key, value in asdict(self).items():
            if value in ((), None):
                continue
            shown[key] = (
                value.isoformat()
                if isinstance(value, datetime)
                else (list(value) if isinstance(value, tuple) else value)
            )
        return shown


@dataclass
class Related:
    handle: str
    type: str
    score: float


@dataclass
class Hit:
    handle: str  # the representative row: the item itself, or a comment, review, file diff
    entity: str  # what results collapse to: the issue, pull request, commit, doc ...
    type: str
    entity_type: str
    repo: str
    number: int | None
    title: str
    url: str
    state: str | None
    labels: list[str]
    author: str | None
    author_association: str | None
    updated_at: str | None
    score: float
    dense_rank: int | None
    sparse_rank: int | None
    snippet: str
    rerank_score: float | None = None
    exact: bool = False
    same_entity: list[Related] = field(default_factory=list)
    fixed_by: list[str] = field(default_factory=list)
    closes: list[str] = field(default_factory=list)


@dataclass
class SearchResponse:
    query: str
    mode: str
    k: int
    filters: dict[str, Any]
    results: list[Hit] = field(default_factory=list)
    filters_unmatched: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Searcher:
    """Opens the index once; loads the embedding model on the first dense query and
    the cross-encoder on the first reranked one.

    `hold_state` keeps one read-only connection to the state database for the
    searcher's life and gives each request a cursor on it (a tenth of a millisecond,
    against about 14 ms to open the file). Only for a snapshot nothing writes to: a
    held read-only connection stops another process from writing the file. Without
    it the state is opened per request. `state_connection` instead gives the
    connection for each request (closed after it): a caller that holds its own
    connection to the file passes a cursor of it, since DuckDB refuses a second
    connection with another configuration."""

    def __init__(
        self,
        lance_path: Path,
        *,
        embedder_factory: Callable[[str], Embedder] = Embedder,
        reranker_factory: Callable[[], Any] | None = None,
        state_path: Path | None = None,
        hold_state: bool = False,
        state_connection: Callable[[], duckdb.DuckDBPyConnection] | None = None,
    ) -> None:
        db = index.connect(lance_path)
        if index.CHUNKS not in index.table_names(db):
            raise IndexUnusable(f"no index at {lance_path}: run `ghindex build` first")
        self.table = db.open_table(index.CHUNKS)
        self._indexed = index.has_vector_index(self.table)
        model = index.index_model(db)
        self.model_name = model[0] if model else None
        self._embedder_factory = embedder_factory
        self._embedder: Embedder | None = None
        self._reranker_factory = reranker_factory
        self._reranker: Any = None
        candidate = state_path or Path(lance_path).parent / "state.duckdb"
        self.state_path = candidate if candidate.exists() else None
        self._unmatched_cache: dict[str, bool] = {}
        self._hold_state = hold_state
        self._state_connection = state_connection
        self._state_db: duckdb.DuckDBPyConnection | None = None
        self._state_lock = threading.Lock()
        # BM25 runs beside the query's embedding and kNN: both release the GIL
        self._beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ghindex-sparse")

    @contextlib.contextmanager
    def state(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the state database for one request: read-only, no files,
        network or extensions (the `sql` tool's sandbox). One configuration for every
        request, because DuckDB refuses a second, different one on an open file."""
        from ghindex.query.sql import connect

        if self.state_path is None:
            raise IndexUnusable("no state.duckdb beside the index: run `ghindex fetch` first")
        if self._state_connection is not None:
            con = self._state_connection()
        elif self._hold_state:
            with self._state_lock:
                if self._state_db is None:
                    self._state_db = connect(self.state_path)
                con = self._state_db.cursor()
        else:
            con = connect(self.state_path)
        try:
            yield con
        finally:
            con.close()

    def close(self) -> None:
        """Release the held state connection and the helper thread."""
        with self._state_lock:
            if self._state_db is not None:
                self._state_db.close()
                self._state_db = None
        self._beside.shutdown(wait=False)

    def search(
        self,
        query: str,
        *,
        filters: Filters | None = None,
        k: int = 10,
        mode: str = "hybrid",
        rerank: bool = False,
        mmr: float | None = None,
    ) -> SearchResponse:
        filters = filters or Filters()
        if mode not in MODES:
            raise GhindexError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
        if not query.strip():
            raise GhindexError("the search query is empty: give words to search for")
        if k < 1:
            raise GhindexError(f"k must be at least 1, not {k}")
        if mmr is not None and not 0.0 <= mmr <= 1.0:
            raise GhindexError(f"mmr must be between 0 and 1, not {mmr}")
        response = SearchResponse(query=query, mode=mode, k=k, filters=filters.as_dict())
        response.filters_unmatched = self._unmatched(filters)
        where = filters.where()

        exact = self._exact(query.strip(), where) if _may_be_identifier(query) else []
        depth = max(100, 20 * k)
        columns = _COLUMNS if mmr is not None else _NO_VECTOR
        sparse_job = None
        if mode == "hybrid":
            sparse_job = self._beside.submit(self._sparse, query, where, depth, columns)
        dense = self._dense(query, where, depth, columns) if mode != "sparse" else []
        if sparse_job is not None:
            sparse = sparse_job.result()
        else:
            sparse = self._sparse(query, where, depth, columns) if mode == "sparse" else []
        ranked = [
            h for h in _fuse(dense, sparse, mode) if h.entity not in {e.entity for e in exact}
        ]
        if rerank:
            ranked = self._rerank(query, ranked, k, response)
        if mmr is not None:
            ranked = _diversify(ranked, mmr, k)
        response.results = (exact + ranked)[:k]
        for hit in response.results:
            hit.snippet = hit.snippet or snippet(hit._text)  # type: ignore[attr-defined]
        self._annotate(response.results)
        return response

    def scan(
        self, *, filters: Filters | None = None, k: int = 10, sort: str = "updated_desc"
    ) -> tuple[SearchResponse, bool]:
        """Entities matching the filters, newest first: (response, more rows exist)."""
        if sort not in SORTS[1:]:
            raise GhindexError(f"a scan sorts by {' or '.join(SORTS[1:])}, not {sort!r}")
        filters = filters or Filters()
        response = SearchResponse(query="", mode="scan", k=k, filters=filters.as_dict())
        response.filters_unmatched = self._unmatched(filters)
        # one row per entity: the first chunk of its own document (a commit's: of any file)
        head = "chunk_index = 0 AND (type = entity_type OR entity_type = 'commit')"
        where = f"{head} AND {filters.where()}" if filters.where() else head
        column = "updated_at" if sort == "updated_desc" else "created_at"
        table = self.table.search().where(where).select(_NO_VECTOR)
        rows = table.limit(None).to_arrow()
        if rows.num_rows:
            import pyarrow.compute as pc

            order = pc.sort_indices(
                rows, sort_keys=[(column, "descending"), ("entity", "ascending")]
            )
            rows = rows.take(order)
        seen: dict[str, dict[str, Any]] = {}
        for row in rows.to_pylist():
            seen.setdefault(row["entity"], row)
        heads = list(seen.values())
        response.results = [_hit(row, 0.0, None, None) for row in heads[:k]]
        self._annotate(response.results)
        return response, len(heads) > k

    def nearest(self, entity: str, k: int = 10) -> list[dict[str, Any]]:
        """Entities whose text is closest to `entity`'s (the mean of its chunk vectors)."""
        import numpy as np

        own = self.table.search().where(f"entity = {_literal(entity)}").select(["vector"])
        vectors = [row["vector"] for row in own.limit(500).to_list()]
        if not vectors:
            return []
        centre = np.mean(np.stack(vectors), axis=0)
        centre = centre / (np.linalg.norm(centre) or 1.0)
        rows = (
            self.table.search(centre, query_type="vector")
            .distance_type("cosine")
            .where(f"entity != {_literal(entity)}", prefilter=True)
            .select(_COLUMNS)
            .limit(20 * k)
            .to_list()
        )
        found: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row["entity"] not in found and len(found) < k:
                found[row["entity"]] = {
                    "handle": row["entity"],
                    "type": row["entity_type"],
                    "title": row.get("title") or "",
                    "url": row.get("url") or "",
                    "score": round(1.0 - float(row["_distance"]), 6),
                }
        return list(found.values())

    def _dense(
        self, query: str, where: str | None, depth: int, columns: list[str] = _COLUMNS
    ) -> list[dict[str, Any]]:
        if self._embedder is None:
            self._embedder = self._embedder_factory(self.model_name)
        vector = self._embedder.encode([query])[0]
        search = self.table.search(vector, query_type="vector").distance_type("cosine")
        if self._indexed:
            search = search.refine_factor(5)  # exact distances over 5× the candidates
        if where:
            search = search.where(where, prefilter=True)
        rows = search.select(columns).limit(depth).to_list()
        for row in rows:
            row["_score"] = 1.0 - float(row.pop("_distance"))
        return rows

    def _sparse(
        self, query: str, where: str | None, depth: int, columns: list[str] = _COLUMNS
    ) -> list[dict[str, Any]]:
        # a MatchQuery takes the words as they are: no query syntax, so "--full",
        # "a AND b" or "foo:bar" are searched for, not interpreted
        search = self.table.search(MatchQuery(query, "text"), query_type="fts")
        if where:
            search = search.where(where, prefilter=True)
        return search.select(columns).limit(depth).to_list()

    def _exact(self, query: str, where: str | None) -> list[Hit]:
        """Entities the query names outright: `#12`, `owner/repo#12`, a SHA, a handle, a path."""
        tests = [f"handle = {_literal(query)}", f"entity = {_literal(query)}"]
        issue = _ISSUE_REF.match(query)
        if issue:
            repo, number = issue.groups()
            tests.append(
                f"entity = {_literal(f'{repo}#{number}')}"
                if repo
                else f"(number = {int(number)} AND entity LIKE {_literal(f'%#{number}')})"
            )
        if _SHA.match(query.lower()):
            tests.append(
                f"(entity_type = 'commit' AND entity LIKE {_literal(f'%@{query.lower()}%')})"
            )
        if _PATHLIKE.match(query) and " " not in query:
            tests.append(f"(path = {_literal(query)} OR path LIKE {_literal(f'%/{query}')})")
        predicate = "(" + " OR ".join(tests) + ")"
        if where:
            predicate = f"{predicate} AND {where}"
        rows = self.table.search().where(predicate).select(_COLUMNS).limit(200).to_list()
        if not rows:
            return []
        hits = []
        for entity_rows in _group(rows).values():
            best = min(entity_rows, key=lambda r: (r["type"] != r["entity_type"], r["id"]))
            hit = _hit(best, 1.0, None, None)
            hit.exact = True
            hit.same_entity = _related(entity_rows, best, lambda _r: 1.0)
            hits.append(hit)
        hits.sort(key=lambda h: (h.updated_at or "", h.entity), reverse=True)
        return hits

    def _rerank(self, query: str, ranked: list[Hit], k: int, response: SearchResponse) -> list[Hit]:
        from ghindex.errors import RerankUnavailable

        head = ranked[: max(RERANK_CANDIDATES, 3 * k)]
        if not head:
            return ranked
        try:
            if self._reranker is None:
                from ghindex.query.rerank import Reranker

                factory = self._reranker_factory or Reranker
                self._reranker = factory()
            scores = self._reranker.score(query, [h._text for h in head])  # type: ignore[attr-defined]
        except RerankUnavailable as exc:
            response.notes.append(f"rerank skipped: {exc}")
            return ranked
        for hit, score in zip(head, scores, strict=True):
            hit.rerank_score = round(float(score), 6)
        head.sort(key=lambda h: -(h.rerank_score or 0.0))
        return head + ranked[len(head) :]

    def _annotate(self, hits: Sequence[Hit]) -> None:
        """Which pull requests fixed an issue, which issues a pull request closes."""
        if not hits or self.state_path is None:
            return
        from ghindex.query.graph import fix_links

        with self.state() as con:
            links = fix_links(con, [h.entity for h in hits])
        for hit in hits:
            found = links.get(hit.entity) or {}
            hit.fixed_by = list(found.get("fixed_by", []))
            hit.closes = list(found.get("closes", []))

    def _unmatched(self, filters: Filters) -> list[str]:
        """Filter values that match nothing at all in the index (e.g. a misspelt repo)."""
        unmatched = []
        for name, value, predicate in filters.clauses():
            test = predicate.removeprefix("NOT ") if name == "not_label" else predicate
            if test not in self._unmatched_cache:
                self._unmatched_cache[test] = self.table.count_rows(test) == 0
            if self._unmatched_cache[test]:
                unmatched.append(f"{name}={value}")
        return unmatched


def _may_be_identifier(query: str) -> bool:
    """Only a query without spaces can name an item (handles and paths have none)."""
    text = query.strip()
    return bool(text) and not any(c.isspace() for c in text)


def _group(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows by entity, entities in the order of their best row."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["entity"], []).append(row)
    return grouped


def _fuse(dense: list[dict], sparse: list[dict], mode: str) -> list[Hit]:
    """Entity rankings of each retriever, fused (hybrid) or as they are."""
    lists = [("dense", dense), ("sparse", sparse)]
    chunk_rank: dict[tuple[str, str], int] = {}  # (retriever, row id) -> rank
    entity_rank: dict[tuple[str, str], int] = {}  # (retriever, entity) -> rank
    rows_of: dict[str, dict[str, dict[str, Any]]] = {}  # entity -> row id -> row
    for name, rows in lists:
        seen = 0
        for position, row in enumerate(rows, 1):
            chunk_rank[(name, row["id"])] = position
            if (name, row["entity"]) not in entity_rank:
                seen += 1
                entity_rank[(name, row["entity"])] = seen
            rows_of.setdefault(row["entity"], {}).setdefault(row["id"], row)

    def row_score(row: dict[str, Any]) -> float:
        if mode == "hybrid":
            return max(1.0 / (RRF_K + chunk_rank[(n, row["id"])]) for n, _ in lists
                       if (n, row["id"]) in chunk_rank)  # fmt: skip
        return float(row["_score"])

    hits = []
    for entity, rows in rows_of.items():
        d, s = entity_rank.get(("dense", entity)), entity_rank.get(("sparse", entity))
        score = (sum(1.0 / (RRF_K + r) for r in (d, s) if r is not None) if mode == "hybrid"
                 else max(float(r["_score"]) for r in rows.values()))  # fmt: skip
        best = min(rows.values(), key=lambda r: min(chunk_rank.get((n, r["id"]), 10**9)
                                                    for n, _ in lists))  # fmt: skip
        hit = _hit(best, score, d, s, with_snippet=False)  # made for the few returned
        hit.same_entity = _related(list(rows.values()), best, row_score)
        hits.append(hit)
    hits.sort(key=lambda h: (-h.score, min(h.dense_rank or 10**9, h.sparse_rank or 10**9)))
    return hits


def _related(rows: list[dict[str, Any]], best: dict[str, Any], score) -> list[Related]:
    """The other rows of an entity (one per handle, best first), excluding `best`'s handle."""
    seen: dict[str, Related] = {}
    for row in sorted(rows, key=lambda r: -score(r)):
        if row["handle"] != best["handle"] and row["handle"] not in seen:
            seen[row["handle"]] = Related(row["handle"], row["type"], round(score(row), 6))
    return list(seen.values())


def _diversify(hits: list[Hit], lambda_: float, k: int) -> list[Hit]:
    """Maximal marginal relevance over the representatives' vectors."""
    from ghindex.query.rerank import mmr

    pool = hits[: max(3 * k, 30)]
    if len(pool) < 2:
        return hits
    import numpy as np

    vectors = np.stack([h._vector for h in pool])  # type: ignore[attr-defined]
    relevance = [h.rerank_score if h.rerank_score is not None else h.score for h in pool]
    order = mmr(pool, vectors, relevance, lambda_=lambda_, k=len(pool))
    return [pool[i] for i in order] + hits[len(pool) :]


def _hit(
    row: dict[str, Any],
    score: float,
    dense: int | None,
    sparse: int | None,
    *,
    with_snippet: bool = True,
) -> Hit:
    updated = row.get("updated_at")
    hit = Hit(
        handle=row["handle"],
        entity=row["entity"],
        type=row["type"],
        entity_type=row["entity_type"],
        repo=row["repo"],
        number=row.get("number"),
        title=row.get("title") or "",
        url=row.get("url") or "",
        state=row.get("state"),
        labels=list(row.get("labels") or []),
        author=row.get("author"),
        author_association=row.get("author_association"),
        updated_at=iso_time(updated),
        score=round(score, 6),
        dense_rank=dense,
        sparse_rank=sparse,
        snippet=snippet(row.get("text") or "") if with_snippet else "",
    )
    # for the reranker and MMR; not part of the answer
    hit._text = row.get("text") or ""  # type: ignore[attr-defined]
    hit._vector = row.get("vector")  # type: ignore[attr-defined]
    return hit


def snippet(text: str, limit: int = 240) -> str:
    """The chunk's body (without its breadcrumb), on one line."""
    body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
    flat = re.sub(r"\s+", " ", body).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _utc(value: date | datetime | None) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _timestamp(value: datetime) -> str:
    moment = value.astimezone(UTC) if value.tzinfo else value
    return f"TIMESTAMP '{moment.strftime('%Y-%m-%d %H:%M:%S')}'"
