"""`ghindex merge`: combine workdirs built separately (shards of an organisation,
one job per group of repositories) into one, without embedding anything again.

Every table of each shard's state database is copied into the target's (rows
are keyed by handle, so a repository present in two shards keeps one copy), and
each shard's embedding cache joins the target's. The following `build` then
finds every chunk's vector in the cache: the merged index costs no model calls.
Shards built with another embedding model or precision are refused.

A shard may also be vectors only: a directory holding `lance/` and no state (the
cache an embedding job of `build --shard I/N` made, carried without the state it
shares with the others). Only its cache joins (`merge_vectors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ghindex.config import DEFAULT_PRECISION, PRECISIONS
from ghindex.errors import IndexUnusable, StateError
from ghindex.index import table as index
from ghindex.progress import Progress
from ghindex.state import redaction
from ghindex.state.database import open_state, transaction
from ghindex.state.rows import replace_from
from ghindex.vocabulary.layout import INDEX_DIR, STATE_FILE, live_root
from ghindex.vocabulary.tables import MIGRATION_LOG


@dataclass
class MergeReport:
    shards: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    vectors: int = 0
    precision: str = DEFAULT_PRECISION  # of the shards' vectors, and so of the merged index
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def merge(
    target: Path,
    shards: Sequence[Path],
    model: str,
    *,
    precision: str | None = None,
    redacted: bool = True,
    progress: Progress | None = None,
) -> MergeReport:
    """Copy every shard's state and `model`'s cache of `precision` into the workdir
    `target`; the merged text is then brought in line with the `redact` setting
    (`redacted`). `precision` None: the shards' own (that of the first with an index).
    `progress` counts the shards copied, then those whose vectors joined the cache."""
    progress = progress or Progress()
    shards = [live_root(shard) for shard in shards]  # a pulled shard: its current version
    held = [
        index.index_precision(index.connect(shard / INDEX_DIR))
        for shard in shards
        if (shard / INDEX_DIR).is_dir()
    ]
    precision = precision or next((p for p in held if p), DEFAULT_PRECISION)
    report = MergeReport(precision=precision)
    for shard in shards:
        if not (shard / STATE_FILE).exists() and not (shard / INDEX_DIR).is_dir():
            raise StateError(f"{shard} holds no state.duckdb: is it a ghindex workdir?")
        if shard.resolve() == target.resolve():
            raise StateError(f"{shard} is the target workdir itself")
        _check_vectors(shard, model, precision)  # before anything is copied
    stated = [shard for shard in shards if (shard / STATE_FILE).exists()]
    con = open_state(target / STATE_FILE)
    # what the target's own rows went through counts too (it may hold raw text)
    seen: dict[str, set[str | None]] = {
        source: {redaction.stored(con, source)} if redaction.has_rows(con, source) else set()
        for source in redaction.SOURCES
    }
    try:
        # every table of the schema has a primary key: a shard's row replaces the one
        # with the same key, so a repository in two shards ends up once
        keys = {
            name: columns
            for name, columns in con.execute(
                "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
                "WHERE constraint_type = 'PRIMARY KEY' AND schema_name = 'main'"
            ).fetchall()
            if name != MIGRATION_LOG
        }
        with progress.task("merge", len(stated), unit="shards", verb="copied") as copying:
            for number, shard in enumerate(stated):
                _copy_state(con, f"shard{number}", shard, keys, seen, report)
                copying.advance(detail=f"{sum(report.rows.values()):,} rows")
        with transaction(con):
            for source, values in seen.items():
                if len(values) > 1:  # shards disagree: treat the merged text as unknown
                    redaction.forget(con, source)
                report.notes += [n for n in [redaction.prepare(con, source, redacted)[1]] if n]
        con = redaction.compact_if_needed(target / STATE_FILE, con)
    finally:
        con.close()
    report.shards += [str(shard) for shard in shards if shard not in stated]
    report.vectors = merge_vectors(target, shards, model, (precision,), progress=progress)
    return report


def merge_vectors(
    target: Path,
    shards: Sequence[Path],
    model: str,
    precisions: Sequence[str] = PRECISIONS,
    *,
    progress: Progress | None = None,
) -> int:
    """Every shard's caches of `model`'s vectors (of `precisions`) joined to the workdir
    `target`'s; returns how many vectors the shards held. A cache is keyed by model and
    precision, so nothing of another model or precision is mixed in."""
    progress = progress or Progress()
    shards = [live_root(shard) for shard in shards]
    for shard in shards:
        if not (shard / INDEX_DIR).is_dir() and not (shard / STATE_FILE).exists():
            raise StateError(f"{shard} holds no lance/ directory: is it a ghindex workdir?")
    shards = [shard for shard in shards if (shard / INDEX_DIR).is_dir()]  # others: no cache
    db = index.connect(target / INDEX_DIR)
    joined = 0
    with progress.task("merge", len(shards), unit="shard caches", verb="joined") as joining:
        for shard in shards:
            for precision in precisions:
                joined += _merge_cache(db, shard, model, precision)
            joining.advance(detail=f"{joined:,} vectors")
    return joined


def _copy_state(
    con,
    alias: str,
    shard: Path,
    keys: dict[str, list[str]],
    seen: dict[str, set[str | None]],
    report: MergeReport,
) -> None:
    """Every table of one shard's state into the target's, counted in `report.rows`;
    what the shard's text went through (redacted or not) into `seen`."""
    open_state(shard / STATE_FILE).close()  # bring the shard's schema up to date
    con.execute(f"ATTACH '{_quoted(shard / STATE_FILE)}' AS {alias} (READ_ONLY)")
    try:
        for source in redaction.SOURCES:
            seen[source].add(redaction.stored(con, source, schema=alias))
        with transaction(con):
            for table, columns in keys.items():
                source = f"{alias}.{table}"
                replace_from(con, f"main.{table}", source, columns)
                copied = con.execute(f"SELECT count(*) FROM {source}").fetchone()[0]
                report.rows[table] = report.rows.get(table, 0) + copied
    finally:
        con.execute(f"DETACH {alias}")
    report.shards.append(str(shard))


def _merge_cache(db, shard: Path, model: str, precision: str) -> int:
    """The shard's vectors of `model` and `precision` added to the target's cache `db`."""
    import numpy as np

    source = index.connect(shard / INDEX_DIR)
    name = index.cache_table(model, precision)
    if name not in index.table_names(source):
        return 0
    rows = source.open_table(name).to_arrow()
    if rows.num_rows == 0:
        return 0
    flat = rows.column("vector").combine_chunks().values.to_numpy(zero_copy_only=False)
    vectors = np.asarray(flat, dtype=np.float32).reshape(rows.num_rows, -1)
    hashes = rows.column("content_hash").to_pylist()
    index.add_to_cache(db, model, hashes, vectors, precision)
    return rows.num_rows


def _check_vectors(shard: Path, model: str, precision: str) -> None:
    """Refuse a shard whose index holds another model's vectors or another precision."""
    source = index.connect(shard / INDEX_DIR)
    built = index.index_model(source)
    if built and built[0] != model:
        raise IndexUnusable(
            f"{shard} was built with model {built[0]!r}, not {model!r}: build every shard "
            "with the same --model"
        )
    held = index.index_precision(source)
    if held and held != precision:
        raise IndexUnusable(
            f"{shard} holds {held} vectors, not {precision}: build every shard with the "
            f"same --precision, or merge with --precision {held}"
        )


def _quoted(path: Path) -> str:
    return str(path.resolve()).replace("'", "''")
