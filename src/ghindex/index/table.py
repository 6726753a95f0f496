"""The LanceDB side of a snapshot: the `chunks` table and the embedding cache.

`chunks` holds one row per chunk with its vector, its text (full-text indexed)
and the metadata filters test. Its schema here is the single source of truth.
The table's schema metadata records the embedding model and the precision of its
vectors (absent: fp32, as before precisions existed); writing vectors of another
model or precision into it is refused, never mixed.

`embeddings_*` maps the sha256 of an embedded text to its vector, one table per model
and precision. It outlives the chunks that produced it, so relabelling an issue,
reordering documents or rebuilding an unchanged repository costs no model calls.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ghindex.config import FP32
from ghindex.errors import IndexUnusable
from ghindex.index.chunking import Chunk

os.environ.setdefault("LANCEDB_LOG", "error")

import lancedb
from lancedb.index import FTS, Bitmap, BTree, IvfHnswSq, IvfPq, LabelList

CHUNKS = "chunks"
EMBEDDINGS_PREFIX = "embeddings_"
MODEL_KEY = b"ghindex.model"
DIMENSION_KEY = b"ghindex.dimension"
PRECISION_KEY = b"ghindex.precision"  # absent: fp32, as written before precisions existed


def _metadata(model: str, dimension: int, precision: str) -> dict[bytes, bytes]:
    return {
        MODEL_KEY: model.encode(),
        DIMENSION_KEY: str(dimension).encode(),
        PRECISION_KEY: precision.encode(),
    }


def chunks_schema(model: str, dimension: int, precision: str = FP32) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("handle", pa.string(), nullable=False),
            pa.field("entity", pa.string(), nullable=False),
            pa.field("entity_type", pa.string(), nullable=False),
            pa.field("repo", pa.string(), nullable=False),
            pa.field("type", pa.string(), nullable=False),
            pa.field("number", pa.int64()),
            pa.field("chunk_index", pa.int32(), nullable=False),
            pa.field("title", pa.string()),
            # the title again on the entity's own first row only (empty on its comments,
            # file diffs and later chunks), full-text indexed so that BM25 weighs a title
            # match (query/search.py) without an item getting a title per comment
            pa.field("head_title", pa.string()),
            pa.field("text", pa.string(), nullable=False),
            # null for the rows search reads by their words alone (`documents.embedded`)
            pa.field("vector", pa.list_(pa.float32(), dimension)),
            pa.field("state", pa.string()),
            pa.field("labels", pa.list_(pa.string())),
            pa.field("author", pa.string()),
            pa.field("author_association", pa.string()),
            pa.field("assignees", pa.list_(pa.string())),
            pa.field("milestone", pa.string()),
            pa.field("path", pa.string()),
            pa.field("created_at", pa.timestamp("us", tz="UTC")),
            pa.field("updated_at", pa.timestamp("us", tz="UTC")),
            pa.field("url", pa.string()),
            pa.field("content_hash", pa.string(), nullable=False),
            # hash of every column a reader sees: rows whose row_hash is unchanged
            # are not rewritten by a rebuild
            pa.field("row_hash", pa.string(), nullable=False),
        ],
        metadata=_metadata(model, dimension, precision),
    )


def embeddings_schema(model: str, dimension: int, precision: str = FP32) -> pa.Schema:
    return pa.schema(
        [
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ],
        metadata=_metadata(model, dimension, precision),
    )


def connect(path: Path) -> lancedb.DBConnection:
    """A connection through the process's one LanceDB session, whose caches of index
    pieces and table metadata are bounded (GHINDEX_INDEX_CACHE_MB): a server reopening
    each new snapshot shares them, instead of keeping a cache per version, and a large
    index is read from disk (the OS's page cache) past the bound instead of held whole."""
    return lancedb.connect(str(path), session=_session())


@functools.cache
def _session() -> lancedb.Session:
    from ghindex.config import env

    size = env("GHINDEX_INDEX_CACHE_MB") * 1024 * 1024
    return lancedb.Session(index_cache_size_bytes=size, metadata_cache_size_bytes=size // 4)


def table_names(db: lancedb.DBConnection) -> list[str]:
    return list(db.list_tables().tables)


def cache_table(model: str, precision: str = FP32) -> str:
    """The embedding cache table of `model`'s vectors of `precision`. fp32 keeps the name
    it had before precisions existed (torch and ONNX Runtime fp32 vectors agree to 2e-7);
    int8 vectors, a different kind, get a table of their own."""
    name = EMBEDDINGS_PREFIX + hashlib.sha256(model.encode("utf-8")).hexdigest()[:16]
    return name if precision == FP32 else f"{name}_{precision}"


def index_model(db: lancedb.DBConnection) -> tuple[str, int] | None:
    """(model, dimension) the chunks were embedded with, or None when there are none."""
    if CHUNKS in table_names(db):
        return _table_model(db.open_table(CHUNKS))
    return None


def index_precision(db: lancedb.DBConnection) -> str | None:
    """The precision of the chunks' vectors, or None when there are none."""
    if CHUNKS not in table_names(db):
        return None
    meta = db.open_table(CHUNKS).schema.metadata or {}
    return meta[PRECISION_KEY].decode() if PRECISION_KEY in meta else FP32


def cache_dimension(db: lancedb.DBConnection, model: str, precision: str = FP32) -> int | None:
    name = cache_table(model, precision)
    if name not in table_names(db):
        return None
    found = _table_model(db.open_table(name))
    return found[1] if found else None


def _table_model(table) -> tuple[str, int] | None:
    meta = table.schema.metadata or {}
    if MODEL_KEY not in meta:
        return None
    return meta[MODEL_KEY].decode(), int(meta[DIMENSION_KEY].decode())


def check_model(db: lancedb.DBConnection, path: Path, model: str, precision: str = FP32) -> None:
    """Refuse to add vectors of another model or precision to the chunks in `db`."""
    built = index_model(db)
    if built and built[0] != model:
        raise IndexUnusable(
            f"the index in {path} was built with model {built[0]!r}, not {model!r}: "
            f"pass --model {built[0]!r}, or --full to rebuild the index with the new model "
            "(cached vectors of both models are kept)"
        )
    held = index_precision(db)
    if held and held != precision:
        raise IndexUnusable(
            f"the index in {path} holds {held} vectors, not {precision}: pass --precision "
            f"{held}, or --full to rebuild the index with {precision} vectors (cached vectors "
            "of both precisions are kept)"
        )


class Vectors(Mapping[str, np.ndarray]):
    """The vectors of a set of content hashes, held in one float32 matrix with a row for
    each hash (made room for once, when the first vectors arrive): a build of a million
    chunks holds 1.5 KB a vector, not an array object per vector. A hash is in the mapping
    once its vector is `put`."""

    def __init__(self, hashes: Iterable[str]) -> None:
        self._rows = {h: i for i, h in enumerate(dict.fromkeys(hashes))}
        self._held = np.zeros(len(self._rows), dtype=bool)
        self._matrix: np.ndarray | None = None

    def put(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Hold `vectors` (a row each) for `hashes`, which must be among this set's."""
        if not len(hashes):
            return
        if self._matrix is None:
            self._matrix = np.zeros((len(self._rows), vectors.shape[1]), dtype=np.float32)
        rows = np.fromiter((self._rows[h] for h in hashes), dtype=np.int64, count=len(hashes))
        self._matrix[rows] = vectors
        self._held[rows] = True

    @property
    def hashes(self) -> list[str]:
        """Every hash of the set, in the order given."""
        return list(self._rows)

    def missing(self) -> list[str]:
        """The hashes without a vector yet, in the order they were given."""
        return [h for h, row in self._rows.items() if not self._held[row]]

    def __getitem__(self, key: str) -> np.ndarray:
        row = self._rows[key]
        if self._matrix is None or not self._held[row]:
            raise KeyError(key)
        return self._matrix[row]

    def __contains__(self, key: object) -> bool:
        row = self._rows.get(key)  # type: ignore[call-overload]
        return row is not None and bool(self._held[row])

    def __iter__(self) -> Iterator[str]:
        return (h for h, row in self._rows.items() if self._held[row])

    def __len__(self) -> int:
        return int(self._held.sum())


CACHE_BATCH = 65_536  # cache rows read at once when looking vectors up


def _with_hashes(rows: pa.Table, hashes: pa.Array) -> pa.Table:
    """The cache rows whose content hash is one of `hashes`."""
    return rows.filter(pc.is_in(rows.column("content_hash"), value_set=hashes))


def cached_vectors(
    db: lancedb.DBConnection,
    model: str,
    hashes: Iterable[str],
    precision: str = FP32,
) -> Vectors:
    """Vectors `model` already computed at `precision` for these content hashes, read
    from the cache `CACHE_BATCH` rows at a time (the cache may hold far more than a build
    needs, and is never read whole)."""
    found = Vectors(hashes)
    name = cache_table(model, precision)
    if name not in table_names(db) or not len(found.hashes):
        return found
    wanted = pa.array(found.hashes, pa.string())
    rows = db.open_table(name).search().select(["content_hash", "vector"]).limit(None)
    for batch in rows.to_batches(CACHE_BATCH):
        batch = _with_hashes(pa.Table.from_batches([batch]), wanted)
        if batch.num_rows:
            flat = batch.column("vector").combine_chunks().values.to_numpy(zero_copy_only=False)
            found.put(batch.column("content_hash").to_pylist(), flat.reshape(batch.num_rows, -1))
    return found


def add_to_cache(
    db: lancedb.DBConnection,
    model: str,
    hashes: Sequence[str],
    vectors: np.ndarray,
    precision: str = FP32,
) -> None:
    if not hashes:
        return
    dimension = vectors.shape[1]
    schema = embeddings_schema(model, dimension, precision)
    batch = pa.table(
        {
            "content_hash": pa.array(hashes, pa.string()),
            "vector": _vector_array(vectors, dimension),
        },
        schema=schema,
    )
    name = cache_table(model, precision)
    if name in table_names(db):
        table = db.open_table(name)
        table.merge_insert("content_hash").when_not_matched_insert_all().execute(batch)
        maintain(table)
    else:
        db.create_table(name, batch, schema=schema)


def write_chunks(
    db: lancedb.DBConnection,
    model: str,
    chunks: Iterable[Chunk],
    vectors: Mapping[str, np.ndarray],
    dimension: int,
    *,
    precision: str = FP32,
    prune: bool = False,
) -> dict[str, int]:
    """Make `chunks` hold exactly these chunks; returns rows inserted/updated/deleted.
    The rows are streamed to LanceDB `WRITE_BATCH` at a time, so the memory a write
    takes is the batch's, not the table's. `prune` compacts the table and drops its
    older versions now (see `maintain`). The caller has checked (`check_model`) that the
    table holds `model`'s `precision`."""
    schema = chunks_schema(model, dimension, precision)
    written = [0]
    rows = pa.RecordBatchReader.from_batches(
        schema, _chunk_batches(chunks, vectors, schema, dimension, written)
    )
    if CHUNKS in table_names(db) and not _same_columns(db.open_table(CHUNKS).schema, schema):
        # written by another ghindex version: recreate it (vectors come from the cache)
        db.drop_table(CHUNKS)
    # a row without a vector (read by its words only) is null, and so is one that is not
    # a vector (NaN): vector search passes over both
    if CHUNKS not in table_names(db):
        table = db.create_table(
            CHUNKS, rows, schema=schema, on_bad_vectors="null", data_storage_version=CHUNKS_FORMAT
        )
        result = {"inserted": written[0], "updated": 0, "deleted": 0}
    else:
        table = db.open_table(CHUNKS)
        merged = (
            table.merge_insert("id")
            .when_matched_update_all(where="target.row_hash != source.row_hash")
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete()
            .execute(rows, on_bad_vectors="null")
        )
        result = {
            "inserted": merged.num_inserted_rows,
            "updated": merged.num_updated_rows,
            "deleted": merged.num_deleted_rows,
        }
    _ensure_indexes(table, prune)
    return result


def _same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    return a.remove_metadata().equals(b.remove_metadata())


# LanceDB's only maintenance call, optimize(), compacts (rewriting every small
# fragment), refreshes indices and prunes old versions together. Run on every build it
# would make each snapshot re-upload the whole table, so it runs when versions or
# fragments pile up, or when much of the table is missing from the full-text index
# (those rows are still found, by a slower scan). Between runs a build adds only its
# own new files.
MAINTAIN_VERSIONS = 24
MAINTAIN_FRAGMENTS = 32
REINDEX_SHARE = 0.10


# Below this many chunks an exact scan is fast enough (bench/README.md: ~1.2 µs a
# chunk); above it an IVF index answers in a few ms, and search re-scores its
# candidates with exact distances (`Searcher._knn`).
VECTOR_INDEX_ROWS = 50_000
PARTITION_ROWS = 4_096  # rows per IVF partition the index is trained for
# The IVF and PQ training differ from build to build, and so do their misses: at 1M
# rows three builds gave recall@10 0.906–0.958 with 10 % probed and 5× re-scoring, and
# 0.978–0.996 with 20 % and 8× (bench/README.md, "1M rows"), for ~2 ms a query. Over
# 100 queries (not 50) one 1M build gave 0.945 at 8× and 0.967 at 12× (+3.6 ms), its
# misses in the codes' ranking (more partitions probed found none); a 300k build
# missed through its partitions instead: 0.948 with 20 of 73 probed, 0.977 with 32.
PROBED_SHARE = 0.20  # of the partitions a query searches
MIN_PROBES = 32
REFINE_FACTOR = 12  # exact distances over 12× the rows asked for (PQ codes only rank)

# What filters and the exact-reference lookup read, indexed once the table is large
# enough for a scan of these columns to cost more than the index's upkeep: a BTree
# where values are many (identifiers, people, times), a bitmap where they are few, a
# label list for lists matched by `array_has_any`.
SCALAR_INDEX_ROWS = 20_000
SCALAR_INDEXES: dict[str, type] = {
    "handle": BTree,
    "entity": BTree,
    "repo": BTree,
    "number": BTree,
    "author": BTree,
    "updated_at": BTree,
    "type": Bitmap,
    "entity_type": Bitmap,
    "state": Bitmap,
    "labels": LabelList,
}


FTS_COLUMNS = ("text", "head_title")  # the full-text indexes, each of one column


def _ensure_indexes(table, prune: bool = False) -> None:
    indices = table.list_indices()
    fts = [i for i in indices if i.index_type == "FTS"]
    for column in FTS_COLUMNS:
        if not any(column in i.columns for i in fts):
            table.create_index(column, config=FTS(with_position=False))
    ensure_vector_index(table)
    ensure_scalar_indexes(table, {c for i in indices for c in i.columns})
    maintain(table, unindexed=(fts[0].num_unindexed_rows or 0) if fts else 0, force=prune)


def ensure_scalar_indexes(
    table, indexed: set[str] | None = None, min_rows: int | None = None
) -> list[str]:
    """The filter columns' indexes, made once the table holds `min_rows`: new rows are
    searched unindexed until `maintain` folds them in. Returns the columns indexed now."""
    if indexed is None:
        indexed = {c for i in table.list_indices() for c in i.columns}
    todo = [c for c in SCALAR_INDEXES if c not in indexed]
    if not todo or table.count_rows() < (SCALAR_INDEX_ROWS if min_rows is None else min_rows):
        return []
    for column in todo:
        table.create_index(column, config=SCALAR_INDEXES[column]())
    return todo


def has_vector_index(table) -> bool:
    return any(i.columns == ["vector"] for i in table.list_indices())


def ensure_vector_index(table, min_rows: int = VECTOR_INDEX_ROWS) -> bool:
    """Build the ANN index once the table is large enough; True when one exists."""
    if has_vector_index(table):
        return True
    rows = table.count_rows()
    if rows < min_rows:
        return False
    dimension = table.schema.field("vector").type.list_size
    table.create_index("vector", config=vector_config(rows, dimension, VECTOR_INDEX))
    return True


# IVF_PQ keeps a 48-byte code a row where IVF_HNSW_SQ kept ~480 bytes (codes and graph):
# at 1M rows a searching process holds 0.6 GB instead of 1.15, and with 5× exact
# re-scoring answers sooner at a higher recall (bench/README.md, "1M rows").
VECTOR_INDEX = "IVF_PQ"


def vector_config(rows: int, dimension: int, kind: str = VECTOR_INDEX) -> IvfPq | IvfHnswSq:
    if kind == "IVF_PQ":  # 8 bits of code per 8 dimensions, where they divide evenly
        sub = dimension // 8 if dimension % 8 == 0 else None
        return IvfPq(distance_type="cosine", num_partitions=partitions(rows), num_sub_vectors=sub)
    return IvfHnswSq(distance_type="cosine", num_partitions=partitions(rows))


def partitions(rows: int) -> int:
    return max(1, round(rows / PARTITION_ROWS))


def probes(rows: int) -> int:
    """Partitions a query searches in an index of `rows` rows (more as the table grows:
    a fixed number searches an ever smaller share of it, and recall falls)."""
    return min(partitions(rows), max(MIN_PROBES, math.ceil(PROBED_SHARE * partitions(rows))))


def prune_caches(db: lancedb.DBConnection, keep: Iterable[str]) -> int:
    """Every embedding cache reduced to the vectors of `keep` (content hashes), its older
    versions dropped: after stored text was redacted in place, the cache still maps the
    raw texts' hashes to their vectors, and a vector can be inverted back into much of
    its text. The vectors dropped are made again if their text comes back. Returns how
    many were dropped."""
    wanted = pa.array(sorted(set(keep)), pa.string())
    dropped = 0
    for name in table_names(db):
        if not name.startswith(EMBEDDINGS_PREFIX):
            continue
        table = db.open_table(name)
        rows = table.to_arrow()
        kept = _with_hashes(rows, wanted)
        if kept.num_rows == rows.num_rows:
            continue
        dropped += rows.num_rows - kept.num_rows
        table.add(kept, mode="overwrite")
        maintain(table, force=True)
    return dropped


def maintain(table, *, unindexed: int = 0, force: bool = False) -> bool:
    """Compact, reindex and prune the table when it is due; True when it ran."""
    stats = table.stats()
    due = (
        force
        or len(table.list_versions()) > MAINTAIN_VERSIONS
        or stats["fragment_stats"]["num_fragments"] > MAINTAIN_FRAGMENTS
        or unindexed > REINDEX_SHARE * max(stats["num_rows"], 1)
    )
    if due:
        with warnings.catch_warnings():
            # it warns that readers of older versions would fail: a build is the only
            # writer and reader of its workdir's tables
            warnings.simplefilter("ignore", UserWarning)
            table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
    return due


WRITE_BATCH = 8_192  # rows converted and handed to LanceDB at once
# The chunks table's Lance file format. Searching reads each hit's row whole by row id,
# and 2.0 files answer that from little metadata: at 1M rows a newer format's page
# metadata outgrows the session's metadata cache, and a read of 10 rows takes 18 ms
# instead of 5, while the cache takes 0.4 GB more. Text is stored uncompressed: the
# table is about a quarter larger on real repositories (bench/README.md, "1M rows").
CHUNKS_FORMAT = "2.0"


def _chunk_batches(
    chunks: Iterable[Chunk],
    vectors: Mapping[str, np.ndarray],
    schema: pa.Schema,
    dimension: int,
    written: list[int],
) -> Iterator[pa.RecordBatch]:
    """The rows of `chunks`, `WRITE_BATCH` at a time; `written[0]` counts them."""
    batch: list[Chunk] = []
    for chunk in chunks:
        batch.append(chunk)
        if len(batch) == WRITE_BATCH:
            written[0] += len(batch)
            yield _chunk_rows(batch, vectors, schema, dimension)
            batch = []
    if batch:
        written[0] += len(batch)
        yield _chunk_rows(batch, vectors, schema, dimension)


def _chunk_rows(
    chunks: Sequence[Chunk], vectors: Mapping[str, np.ndarray], schema: pa.Schema, dimension: int
) -> pa.RecordBatch:
    held = [vectors.get(c.content_hash) for c in chunks]
    matrix = np.zeros((len(chunks), dimension), dtype=np.float32)
    for row, vector in enumerate(held):
        if vector is not None:
            matrix[row] = vector
    absent = pa.array([v is None for v in held], pa.bool_())
    docs = [c.document for c in chunks]
    columns = {
        "id": [c.id for c in chunks],
        "handle": [d.handle for d in docs],
        "entity": [d.entity for d in docs],
        "entity_type": [d.entity_type for d in docs],
        "repo": [d.repo for d in docs],
        "type": [d.type for d in docs],
        "number": [d.number for d in docs],
        "chunk_index": [c.index for c in chunks],
        "title": [d.title for d in docs],
        "head_title": [
            (d.title or "") if d.handle == d.entity and c.index == 0 else ""
            for c, d in zip(chunks, docs, strict=True)
        ],
        "text": [c.text for c in chunks],
        "vector": _vector_array(matrix, dimension, absent),
        "state": [d.state for d in docs],
        "labels": [list(d.labels) for d in docs],
        "author": [d.author for d in docs],
        "author_association": [d.author_association for d in docs],
        "assignees": [list(d.assignees) for d in docs],
        "milestone": [d.milestone for d in docs],
        "path": [d.path for d in docs],
        "created_at": [d.created_at for d in docs],
        "updated_at": [d.updated_at for d in docs],
        "url": [d.url for d in docs],
        "content_hash": [c.content_hash for c in chunks],
    }
    visible = [values for name, values in columns.items() if name != "vector"]
    columns["row_hash"] = [_row_hash(row) for row in zip(*visible, strict=True)]
    return pa.record_batch(
        [
            pa.array(values, schema.field(name).type) if name != "vector" else values
            for name, values in columns.items()
        ],
        schema=schema,
    )


def _row_hash(values: tuple) -> str:
    encoded = json.dumps(values, default=str, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def _vector_array(
    matrix: np.ndarray, dimension: int, absent: pa.BooleanArray | None = None
) -> pa.FixedSizeListArray:
    """The rows of `matrix` as vectors, null where `absent` says so."""
    flat = pa.array(np.ascontiguousarray(matrix, dtype=np.float32).ravel(), pa.float32())
    return pa.FixedSizeListArray.from_arrays(flat, dimension, mask=absent)
