"""Search over the `chunks` table: dense kNN and BM25 retrievers, exact identifiers,
an optional cross-encoder rerank and MMR diversity, and time-ordered scans.

Results are entities (an issue with its comments and reviews, a commit with its
per-file diffs, a doc). Each retriever ranks chunks; `fusion.py` collapses and fuses
the rankings, and the best hit's nearest items of other types (the build's lists) score
at least its score times their cosine to it. Filters are applied inside both retrievers
(prefiltering), never after the top k is cut. A query that is an identifier (`#123`,
`owner/repo#12`, a commit SHA or prefix, a handle, a file path) is resolved exactly
first, and ranked results fill the rest.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lancedb.query import MatchQuery

from ghindex.errors import GhindexError, IndexUnusable, SnapshotError, first_line
from ghindex.index import nearest as near_lists
from ghindex.index import table as index
from ghindex.index.carried_encoder import query_encoder
from ghindex.query.filters import MODES, SORTS, Filters, Spellings, literal, spellings
from ghindex.query.fusion import cap_types, diversify, fuse, group, same_entity
from ghindex.query.hits import Hit, SearchResponse, make_hit, snippet
from ghindex.state.database import LOCK_WAIT
from ghindex.vocabulary.handles import ISSUE_REF, PATHLIKE, SHA, item_handle
from ghindex.vocabulary.layout import MANIFEST, STATE_FILE, local_manifest
from ghindex.vocabulary.limits import number_or_none

if TYPE_CHECKING:
    import duckdb

StateConnection = Callable[[], AbstractContextManager["duckdb.DuckDBPyConnection"]]

RERANK_CANDIDATES = 30
# BM25 narrowed by one filter group asks for this many times the rows the other groups
# are expected to let through (as if independent), and at most SPARSE_MOST rows
SPARSE_MARGIN = 1.5
SPARSE_MOST = 3_000
# the filter predicates whose passing row ids a searcher keeps, the last used (8 bytes a
# row that passes: at most 8 MB each at 1M rows); listing them once costs a scan of the
# predicate's rows (about 0.3 s for a third of 1M rows, bench/README.md)
PASSING_SETS = 8
DEPTH = (100, 10)  # rows each retriever ranks: at least the first, and the second per k
LINK_SOURCES = 20  # the best fused entities whose closing links lift their other end
LINK_WEIGHT = 0.98  # share of a hit's score given to what closes it or what it closes
# the best hit's nearest items of other types score at least this × its score × their
# cosine to it (`lift_nearest`); 0.9 to 1.2 gave the same on every eval set (#34)
NEAR_WEIGHT = 1.0
NEAREST_FILES = 64  # nearest-list files (a few hundred entities each) a searcher keeps read
# BM25 weighs a word of an item's title (`head_title`) twice a word of its text: the
# title says what the item is about, and a question is often worded like one (#34)
TITLE_BOOST = 2.0
_COLUMNS = [
    "id",
    "handle",
    "entity",
    "entity_type",
    "repo",
    "type",
    "number",
    "title",
    "text",
    "state",
    "labels",
    "author",
    "author_association",
    "url",
    "updated_at",
    "created_at",
    "vector",
]
_NO_VECTOR = [c for c in _COLUMNS if c != "vector"]  # the vectors only serve MMR
# what the retrievers read: enough to fuse (rows are told apart by row id) and to cap
# types; the hits kept are read whole by row id. A column costs ~1 ms per 100 rows at 1M.
_LIGHT = ["handle", "entity", "entity_type", "type"]
# one row per entity: the first chunk of its own document (a commit's: of any file)
_HEAD = "chunk_index = 0 AND (type = entity_type OR entity_type = 'commit')"


class Searcher:
    """The retrievers over one Lance `chunks` table. Opens the index once; loads the
    embedding model (of the index's precision) on the first dense query and the
    cross-encoder on the first reranked one. `state` gives a connection to the state
    database for a request (to say what fixed an issue); without it the state beside the
    index is opened per request. The snapshot owns the connections: see
    `query/snapshot.py`."""

    def __init__(
        self,
        lance_path: Path,
        *,
        embedder_factory: Callable[[str, str], Any] | None = None,
        reranker_factory: Callable[[], Any] | None = None,
        state: StateConnection | None = None,
        link_weight: float = LINK_WEIGHT,
        near_weight: float = NEAR_WEIGHT,
    ) -> None:
        self.link_weight = link_weight  # 0: rank by text alone (the eval harness compares)
        self.near_weight = near_weight  # 0: no nearest items lifted (bench/eval_replay.py)
        if not Path(lance_path).is_dir():  # connecting would make it: a reader makes nothing
            raise IndexUnusable(f"no index at {lance_path}: run `ghindex build` first")
        db = index.connect(lance_path)
        if index.CHUNKS not in index.table_names(db):
            raise IndexUnusable(f"no index at {lance_path}: run `ghindex build` first")
        self.table = db.open_table(index.CHUNKS)
        # probes and refinement grow with the table (see `index.probes`); no index: exact
        self._rows = self.table.count_rows()
        self._probes = index.probes(self._rows) if index.has_vector_index(self.table) else 0
        model = index.index_model(db)
        self.model_name = model[0] if model else None
        self.precision = index.index_precision(db)  # queries are embedded alike
        # the query encoder the index carries (else the installed model's): the same
        # model and precision as the vectors (`index/carried_encoder.py`)
        self._embedder_factory = embedder_factory or functools.partial(query_encoder, lance_path)
        self._embedder: Any = None
        self._loading = threading.Lock()
        self._reranker_factory = reranker_factory
        self._reranker: Any = None
        if state is None and (Path(lance_path).parent / STATE_FILE).exists():
            state = functools.partial(_state_beside, Path(lance_path).parent / STATE_FILE)
        self.state = state  # None: no state beside the index, so hits are not annotated
        self._lance_path = Path(lance_path)
        self._near_file: Callable[[str], Path] | None = None  # entity -> its list's file
        self._near_lists = functools.lru_cache(maxsize=NEAREST_FILES)(near_lists.lists)
        self._counts: dict[str, int] = {}  # rows a filter predicate lets through
        self._passing_sets: dict[str, Any] = {}  # predicate -> its sorted row ids (see _passing)
        self._listing = threading.Lock()
        self._spellings: dict[str, dict[str, tuple[str, ...]]] = {}  # column -> (see filters)
        # BM25 runs beside the query's embedding and kNN: both release the GIL
        self._beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ghindex-sparse")
        # and the titles' BM25 beside the text's (a pool of its own: a sparse job waits on it)
        self._title_side = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ghindex-title")
        # an index built before titles had a full-text index of their own: text alone
        self._titles = any(
            i.index_type == "FTS" and "head_title" in i.columns for i in self.table.list_indices()
        )

    def close(self) -> None:
        """Let the helper threads go."""
        self._beside.shutdown(wait=False)
        self._title_side.shutdown(wait=False)

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
        groups = filters.groups(self._spelled(filters))
        where = " AND ".join(groups) or None

        exact = self._exact(query.strip(), where) if _may_be_identifier(query) else []
        depth = max(DEPTH[0], DEPTH[1] * k)
        columns = _COLUMNS if mmr is not None else _NO_VECTOR
        sparse_job = None
        if mode == "hybrid":
            sparse_job = self._beside.submit(self._sparse, query, groups, depth)
        dense = self._dense(query, where, depth) if mode != "sparse" else []
        if sparse_job is not None:
            sparse = sparse_job.result()
        else:
            sparse = self._sparse(query, groups, depth) if mode == "sparse" else []
        ranked = fuse(dense, sparse, mode)
        if mode == "hybrid" and self.near_weight and ranked:
            ranked = self._lift_nearest(ranked, where, response)
        # one state query: the closing links of the best hits and of their other ends
        asked = [h.entity for h in exact + ranked[: max(LINK_SOURCES, k)]]
        links, merges = self._links_around(asked)
        if mode == "hybrid" and self.link_weight and links:
            ranked = follow_links(ranked, links, self._heads, where, self.link_weight, merges)
        ranked = [h for h in ranked if h.entity not in {e.entity for e in exact}]
        if mode == "hybrid":
            ranked = cap_types(ranked)
        # read whole only the hits that are shown, reranked or diversified
        kept = max(RERANK_CANDIDATES, 3 * k) if rerank or mmr is not None else k
        ranked[:kept] = self._whole(ranked[:kept], columns)
        if rerank:
            ranked = self._rerank(query, ranked, k, response)
        if mmr is not None:
            ranked = diversify(ranked, mmr, k)
        response.results = (exact + ranked)[:k]
        for hit in response.results:
            hit.snippet = hit.snippet or snippet(hit.text, query=query)
        self._annotate(response.results, links)
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
        chosen = filters.where(self._spelled(filters))
        where = f"{_HEAD} AND {chosen}" if chosen else _HEAD
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
        response.results = [make_hit(row, 0.0, None, None) for row in heads[:k]]
        self._annotate(response.results)
        return response, len(heads) > k

    def created(self, entities: list[str]) -> dict[str, str]:
        """When each entity was created: its own first chunk's `created_at`, as a scan sorts."""
        if not entities:
            return {}
        listed = ", ".join(literal(e) for e in entities)
        rows = self.table.search().where(f"entity IN ({listed}) AND {_HEAD}")
        rows = rows.select(["entity", "created_at"]).limit(None).to_list()
        return {
            r["entity"]: r["created_at"].isoformat() for r in rows if r["created_at"] is not None
        }

    def nearest(self, entity: str, k: int = 10) -> list[dict[str, Any]]:
        """Entities whose text is closest to `entity`'s (the mean of its chunk vectors)."""
        import numpy as np

        own = self.table.search().where(f"entity = {literal(entity)}").select(["vector"])
        vectors = [row["vector"] for row in own.limit(500).to_list() if row["vector"] is not None]
        if not vectors:
            return []
        centre = np.mean(np.stack(vectors), axis=0)
        centre = centre / (np.linalg.norm(centre) or 1.0)
        rows = (
            self._knn(centre)
            .where(f"entity != {literal(entity)}", prefilter=True)
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

    def _dense(self, query: str, where: str | None, depth: int) -> list[dict[str, Any]]:
        with self._loading:  # concurrent first queries load (or export) the model once
            if self._embedder is None:
                self._embedder = self._embedder_factory(self.model_name, self.precision)
        search = self._knn(self._embedder.encode([query])[0])
        if where:
            search = search.where(where, prefilter=True)
        rows = search.select(_LIGHT).with_row_id(True).limit(depth).to_list()
        for row in rows:
            row["_score"] = 1.0 - float(row.pop("_distance"))
        return rows

    def _knn(self, vector: Any) -> Any:
        """A cosine kNN query, through the vector index when there is one."""
        search = self.table.search(vector, query_type="vector").distance_type("cosine")
        if self._probes:
            search = search.nprobes(self._probes).refine_factor(index.REFINE_FACTOR)
        return search

    def _sparse(self, query: str, groups: list[str], depth: int) -> list[dict[str, Any]]:
        """The `depth` best rows by BM25 that pass every filter group, with the columns
        fusion reads (`_LIGHT`). With two groups or more on a large table, the full-text
        search is narrowed by the group that lets the fewest rows through, and the others
        are tested in memory on the row ids it ranks (see `_passing`): LanceDB narrows by
        one indexed filter in a few ms but by the AND of two in tens of ms, and testing
        the ranked rows in the table reads each at random (at 1M rows, bench/README.md).
        The rows kept are the same as with every group applied first, in the same order
        (the scores do not depend on the filter); when too few pass, it asks again with
        every group applied."""
        return self._light(self._ranked_sparse(query, groups, depth))

    def _ranked_sparse(self, query: str, groups: list[str], depth: int) -> list[dict[str, Any]]:
        import numpy as np

        where = " AND ".join(groups) or None
        groups = list(dict.fromkeys(groups))  # a filter given twice tests the same
        if len(groups) < 2 or self._rows < index.SCALAR_INDEX_ROWS:
            return self._bm25(query, where, depth)
        fewest = min(range(len(groups)), key=lambda i: self._matching(groups[i]))
        first, rest = groups[fewest], groups[:fewest] + groups[fewest + 1 :]
        passing = math.prod(self._matching(g) / max(self._rows, 1) for g in rest)
        asked = math.ceil(depth / max(passing, 1e-9) * SPARSE_MARGIN)
        if asked > SPARSE_MOST:  # the other groups let too little through: narrow by all
            return self._bm25(query, where, depth)
        ranked = self._bm25(query, first, asked)
        ids = np.fromiter((r["_rowid"] for r in ranked), dtype=np.uint64, count=len(ranked))
        kept = np.ones(len(ids), dtype=bool)
        for predicate in rest:
            kept &= _among(ids, self._passing(predicate))
        if kept.sum() < depth and len(ranked) == asked:  # more may pass further down
            return self._bm25(query, where, depth)
        return [row for row, passes in zip(ranked, kept, strict=True) if passes][:depth]

    def _light(self, ranked: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`ranked` (row ids and scores) with the columns fusion reads, in one read by
        row id: cheaper than each full-text search reading them for its own list."""
        if not ranked:
            return []
        found = self._by_row_id([r["_rowid"] for r in ranked], _LIGHT)
        return [{**found[r["_rowid"]], "_score": r["_score"]} for r in ranked]

    def _by_row_id(self, row_ids: list[int], columns: list[str]) -> dict[int, dict[str, Any]]:
        """The rows of `row_ids` with `columns`, by row id: one read, not a scan."""
        rows = self.table.take_row_ids(row_ids).select(columns).with_row_id().to_list()
        return {row["_rowid"]: row for row in rows}

    def _passing(self, predicate: str) -> Any:
        """The sorted row ids `predicate` lets through, listed once per searcher (the
        table stays at the version it was opened at, so its row ids do not move) and
        kept for the PASSING_SETS predicates used last."""
        import numpy as np

        with self._listing:
            found = self._passing_sets.pop(predicate, None)
            if found is None:
                # a narrow column to read: LanceDB scans the whole table when none is asked
                rows = self.table.search().where(predicate).select(["chunk_index"])
                listed = rows.with_row_id(True).limit(None).to_arrow()["_rowid"]
                found = np.sort(listed.to_numpy())
            self._passing_sets[predicate] = found  # the last used, last
            while len(self._passing_sets) > PASSING_SETS:
                del self._passing_sets[next(iter(self._passing_sets))]
            return found

    def _bm25(self, query: str, where: str | None, depth: int) -> list[dict[str, Any]]:
        """The row ids and scores of the `depth` best rows by BM25, a row scored by the
        better of its text and TITLE_BOOST times its title: LanceDB's MultiMatchQuery,
        whose two column searches it runs one after the other, here run side by side
        (see `by_title`)."""
        if not self._titles:
            return self._match(query, "text", where, depth)
        titled = self._title_side.submit(self._match, query, "head_title", where, depth)
        return by_title(self._match(query, "text", where, depth), titled.result(), depth)

    def _match(
        self, query: str, column: str, where: str | None, depth: int
    ) -> list[dict[str, Any]]:
        # a MatchQuery takes the words as they are: no query syntax, so "--full",
        # "a AND b" or "foo:bar" are searched for, not interpreted
        search = self.table.search(MatchQuery(query, column), query_type="fts")
        if where:
            search = search.where(where, prefilter=True)
        return search.select(["_rowid"]).with_row_id(True).limit(depth).to_list()

    def _matching(self, predicate: str) -> int:
        """How many rows `predicate` lets through (counted once per searcher: the table
        stays at the version it was opened at)."""
        if predicate not in self._counts:
            self._counts[predicate] = self.table.count_rows(predicate)
        return self._counts[predicate]

    def _whole(self, hits: list[Hit], columns: list[str]) -> list[Hit]:
        """The hits again, made from all of their rows' `columns` (scores, ranks, the
        entity's other rows and what lifted it kept). One read by row id, not a scan."""
        light = {h.row_id: h for h in hits if h.row_id is not None}
        if not light:
            return hits
        whole = {}
        for row in self._by_row_id(list(light), columns).values():
            was = light[row["_rowid"]]
            hit = make_hit(row, was.score, was.dense_rank, was.sparse_rank, with_snippet=False)
            hit.same_entity, hit.near = was.same_entity, was.near
            whole[row["_rowid"]] = hit
        return [whole.get(h.row_id, h) if h.row_id is not None else h for h in hits]

    def _exact(self, query: str, where: str | None) -> list[Hit]:
        """Entities the query names outright: `#12`, `owner/repo#12`, a SHA, a handle, a path."""
        tests = [f"handle = {literal(query)}", f"entity = {literal(query)}"]
        issue = ISSUE_REF.match(query)
        if issue and number_or_none(issue.group(2)) is not None:  # a bigger one names nothing
            repo, number = issue.groups()
            tests.append(
                f"entity = {literal(item_handle(repo, number))}"
                if repo
                else f"(number = {int(number)} AND entity LIKE {literal(f'%#{number}')})"
            )
        if SHA.match(query.lower()):
            tests.append(
                f"(entity_type = 'commit' AND entity LIKE {literal(f'%@{query.lower()}%')})"
            )
        if PATHLIKE.match(query) and " " not in query:
            tests.append(f"(path = {literal(query)} OR path LIKE {literal(f'%/{query}')})")
        predicate = "(" + " OR ".join(tests) + ")"
        if where:
            predicate = f"{predicate} AND {where}"
        rows = self.table.search().where(predicate).select(_COLUMNS).limit(200).to_list()
        if not rows:
            return []
        hits = []
        for entity_rows in group(rows).values():
            best = min(entity_rows, key=lambda r: (r["type"] != r["entity_type"], r["id"]))
            hit = make_hit(best, 1.0, None, None)
            hit.exact = True
            hit.same_entity = same_entity(entity_rows, best, lambda _r: 1.0)
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
            scores = self._reranker.score(query, [h.text for h in head])
        except RerankUnavailable as exc:
            response.notes.append(f"rerank skipped: {exc}")
            return ranked
        for hit, score in zip(head, scores, strict=True):
            hit.rerank_score = round(float(score), 6)
        head.sort(key=lambda h: -(h.rerank_score or 0.0))
        return head + ranked[len(head) :]

    def listed_near(self, entity: str) -> list[tuple[str, str, float]]:
        """The nearest items the build listed for `entity`, (handle, type, cosine) nearest
        first, from the lists the manifest beside the index names (read once per file,
        the last NEAREST_FILES kept); none when it names none. A manifest entry or file
        that ghindex cannot read is refused in one line (SnapshotError)."""
        if self._near_file is None:
            listed = (local_manifest(self._lance_path.parent / MANIFEST) or {}).get("nearest")
            self._near_file = near_lists.locate(self._lance_path, listed) or (lambda e: None)
        path = self._near_file(entity)
        return self._near_lists(path).of(entity) if path is not None else []

    def _lift_nearest(
        self, ranked: list[Hit], where: str | None, response: SearchResponse
    ) -> list[Hit]:
        try:
            near = self.listed_near(ranked[0].entity)
        except SnapshotError as exc:
            response.notes.append(f"ranked without the best hit's nearest items: {first_line(exc)}")
            return ranked
        return lift_nearest(ranked, near, self._heads, where, self.near_weight)

    def _links(self, entities: list[str]) -> dict[str, dict[str, list[str]]]:
        """What closes each entity and what it closes (empty without a state)."""
        if not entities or self.state is None:
            return {}
        from ghindex.query.graph import fix_links

        with self.state() as con:
            return fix_links(con, entities)

    def _links_around(
        self, entities: list[str]
    ) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[str]]]:
        """The closing links of `entities` and of their other ends, and the merge commit
        of each pull request among all of them: one state connection (empty without a
        state)."""
        if not entities or self.state is None:
            return {}, {}
        from ghindex.query.graph import fix_links, merge_commits

        with self.state() as con:
            links = fix_links(con, entities, around=True)
            return links, merge_commits(con, list(links))

    def _heads(self, entities: list[str], where: str | None) -> list[Hit]:
        """A hit for each of `entities` the filters let through, by its first row, with
        the columns the retrievers read (`_LIGHT`): the hits shown are read whole later
        by row id (`_whole`), and the text of the others is not read (5.4 -> 3.4 ms for
        7 entities at 300k rows)."""
        listed = ", ".join(literal(e) for e in entities)
        predicate = f"entity IN ({listed}) AND {_HEAD}" + (f" AND {where}" if where else "")
        search = self.table.search().where(predicate).select(_LIGHT).with_row_id(True)
        rows = search.limit(None).to_list()
        return [
            make_hit(entity_rows[0], 0.0, None, None, with_snippet=False)
            for entity_rows in group(rows).values()
        ]

    def _annotate(
        self, hits: Sequence[Hit], known: dict[str, dict[str, list[str]]] | None = None
    ) -> None:
        """Which pull requests fixed an issue, which issues a pull request closes."""
        known = known or {}
        links = {**known, **self._links([h.entity for h in hits if h.entity not in known])}
        if not links:
            return
        for hit in hits:
            found = links.get(hit.entity) or {}
            hit.fixed_by = list(found.get("fixed_by", []))
            hit.closes = list(found.get("closes", []))

    def _spelled(self, filters: Filters) -> Spellings:
        """The spellings the index holds of the values of each column the filters match in
        any case (labels, states): read once, from one row per entity. The table stays at
        the version it was opened at, so they stay true."""
        missing = sorted(filters.folded_columns() - self._spellings.keys())
        if missing:
            import pyarrow as pa
            import pyarrow.compute as pc

            rows = self.table.search().where(_HEAD).select(missing).limit(None).to_arrow()
            for column in missing:
                values = rows[column]
                if pa.types.is_list(values.type):
                    values = pc.list_flatten(values)
                self._spellings[column] = spellings(pc.unique(values).to_pylist())
        return self._spellings

    def _unmatched(self, filters: Filters) -> list[str]:
        """Filter values that match nothing at all in the index (e.g. a misspelt repo)."""
        unmatched = []
        for name, value, predicate in filters.clauses(self._spelled(filters)):
            test = predicate.removeprefix("NOT ") if name == "not_label" else predicate
            if self._matching(test) == 0:
                unmatched.append(f"{name}={value}")
        return unmatched


def follow_links(
    ranked: list[Hit],
    links: dict[str, dict[str, list[str]]],
    heads: Callable[[list[str], str | None], list[Hit]],
    where: str | None,
    weight: float = LINK_WEIGHT,
    merges: dict[str, list[str]] | None = None,
) -> list[Hit]:
    """Lift the pull request that fixed a found issue, and the issue a found pull request
    closes, to just below it: an entity at the other end of a closing link from one of the
    LINK_SOURCES best hits scores at least `weight` × that hit's score (entities not found
    yet join the ranking). A lifted pull request brings its merge commit (`merges`: the
    same change, as a commit) just below itself. A question about a problem is answered
    with its fix beside it, and one about a change with what it was for."""
    lift: dict[str, float] = {}
    for hit in ranked[:LINK_SOURCES]:
        found = links.get(hit.entity) or {}
        for other in [*found.get("fixed_by", ()), *found.get("closes", ())]:
            if other != hit.entity:
                lift[other] = max(lift.get(other, 0.0), weight * hit.score)
    for pull, score in list(lift.items()):
        for commit in (merges or {}).get(pull, ()):
            lift[commit] = max(lift.get(commit, 0.0), weight * score)
    return _at_least(ranked, lift, heads, where)


def _at_least(
    ranked: list[Hit],
    floors: dict[str, float],
    heads: Callable[[list[str], str | None], list[Hit]],
    where: str | None,
    near: str | None = None,
) -> list[Hit]:
    """`ranked` (best first) with each entity of `floors` scoring at least its floor:
    those not ranked yet join when the filters (`where`) let them through (`heads`);
    one raised by a nearest-items lift says from where (`near`). Equal scores: the
    entity with more evidence of its own first."""
    present = {h.entity for h in ranked}
    missing = [e for e in floors if e not in present]
    joined = heads(missing, where) if missing else []
    own = {h.entity: h.score for h in ranked}
    for hit in [*ranked, *joined]:
        if floors.get(hit.entity, 0.0) > hit.score:
            hit.score = round(floors[hit.entity], 6)
            hit.near = near or hit.near
    return sorted([*ranked, *joined], key=lambda h: (-h.score, -own.get(h.entity, 0.0)))


def lift_nearest(
    ranked: list[Hit],
    near: Sequence[tuple[str, str, float]],
    heads: Callable[[list[str], str | None], list[Hit]],
    where: str | None,
    weight: float = NEAR_WEIGHT,
) -> list[Hit]:
    """`ranked` (best first), where each of the best hit's nearest items (`near`:
    handle, type, cosine) of another type than its own scores at least `weight` × its
    score × the cosine; items not found yet join the ranking when the filters (`where`)
    let them through. A question worded like an issue finds the issue first, and the
    pull request that fixed it is among the issue's nearest items though its words
    differ; one worded like a change finds it, and the issue it was for. At least, not
    plus: adding the lift to what an item scored itself moved items above the best hit
    (MRR on httpx 0.744 -> 0.674); items of the best hit's own type are not lifted: near
    copies of it took places from the answer (bench/README.md, #34). A closing link
    lifts by LINK_WEIGHT (0.98) of its source's score, so a cosine below that keeps a
    found issue's fix above its merely similar items."""
    top = ranked[0]
    gain = {
        handle: weight * top.score * cosine
        for handle, kind, cosine in near
        if kind != top.entity_type and handle != top.entity and cosine > 0
    }
    return _at_least(ranked, gain, heads, where, near=top.entity) if gain else ranked


def by_title(
    texts: list[dict[str, Any]],
    titles: list[dict[str, Any]],
    depth: int,
    boost: float = TITLE_BOOST,
) -> list[dict[str, Any]]:
    """The `depth` best of two BM25 lists, a row scored by the better of its text score
    and `boost` times its title score: what LanceDB's MultiMatchQuery returns from the
    same two lists (checked on every query of bench_scale's 1M-row table), equal scores
    in row order. `boost` is TITLE_BOOST but for bench/eval_replay.py."""
    best: dict[int, dict[str, Any]] = {}
    for row, weight in [*((r, 1.0) for r in texts), *((r, boost) for r in titles)]:
        score = weight * row["_score"]
        kept = best.get(row["_rowid"])
        if kept is None or score > kept["_score"]:
            best[row["_rowid"]] = {**row, "_score": score}
    return sorted(best.values(), key=lambda r: (-r["_score"], r["_rowid"]))[:depth]


def _among(ids: Any, allowed: Any) -> Any:
    """Which of `ids` are in the sorted array `allowed` (a lookup each, not a sort)."""
    import numpy as np

    if not len(allowed):
        return np.zeros(len(ids), dtype=bool)
    at = np.minimum(np.searchsorted(allowed, ids), len(allowed) - 1)
    return allowed[at] == ids


def _may_be_identifier(query: str) -> bool:
    """Only a query without spaces can name an item (handles and paths have none)."""
    text = query.strip()
    return bool(text) and not any(c.isspace() for c in text)


@contextlib.contextmanager
def _state_beside(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the state database beside an index, for one request
    (waiting out a writer, refusing a schema this ghindex cannot read)."""
    from ghindex.query.sql import connect

    con = connect(path, wait=LOCK_WAIT, check=True)
    try:
        yield con
    finally:
        con.close()
