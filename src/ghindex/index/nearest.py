"""Each entity's nearest entities by text, listed at build time in `lance/nearest.parquet`.

An entity's vector is the mean of its chunks' vectors, normalised; its neighbours are
the other entities ranked by the cosine between those vectors, exactly (blocks of rows
against all, `K` kept per entity). `ghindex related` then answers from this file with
DuckDB: neither LanceDB nor a model is loaded, so a cold `related` costs what a `show`
does. A snapshot built before the file existed, or whose manifest does not list it,
is answered from the index as before (`Searcher.nearest`).

The work is E²·d multiply-adds for E entities of d dimensions: ~0.1 s for 6,000 entities
on 2 cores, ~3 s for 20,000, quadratic beyond. The file is rewritten by every build.

Columns: `entity`, `rank` (1 = nearest), `neighbour`, `score` (cosine), and the
neighbour's `type`, `title` and `url` as the index shows them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ghindex.errors import SnapshotError, first_line
from ghindex.index.chunking import Chunk

NEAREST_FILE = "nearest.parquet"
K = 10
_BLOCK_CELLS = 16_000_000  # similarities held at once (64 MB of float32)
COLUMNS = ("entity", "rank", "neighbour", "score", "type", "title", "url")

NearestItems = Callable[[str, int], list[dict[str, Any]]]


def entity_vectors(
    chunks: Sequence[Chunk], vectors: Mapping[str, np.ndarray]
) -> tuple[list[Chunk], np.ndarray]:
    """One chunk standing for each entity (its own document's first, else its first) and
    the entities' normalised mean vectors, in the order of their first chunk."""
    index: dict[str, int] = {}
    heads: list[Chunk] = []
    for chunk in chunks:
        doc = chunk.document
        at = index.setdefault(doc.entity, len(index))
        if at == len(heads):
            heads.append(chunk)
        elif doc.handle == doc.entity and heads[at].document.handle != doc.entity:
            heads[at] = chunk
    if not chunks:
        return [], np.zeros((0, 0), dtype=np.float32)
    owner = np.fromiter((index[c.document.entity] for c in chunks), dtype=np.int64)
    order = np.argsort(owner, kind="stable")
    rows = np.stack([np.asarray(vectors[chunks[i].content_hash], dtype=np.float32)
                     for i in order])  # fmt: skip
    starts = np.flatnonzero(np.r_[True, np.diff(owner[order]) != 0])
    sums = np.add.reduceat(rows, starts, axis=0)  # entity i's rows start at starts[i]
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return heads, sums / np.where(norms == 0, 1.0, norms)


def neighbours(means: np.ndarray, k: int = K) -> tuple[np.ndarray, np.ndarray]:
    """(indices, cosines): each row's `k` nearest other rows, nearest first; ties go to
    the earlier row. Rows fewer than k + 1 give fewer columns."""
    count = means.shape[0]
    keep = min(k, count - 1)
    if keep <= 0:
        return np.zeros((count, 0), dtype=np.int64), np.zeros((count, 0), dtype=np.float32)
    found = np.zeros((count, keep), dtype=np.int64)
    scores = np.zeros((count, keep), dtype=np.float32)
    block = max(1, min(count, _BLOCK_CELLS // count))
    for start in range(0, count, block):
        stop = min(start + block, count)
        sims = means[start:stop] @ means.T
        sims[np.arange(stop - start), np.arange(start, stop)] = -np.inf  # not itself
        top = np.argpartition(-sims, keep - 1, axis=1)[:, :keep]
        top_sims = np.take_along_axis(sims, top, axis=1)
        order = np.lexsort((top, -top_sims), axis=1)
        found[start:stop] = np.take_along_axis(top, order, axis=1)
        scores[start:stop] = np.take_along_axis(top_sims, order, axis=1)
    return found, scores


def table(chunks: Sequence[Chunk], vectors: Mapping[str, np.ndarray], k: int = K):
    """The nearest lists of every entity of `chunks`, as an Arrow table of `COLUMNS`."""
    import pyarrow as pa

    heads, means = entity_vectors(chunks, vectors)
    found, scores = neighbours(means, k)
    entities = [h.document.entity for h in heads]
    types = [h.document.entity_type for h in heads]
    titles = [h.document.title for h in heads]
    urls = [h.document.url for h in heads]
    keep = found.shape[1]
    source = np.repeat(np.arange(len(heads)), keep)
    target = found.reshape(-1)
    return pa.table(
        {
            "entity": pa.array([entities[i] for i in source], pa.string()),
            "rank": pa.array(np.tile(np.arange(1, keep + 1), len(heads)), pa.int32()),
            "neighbour": pa.array([entities[i] for i in target], pa.string()),
            "score": pa.array(np.round(scores.reshape(-1), 6), pa.float32()),
            "type": pa.array([types[i] for i in target], pa.string()),
            "title": pa.array([titles[i] for i in target], pa.string()),
            "url": pa.array([urls[i] for i in target], pa.string()),
        }
    )


def write(lance_path: Path, chunks: Sequence[Chunk], vectors: Mapping[str, np.ndarray]) -> int:
    """`lance_path/nearest.parquet` for `chunks`, replaced whole; the entities listed."""
    import pyarrow.parquet as pq

    rows = table(chunks, vectors)
    path = Path(lance_path) / NEAREST_FILE
    tmp = path.with_name(f"{NEAREST_FILE}.tmp")
    pq.write_table(rows, tmp, compression="zstd")
    os.replace(tmp, path)
    return len(set(rows.column("entity").to_pylist())) if rows.num_rows else 0


def reader(lance_path: Path) -> NearestItems | None:
    """`(handle, k) -> up to k nearest items` read from the file, or None without one."""
    path = Path(lance_path) / NEAREST_FILE
    if not path.is_file():
        return None

    def nearest_items(handle: str, k: int) -> list[dict[str, Any]]:
        return read(path, handle, k)

    return nearest_items


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
        {"handle": n, "type": t or "", "title": title or "", "url": url or "",
         "score": round(s, 6)}
        for n, t, title, url, s in rows
    ]  # fmt: skip
