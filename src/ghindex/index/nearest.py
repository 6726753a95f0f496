"""Each entity's nearest entities by text, listed at build time in `lance/nearest/`.

An entity's vector is the mean of its chunks' vectors, normalised; its neighbours are
the `K` other entities with the highest cosine between those vectors (ties to the
entity met first): exactly up to `EXACT_ENTITIES` entities, and above that from
candidates found by clustering (below). `ghindex related` answers from this
file with DuckDB: neither LanceDB nor a model is loaded, so a cold `related` costs what
a `show` does. A snapshot whose manifest lists no such file (built by an older ghindex)
is answered from the index as before (`Searcher.nearest`).

Cost. A first build of up to `EXACT_ENTITIES` entities scores every pair: E²·d
multiply-adds for E entities of d dimensions, in blocks of rows, each row's top K
found without sorting it (`_top`). A larger one would take hours that way (100k
entities: 209 CPU-s, growing as E²), so its entities are grouped by spherical k-means
into about √E clusters, and each entity is scored exactly against the members of the
`PROBED` clusters nearest its own: E^1.5 work, spread over the cores, with ≥ 0.95 of
the exact top 10 kept (bench/README.md, "1M rows").
Later builds are incremental and still exact: each entity carries a digest of its
chunks' content, and only the entities whose digest changed (or that are new) are
scored against all; every other entity keeps its list, merged with the changed ones'
scores, unless its list held an entity that changed or left, when it is scored again.
A build after one new comment therefore costs a few rows, not E².

The previous file is read as untrusted input (a pulled snapshot brings it): only its
digests and which neighbours it lists are used, scores are recomputed, and a file that
does not have the expected shape, or was made from another model or precision, is
simply recomputed whole.

Layout. The lists are split by a hash of the entity's handle into `buckets(E)` Parquet
files, `lance/nearest/0000.parquet` on (a few hundred entities each, a power of two
of them), each sorted by entity: a lookup reads one small file, and a build after a
small change rewrites the few files whose lists changed while the others keep their
bytes, so a publish uploads those alone (a file is stored by its content). A snapshot
of an older ghindex has one file, `lance/nearest.parquet`, and is still read.

Columns: `entity`, `rank` (1 = nearest), `neighbour`, `score` (cosine), the neighbour's
`type`, `title` and `url` as the index shows them, and `digest` (of `entity`'s chunks).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ghindex.errors import SnapshotError, first_line
from ghindex.index.chunking import Chunk
from ghindex.vocabulary.layout import INDEX_DIR, fsync_dir

NEAREST_DIR = "nearest"  # in `lance/`: one Parquet file per bucket
NEAREST_FILE = "nearest.parquet"  # in `lance/`: the one file of snapshots before buckets
K = 10
FORMAT = 2  # 1: one file; 2: buckets (the columns are the same)
BUCKET_ENTITIES = 256  # entities a bucket is sized for: a change rewrites few
MAX_BUCKETS = 4096
META_KEY = b"ghindex.nearest"
_BLOCK_CELLS = 16_000_000  # similarities held at once (64 MB of float32)
_GROUP = 64  # columns per group when bounding a row's top K (see `_top`)
ROW_GROUP = 32_768  # rows per Parquet row group: ~3,000 entities each
NOT_A_VECTOR = -2.0  # the score of a vector that is not one (NaN): below any cosine
EXACT_ENTITIES = 20_000  # above: candidates from clusters, when many rows are scored
PROBED = 24  # clusters whose members are an entity's candidates: its own and the nearest
_SAMPLE = 64  # entities per cluster that k-means is trained on
_ROUNDS = 8  # k-means iterations

# the largest list file search reads whole (`lists`): a bucket holds a few hundred
# entities' lists (tens of KB; 4,096 buckets of a 10M-item index: about 3 MB each)
LIST_FILE_MOST = 64 * 1024 * 1024

NearestItems = Callable[[str, int], list[dict[str, Any]]]


def basis(model: str, precision: str) -> str:
    """What a file's vectors were made from: lists of another basis are not reused."""
    return f"{model}:{precision}"


def manifest_entry(listed: int) -> dict[str, Any]:
    """The manifest's `nearest`: the folder of its files and how many (buckets), how
    many neighbours it keeps per entity, and how many entities it lists."""
    return {
        "dir": f"{INDEX_DIR}/{NEAREST_DIR}",
        "buckets": buckets(listed),
        "k": K,
        "entities": listed,
    }


def buckets(entities: int) -> int:
    """How many files the lists of `entities` entities are split into: a power of two."""
    wanted = max(1, -(-entities // BUCKET_ENTITIES))
    return min(MAX_BUCKETS, 1 << (wanted - 1).bit_length())


def bucket_of(entity: str, count: int) -> int:
    """The file an entity's list is in, of `count`: the same in every build."""
    return int(hashlib.sha256(entity.encode("utf-8")).hexdigest()[:8], 16) % count


def bucket_file(folder: Path, bucket: int) -> Path:
    return Path(folder) / f"{bucket:04d}.parquet"


@dataclass(frozen=True)
class Head:
    """What a list shows of an entity: its type, title and URL (from its own document's
    first chunk, else its first)."""

    entity_type: str
    title: str | None
    url: str | None


@dataclass
class Entities:
    """The entities of a build, in the order of their first chunk: handle, what a list
    shows of each (`Head`), normalised mean vectors and content digests."""

    handles: list[str]
    heads: list[Head]
    means: np.ndarray
    digests: list[str]


class Gathering:
    """`Entities` made from chunks as they stream past (`add`, then `done`): a build
    gathers them while it writes the index. It holds per entity what a list shows of it
    and its chunks' hashes, never the chunks; `done` makes the mean vectors from
    `vectors` (which must hold every hash added), so while the index is written nothing
    but the chunks' own vectors is held."""

    def __init__(self, vectors: Mapping[str, np.ndarray]) -> None:
        self.vectors: Mapping[str, np.ndarray] = vectors
        self.index: dict[str, int] = {}
        self.heads: list[Head] = []
        self.own: list[bool] = []  # whether the head is of the entity's own document
        self.hashes: list[list[str]] = []

    def add(self, chunk: Chunk) -> None:
        """Gather `chunk`, if it has a vector (a commit's file diffs have none)."""
        if chunk.content_hash not in self.vectors:
            return
        doc = chunk.document
        at = self.index.setdefault(doc.entity, len(self.index))
        own = doc.handle == doc.entity
        if at == len(self.heads):
            self.heads.append(Head(doc.entity_type, doc.title, doc.url))
            self.own.append(own)
            self.hashes.append([])
        elif own and not self.own[at]:
            self.heads[at], self.own[at] = Head(doc.entity_type, doc.title, doc.url), True
        self.hashes[at].append(chunk.content_hash)

    def done(self) -> Entities:
        """The entities gathered, each vector the normalised mean of its chunks' (summed
        in the order they came); the chunks' vectors are let go."""
        digests = [hashlib.sha256("\n".join(h).encode()).hexdigest()[:32] for h in self.hashes]
        if not self.hashes:
            return Entities([], [], np.zeros((0, 0), dtype=np.float32), [])
        vectors, self.vectors = self.vectors, {}
        dimension = len(vectors[self.hashes[0][0]])
        means = np.empty((len(self.hashes), dimension), dtype=np.float32)
        for at, hashes in enumerate(self.hashes):
            means[at] = vectors[hashes[0]]
            for more in hashes[1:]:
                means[at] += vectors[more]
        norms = np.linalg.norm(means, axis=1, keepdims=True)
        means /= np.where(norms == 0, 1.0, norms)
        return Entities(list(self.index), self.heads, means, digests)


def entities(chunks: Iterable[Chunk], vectors: Mapping[str, np.ndarray]) -> Entities:
    gathering = Gathering(vectors)
    for chunk in chunks:
        gathering.add(chunk)
    return gathering.done()


def neighbours(
    means: np.ndarray, k: int = K, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(indices, cosines) of the `k` nearest other entities of each of `rows` (default:
    all), nearest first; fewer columns when there are fewer than k + 1 entities. Exact,
    unless more than `EXACT_ENTITIES` entities are scored against more than as many."""
    count = means.shape[0]
    rows = np.arange(count) if rows is None else np.asarray(rows, dtype=np.int64)
    keep = min(k, count - 1)
    if keep > 0 and count > EXACT_ENTITIES and len(rows) > EXACT_ENTITIES:
        return _clustered(means, rows, keep)
    return _scored(means, rows, np.arange(count), max(keep, 0))


def _scored(
    means: np.ndarray, rows: np.ndarray, columns: np.ndarray, keep: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each of `rows`' `keep` best among `columns` (sorted entity indices), never itself."""
    found = np.zeros((len(rows), keep), dtype=np.int64)
    scores = np.zeros((len(rows), keep), dtype=np.float32)
    if keep <= 0 or not len(rows):
        return found, scores
    against = means[columns].T
    block = max(1, min(len(rows), _BLOCK_CELLS // len(columns)))
    for start in range(0, len(rows), block):
        picked = rows[start : start + block]
        sims = means[picked] @ against
        np.nan_to_num(sims, copy=False, nan=NOT_A_VECTOR)
        at = np.minimum(np.searchsorted(columns, picked), len(columns) - 1)
        own = columns[at] == picked  # `columns` is sorted: where each row itself is
        sims[np.flatnonzero(own), at[own]] = -np.inf  # not itself
        where, scores[start : start + block] = _top(sims, keep)
        found[start : start + block] = columns[where]
    return found, scores


def _clustered(means: np.ndarray, rows: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """`neighbours` from candidates: the rows of each cluster are scored against the
    members of the `PROBED` clusters whose centres are nearest that cluster's centre
    (more when those hold too few), on every core."""
    centres = _kmeans(means, max(1, round(math.sqrt(len(means)))))
    home = _nearest_centre(means, centres)
    members = _members(home, len(centres))
    close = centres @ centres.T
    found = np.zeros((len(rows), keep), dtype=np.int64)
    scores = np.zeros((len(rows), keep), dtype=np.float32)
    asked = home[rows]
    order = np.argsort(asked, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(asked[order]) != 0]) if len(rows) else []

    def one(start: int, end: int) -> None:
        at = order[start:end]
        cluster = asked[at[0]]
        candidates, taken = [], 0
        for other in np.argsort(-close[cluster], kind="stable"):
            candidates.append(members[other])
            taken += len(members[other])
            if len(candidates) >= PROBED and taken > 4 * (keep + 1):
                break
        columns = np.sort(np.concatenate(candidates))
        found[at], scores[at] = _scored(means, rows[at], columns, min(keep, len(columns) - 1))

    bounds = list(zip(starts, [*starts[1:], len(rows)], strict=True))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda b: one(*b), bounds))
    return found, scores


def _kmeans(vectors: np.ndarray, clusters: int) -> np.ndarray:
    """Unit centres of `clusters` spherical k-means clusters, trained on a fixed sample
    (the same entities give the same clusters on every build)."""
    rng = np.random.default_rng(0)
    picked = rng.choice(len(vectors), min(len(vectors), _SAMPLE * clusters), False)
    sample = np.nan_to_num(vectors[picked])  # a vector that is not one counts as none
    centres = sample[rng.choice(len(sample), clusters, replace=False)].copy()
    for _ in range(_ROUNDS):
        assigned = _nearest_centre(sample, centres)
        sums = np.zeros_like(centres)
        np.add.at(sums, assigned, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centres = np.where(norms > 0, sums / np.where(norms == 0, 1.0, norms), centres)
    return centres.astype(np.float32)


def _nearest_centre(vectors: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Each vector's nearest centre (a NaN vector's: the first), a block at a time: no
    copy of the whole matrix."""
    block = max(1, _BLOCK_CELLS // len(centres))
    return np.concatenate(
        [
            np.argmax(np.nan_to_num(vectors[start : start + block]) @ centres.T, axis=1)
            for start in range(0, len(vectors), block)
        ]
        or [np.zeros(0, dtype=np.int64)]
    )


def _members(home: np.ndarray, clusters: int) -> list[np.ndarray]:
    order = np.argsort(home, kind="stable")
    cuts = np.searchsorted(home[order], np.arange(clusters + 1))
    return [order[cuts[c] : cuts[c + 1]] for c in range(clusters)]


def _top(sims: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's `keep` largest values and their columns, largest first, ties to the
    lower column. The rows' maxima over groups of `_GROUP` columns bound the answer:
    the keep-th largest group maximum is at most the keep-th largest value, so only
    the few values at or above it are sorted, never a whole row."""
    count, width = sims.shape
    whole = width - width % _GROUP
    maxima = sims[:, :whole].reshape(count, -1, _GROUP).max(axis=2)
    if whole < width:
        maxima = np.concatenate([maxima, sims[:, whole:].max(axis=1, keepdims=True)], axis=1)
    groups = maxima.shape[1]
    if groups > keep:
        bound = np.partition(maxima, groups - keep, axis=1)[:, groups - keep]
    else:
        bound = np.full(count, -np.inf, dtype=sims.dtype)
    row, col = np.nonzero(sims >= bound[:, None])
    value = sims[row, col]
    order = np.lexsort((col, -value, row))
    row, col, value = row[order], col[order], value[order]
    rank = np.arange(len(row)) - np.searchsorted(row, row, side="left")
    kept = rank < keep
    return col[kept].reshape(count, keep), value[kept].reshape(count, keep)


def write(lance_path: Path, now: Entities, basis: str, *, reuse: bool = True) -> int:
    """`lance_path/nearest/` for the entities `now` (see `entities`, `Gathering`),
    updated from the previous lists where it can be and `reuse` allows (see the module's
    docstring). Each bucket's file is replaced atomically, and only when its bytes
    change; files of buckets no longer used, and the single file of an older ghindex,
    are removed. `basis` names what the vectors are (model and precision): lists of
    another basis are recomputed. Returns the number of entities listed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lance_path = Path(lance_path)
    folder = lance_path / NEAREST_DIR
    found, scores = _in_order(
        now.means, update(now, _previous(lance_path, basis) if reuse else None)[0]
    )
    listed = len(now.handles) if found.shape[1] else 0
    count = buckets(listed)
    owner = np.fromiter((bucket_of(h, count) for h in now.handles), np.int64, len(now.handles))
    by_bucket = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[by_bucket], np.arange(count + 1))
    folder.mkdir(parents=True, exist_ok=True)
    for leftover in folder.glob("*.tmp"):
        leftover.unlink()
    meta = {META_KEY: json.dumps({"format": FORMAT, "k": K, "basis": basis}).encode()}
    for bucket in range(count):  # one file's rows at a time, sorted by entity
        members = by_bucket[bounds[bucket] : bounds[bucket + 1]].tolist()
        part = _table(now, found, scores, sorted(members, key=now.handles.__getitem__))
        sink = pa.BufferOutputStream()
        pq.write_table(
            part.replace_schema_metadata(meta), sink, compression="zstd", row_group_size=ROW_GROUP
        )
        data = sink.getvalue().to_pybytes()
        path = bucket_file(folder, bucket)
        if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
            continue  # the same lists: the file keeps its bytes (and its mtime)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    used = {bucket_file(folder, b) for b in range(count)}
    for stale in folder.glob("*.parquet"):
        if stale not in used:
            stale.unlink()
    (lance_path / NEAREST_FILE).unlink(missing_ok=True)
    fsync_dir(folder)
    return listed


def _in_order(means: np.ndarray, found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every list scored the one same way, and ordered by it (ties to the earlier
    entity): a list found by another path (scored whole, merged with what changed,
    clustered) then has the same scores to the last bit, and its file the same bytes, as
    when nothing about it changed."""
    scores = np.zeros(found.shape, dtype=np.float32)
    block = max(1, _BLOCK_CELLS // max(1, found.shape[1] * means.shape[1]))
    for start in range(0, len(found), block):
        rows = np.arange(start, min(start + block, len(found)))
        scores[rows] = np.einsum("ij,ikj->ik", means[rows], means[found[rows]])
    scores = np.nan_to_num(scores, nan=NOT_A_VECTOR)
    order = np.lexsort((found, -scores), axis=1)
    return np.take_along_axis(found, order, axis=1), np.take_along_axis(scores, order, axis=1)


def _file_meta(path: Path) -> dict[str, Any] | None:
    """What a nearest file says it was made from, or None when it is not one."""
    try:
        import pyarrow.parquet as pq

        meta = json.loads((pq.read_schema(path).metadata or {}).get(META_KEY, b"null"))
    except Exception:  # missing, or not a file this code wrote
        return None
    return meta if isinstance(meta, dict) else None


def update(
    now: Entities, previous: dict[str, tuple[str, list[str]]] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Every entity's list: from scratch without `previous` (entity -> (digest,
    neighbours)), else only what changed is scored (exactly as from scratch)."""
    count = len(now.handles)
    keep = min(K, count - 1)
    if previous is None or keep <= 0:
        return neighbours(now.means)
    at = {h: i for i, h in enumerate(now.handles)}
    fresh = np.array(
        [previous.get(h, ("", []))[0] != d for h, d in zip(now.handles, now.digests, strict=True)]
    )
    if fresh.sum() * 4 > count:  # most of it changed: scoring all is as quick
        return neighbours(now.means)
    again: list[int] = []
    kept: dict[int, list[int]] = {}
    for i, handle in enumerate(now.handles):
        old = previous[handle][1] if not fresh[i] else []
        listed = [at.get(n) for n in old]
        whole = len(old) == keep and len(set(old)) == keep and handle not in old
        if fresh[i] or not whole or any(j is None or fresh[j] for j in listed):
            again.append(i)  # changed, or its list lost a neighbour (changed or gone)
        else:
            kept[i] = listed  # type: ignore[assignment]
    found = np.zeros((count, keep), dtype=np.int64)
    scores = np.zeros((count, keep), dtype=np.float32)
    if again:
        found[again], scores[again] = neighbours(now.means, K, np.array(again))
    rows = np.array(list(kept), dtype=np.int64)
    changed = np.flatnonzero(fresh)
    block = max(1, _BLOCK_CELLS // (keep + len(changed)))
    for start in range(0, len(rows), block):
        picked = rows[start : start + block]
        old = np.array([kept[i] for i in picked.tolist()], dtype=np.int64)
        found[picked], scores[picked] = _merge(now.means, picked, old, changed, keep)
    return found, scores


def _merge(
    means: np.ndarray, rows: np.ndarray, old: np.ndarray, changed: np.ndarray, keep: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose old list still holds: those neighbours rescored, joined by the changed
    entities, the best `keep` kept (an unlisted unchanged entity cannot beat them)."""
    vals = np.einsum("ij,ikj->ik", means[rows], means[old])
    cols = old
    if len(changed):
        cols = np.concatenate([old, np.broadcast_to(changed, (len(rows), len(changed)))], axis=1)
        vals = np.concatenate([vals, means[rows] @ means[changed].T], axis=1)
    vals = np.nan_to_num(vals, nan=NOT_A_VECTOR)
    order = np.lexsort((cols, -vals), axis=1)[:, :keep]
    return np.take_along_axis(cols, order, axis=1), np.take_along_axis(vals, order, axis=1)


def _previous(lance_path: Path, basis: str) -> dict[str, tuple[str, list[str]]] | None:
    """The previous lists' digests and neighbours (from the bucket files, or the single
    file of an older ghindex), or None when there are none to trust."""
    folder = Path(lance_path) / NEAREST_DIR
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not files and (Path(lance_path) / NEAREST_FILE).is_file():
        files = [Path(lance_path) / NEAREST_FILE]
    if not files:
        return None
    found: dict[str, tuple[str, list[tuple[int, str]]]] = {}
    names: dict[str, str] = {}  # each handle held once, however many lists name it
    try:
        import pyarrow.parquet as pq

        for path in files:
            meta = _file_meta(path) or {}
            if meta.get("k") != K or meta.get("basis") != basis:
                return None
            table = pq.read_table(path, columns=["entity", "rank", "neighbour", "digest"])
            rows = zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True)
            for entity, rank, neighbour, digest in rows:
                if not (isinstance(entity, str) and isinstance(neighbour, str)):
                    return None
                if not (isinstance(rank, int) and isinstance(digest, str)):
                    return None
                held = found.setdefault(names.setdefault(entity, entity), (digest, []))
                if held[0] != digest:
                    return None
                held[1].append((rank, names.setdefault(neighbour, neighbour)))
    except Exception:  # not files this code wrote: recompute them whole
        return None
    return {e: (d, [n for _r, n in sorted(listed)]) for e, (d, listed) in found.items()}


def _table(
    now: Entities, found: np.ndarray, scores: np.ndarray, members: Sequence[int] | None = None
):
    """The rows of the lists of `members` (entity indices, in that order; default all)."""
    import pyarrow as pa

    docs = now.heads
    keep = found.shape[1]
    members = np.arange(len(docs)) if members is None else np.asarray(members, dtype=np.int64)
    source = np.repeat(members, keep).tolist()
    target = found[members].reshape(-1).tolist()
    return pa.table(
        {
            "entity": pa.array([now.handles[i] for i in source], pa.string()),
            "rank": pa.array(np.tile(np.arange(1, keep + 1), len(members)), pa.int32()),
            "neighbour": pa.array([now.handles[i] for i in target], pa.string()),
            "score": pa.array(np.round(scores[members].reshape(-1), 6), pa.float32()),
            "type": pa.array([docs[i].entity_type for i in target], pa.string()),
            "title": pa.array([docs[i].title for i in target], pa.string()),
            "url": pa.array([docs[i].url for i in target], pa.string()),
            "digest": pa.array([now.digests[i] for i in source], pa.string()),
        }
    )


def locate(lance_path: Path, listed: object) -> Callable[[str], Path] | None:
    """`handle -> the file holding its list`, for the lists the manifest's `nearest`
    entry (`listed`) names, or None when it names none. The entry came with the
    snapshot: one that is not of either layout is refused in one line."""
    lance_path = Path(lance_path)
    if not isinstance(listed, dict):
        return None
    if "buckets" not in listed and listed.get("file") == f"{INDEX_DIR}/{NEAREST_FILE}":
        single = lance_path / NEAREST_FILE  # a snapshot of an older ghindex
        return (lambda handle: single) if single.is_file() else None
    count = listed.get("buckets")
    if not (
        listed.get("dir") == f"{INDEX_DIR}/{NEAREST_DIR}"
        and isinstance(count, int)
        and not isinstance(count, bool)
        and 1 <= count <= MAX_BUCKETS
        and count & (count - 1) == 0
    ):
        raise SnapshotError(
            f"the manifest's nearest-items entry is not one ghindex reads ({_shown(listed)}): "
            "pull the snapshot again, or build it again"
        )
    folder = lance_path / NEAREST_DIR
    return lambda handle: bucket_file(folder, bucket_of(handle, count))


def reader(lance_path: Path, listed: object) -> NearestItems | None:
    """`(handle, k) -> up to k nearest items`, read from the lists the manifest's
    `nearest` entry (`listed`) names (see `locate`), or None when it names none."""
    file_of = locate(lance_path, listed)
    if file_of is None:
        return None

    def nearest_items(handle: str, k: int) -> list[dict[str, Any]]:
        return read(file_of(handle), handle, k)

    return nearest_items


class ListFile:
    """One nearest file, read once (`lists`), whose lists are looked up an item at a
    time: search asks for its best hit's list on every query, and at 1M rows the 64
    files it keeps (of 4,096) rarely hold the next one, so a file's other lists are
    left as Arrow columns instead of made into Python objects (1.7 ms a file)."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def of(self, entity: str) -> list[tuple[str, str, float]]:
        """`entity`'s list: (neighbour, its type, cosine), nearest first, without the rows
        that name no neighbour, the item itself, or no real cosine."""
        import pyarrow.compute as pc

        rows = self._table.filter(pc.equal(self._table.column("entity"), entity))
        found = []
        columns = (rows.column(name).to_pylist() for name in ("rank", "neighbour", "type", "score"))
        for rank, neighbour, kind, score in zip(*columns, strict=True):
            if neighbour is None or neighbour == entity or rank is None:
                continue
            if score is None or not 0.0 < score <= 1.0 + 1e-6:  # NOT_A_VECTOR, NaN, garbage
                continue
            found.append((rank, neighbour, kind or "", float(score)))
        return [(n, t, c) for _r, n, t, c in sorted(found)]


def lists(path: Path) -> ListFile:
    """The lists of one nearest file (see `ListFile`). The file came with the snapshot:
    one that is not Parquet with these columns, or is larger than LIST_FILE_MOST, is
    refused in one line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = {
        "entity": pa.string(),
        "rank": pa.int64(),
        "neighbour": pa.string(),
        "type": pa.string(),
        "score": pa.float64(),
    }
    try:
        size = Path(path).stat().st_size
        if size > LIST_FILE_MOST:
            raise ValueError(f"{size:,} bytes, more than a list file ever holds")
        table = pq.read_table(path, columns=list(wanted))
        return ListFile(table.cast(pa.schema(list(wanted.items()))))
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise SnapshotError(
            f"{path} is not a nearest-items file ghindex can read ({first_line(exc)}): "
            "pull the snapshot again, or build it again"
        ) from None


def _shown(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def read(path: Path, handle: str, k: int) -> list[dict[str, Any]]:
    """Up to `k` neighbours of `handle` from a nearest file. The file came with the
    snapshot: a file without these columns, or not Parquet, is refused in one line."""
    import duckdb

    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT CAST(neighbour AS VARCHAR), CAST(type AS VARCHAR), CAST(title AS VARCHAR),"
            " CAST(url AS VARCHAR), CAST(score AS DOUBLE) FROM read_parquet($path)"
            " WHERE entity = $handle AND neighbour IS NOT NULL AND score IS NOT NULL"
            " ORDER BY rank, neighbour LIMIT $k",
            {"path": str(path), "handle": handle, "k": max(0, int(k))},
        ).fetchall()
    except duckdb.Error as exc:
        raise SnapshotError(
            f"{path} is not a nearest-items file ghindex can read ({first_line(exc)}): "
            "pull the snapshot again, or build it again"
        ) from None
    finally:
        con.close()
    return [
        {"handle": n, "type": t or "", "title": title or "", "url": url or "", "score": round(s, 6)}
        for n, t, title, url, s in rows
    ]
