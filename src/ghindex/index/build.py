"""`ghindex build`: documents → chunks → embeddings (cached) → LanceDB + manifest.

Only texts whose sha256 is not in the embedding cache go through the model; the
model is not even loaded when nothing is new. The `chunks` table is brought to
exactly the current set of chunks by a merge on chunk id, so unchanged rows keep
their data files. Vectors are of one model and one precision per index (the manifest
says which, and which encoder made this build's); `onnx_encoder.build_encoder` picks
the encoder.

A build can be killed at any point. New vectors go into the cache a slice at a time,
each slice one committed append, so a rerun embeds only what is still missing; and
`--full` builds its index beside the serving one (`staging.py`), which keeps serving,
with its manifest, until the new one is complete.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ghindex import __version__
from ghindex.config import DEFAULT_PRECISION, FP32, PRECISIONS, Settings
from ghindex.errors import ConfigError
from ghindex.gitsource.doc_links import replace_doc_links
from ghindex.index import nearest, staging
from ghindex.index import table as index
from ghindex.index.carried_encoder import carry
from ghindex.index.chunking import Chunk, ChunkSettings, chunk_document
from ghindex.index.documents import DocumentSettings, iter_documents
from ghindex.index.documents import embedded as read_by_meaning
from ghindex.index.embed import canonical_model_name
from ghindex.progress import Progress
from ghindex.state import cursors, gaps, redact, redaction
from ghindex.state.database import no_state, open_state, transaction
from ghindex.vocabulary.layout import FORMAT_VERSION

Say = Callable[[str], None]

# New vectors are written to the cache as embedding goes: texts are encoded a step at a
# time (a multiple of the encoders' batches) and written when a slice is full or has
# waited long enough, or the build is stopped. Each slice is one LanceDB commit;
# `index.maintain` compacts the cache when its fragments pile up. A stopped build loses
# at most the step it was in (256 rows: seconds of work on two cores).
EMBED_STEP = 256
SLICE_ROWS = 4096
SLICE_SECONDS = 30.0
STATE_MEMORY_MB = 512  # DuckDB's memory while a build reads the documents


@dataclass
class BuildReport:
    model: str
    dimension: int
    documents: int
    chunks: int
    embedded: int
    from_cache: int
    inserted: int
    updated: int
    deleted: int
    seconds: float
    counts: dict[str, int]
    git: list[dict[str, Any]] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)  # secrets replaced in git text
    notes: list[str] = field(default_factory=list)  # what the build did besides indexing
    precision: str = DEFAULT_PRECISION  # of every vector in the index
    encoder: str | None = None  # "onnx" or "torch" when this build embedded anything
    nearest: int = 0  # entities whose nearest items `lance/nearest/` lists
    to_embed: int = 0  # chunks not in the cache (this shard's, with a shard)
    unfinished: int = 0  # of those, left to embed when `stop_after` stopped the build

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Shard:
    """Shard `number` of `count` (from 1): the chunks whose content hash falls in it.
    A hash decides, so every job of a matrix agrees on the split with no list shared,
    and the same text is one shard's wherever it appears."""

    number: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N`, as `build --shard 2/4` takes it."""
        number, slash, count = text.partition("/")
        if not (slash and number.isdigit() and count.isdigit()):
            raise ConfigError(f"--shard takes I/N, e.g. 2/4 (shard 2 of 4), not {text!r:.40}")
        shard = cls(int(number), int(count))
        if not 1 <= shard.number <= shard.count <= MAX_SHARDS:
            raise ConfigError(
                f"--shard {text}: I must be 1 to N and N at most {MAX_SHARDS}, e.g. 2/4"
            )
        return shard

    def holds(self, content_hash: str) -> bool:
        return int(content_hash[:12], 16) % self.count == self.number - 1

    def __str__(self) -> str:
        return f"{self.number}/{self.count}"


MAX_SHARDS = 256  # an Actions matrix holds at most 256 jobs


@dataclass(frozen=True)
class GitSource:
    """A local clone to read docs and commits (or wiki pages) from."""

    path: Path
    wiki: bool = False
    repo: str | None = None  # owner/name; read from the clone's origin remote when None


def build(
    settings: Settings,
    *,
    model: str | None = None,
    full: bool = False,
    git: Sequence[GitSource] = (),
    chunking: ChunkSettings | None = None,
    doc_settings: DocumentSettings | None = None,
    precision: str | None = None,
    embedder_factory: Callable[[str], Any] | None = None,
    progress: Progress | None = None,
    shard: Shard | None = None,
    plan: bool = False,
    plan_above: int | None = None,
    stop_after: float | None = None,
) -> BuildReport:
    """Index the state database of `settings.workdir` into `settings.lance_path`, with
    vectors of `precision` (default `settings.precision`). `embedder_factory(model)`
    replaces the encoder `build_encoder` would choose (tests, the eval harness): its
    vectors must be of that precision, and its `encode(texts, progress=None)` calls
    `progress(n)` as each n texts are done. `progress` counts the rows embedded.
    `shard` (I of N): embed only the chunks of that shard into the cache and stop
    there, writing no index: N such builds run in parallel (an Actions matrix) and
    `ghindex merge` joins their caches, so the full build after it embeds nothing.
    `plan`: stop before the model is loaded, having counted what is to embed
    (`to_embed`), so that a workflow can choose how many shards to run; `plan_above`:
    the same, only when more than that many chunks are to embed (else build on).
    `stop_after` (seconds from the start): stop embedding then, keeping what is embedded
    in the cache, and write no index; the report's `unfinished` counts what is left, and
    the next build goes on from there (a job that must end before its time limit)."""
    progress = progress or Progress()
    say = progress.note
    started = time.perf_counter()
    started_at = datetime.now(UTC)
    chunking = chunking or ChunkSettings()
    doc_settings = doc_settings or DocumentSettings(
        min_comment_chars=settings.min_comment_chars,
        index_bots=settings.index_bots,
        skip_types=settings.skip_types,
    )
    model_name = canonical_model_name(model or settings.model)
    precision = precision or settings.precision
    if precision is not None and precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")

    if not settings.state_path.exists() and not git:
        raise no_state(settings.state_path)
    db = index.connect(settings.lance_path)
    if staging.discard(settings.lance_path):
        say("removed the unfinished index of a killed `build --full`")
    # none asked for: the index's own, else int8 where ONNX Runtime can run the model
    # (a factory's vectors are fp32 unless the caller says otherwise)
    precision = (
        precision
        or (None if full else index.index_precision(db))
        or _new_precision(model_name, settings, embedder_factory)
    )
    if not full:  # --full makes a new table, of any model and precision
        index.check_model(db, settings.lance_path, model_name, precision)

    con = open_state(settings.state_path)
    try:
        with transaction(con):
            reread, note = redaction.prepare(con, "git", settings.redact)
        con = redaction.compact_if_needed(settings.state_path, con)
        notes = [note] if note else []
        if reread and not git:
            notes.append(
                "the stored git text stays redacted until a build with --git or "
                "--wiki reads it again"
            )
        for line in notes:
            say(line)
        with redact.tally(settings.redact) as redactions:
            git_reports = [_sync_git(con, source, full or reread, say) for source in git]
        if git and (reread or not redaction.stored(con, "git")):
            with transaction(con):
                redaction.record(con, "git", settings.redact)
        prune = redaction.index_stale(con)

        # The chunks are made again for each pass (surveying, embedding what is new,
        # writing), never held: a build holds their hashes and vectors, not their text.
        # DuckDB sorts the documents in each pass: bounded, it spills to disk instead of
        # holding the state's text in memory (about the state file's size otherwise).
        con.execute(f"SET memory_limit = '{STATE_MEMORY_MB}MB'")

        def each_chunk() -> Iterator[Chunk]:
            for doc in iter_documents(con, doc_settings):
                yield from chunk_document(doc, chunking)

        def with_vector(chunk: Chunk) -> bool:
            return read_by_meaning(chunk.document, doc_settings)

        survey = _Survey.of(each_chunk(), with_vector)
        say(f"{survey.documents} documents")
        vectors = index.cached_vectors(db, model_name, survey.hashes, precision)
        cached = len(vectors)
        missing = vectors.missing()
        if shard is not None:
            others = len(missing)
            missing = [h for h in missing if shard.holds(h)]
            say(f"shard {shard}: {len(missing)} of the {others} chunks to embed are this shard's")
        dimension = index.cache_dimension(db, model_name, precision) or 0
        encoder = None

        def unindexed(note: str, embedded: int, unfinished: int = 0) -> BuildReport:
            """The report of a build that stopped before the index: a plan, a shard, or
            one stopped by its time limit."""
            return BuildReport(
                model=model_name,
                dimension=dimension,
                documents=survey.documents,
                chunks=survey.chunks,
                embedded=embedded,
                from_cache=cached,
                inserted=0,
                updated=0,
                deleted=0,
                seconds=round(time.perf_counter() - started, 3),
                counts=survey.counts,
                notes=[*notes, note],
                precision=precision,
                encoder=encoder,
                to_embed=len(missing),
                unfinished=unfinished,
            )

        plan = plan or (plan_above is not None and len(missing) > plan_above)
        if plan:
            return unindexed(f"plan: {len(missing)} chunks to embed, nothing embedded", 0)
        if missing or not dimension:
            say(f"loading model {model_name} ({precision})")
            embedder = _embedder(model_name, precision, settings, embedder_factory)
            dimension, encoder = embedder.dimension, getattr(embedder, "encoder", None)
            say(f"embedding {len(missing)} chunks ({cached} cached)")
            deadline = None if stop_after is None else started + stop_after
            new = _texts_of(each_chunk(), set(missing)) if missing else iter(())
            with progress.task("build", len(missing), unit="rows", verb="embedded") as counted:
                for part, made in _embed_in_slices(embedder, new, counted.advance, deadline):
                    index.add_to_cache(db, model_name, part, made, precision)
                    vectors.put(part, made)
        embedded = len(missing) - sum(h not in vectors for h in missing)
        if embedded < len(missing):
            return unindexed(
                f"stopped after {stop_after:g} s with {len(missing) - embedded} of "
                f"{len(missing)} chunks still to embed: what is embedded is in the cache, "
                "so the next build goes on from there",
                embedded,
                len(missing) - embedded,
            )
        if shard is not None:  # the cache is the shard's whole output
            return unindexed(
                f"shard {shard}: vectors only, no index; join the shards with "
                "`ghindex merge` and build",
                embedded,
            )
        say("writing the index")
        # --full: beside the serving index, which keeps serving until the switch
        out = staging.begin(settings.lance_path) if full else settings.lance_path
        target = index.connect(out) if full else db
        # each item's nearest items are gathered from the chunks as they are written
        gathering = nearest.Gathering(vectors)

        def written_chunks() -> Iterator[Chunk]:
            for chunk in each_chunk():
                gathering.add(chunk)
                yield chunk

        # After text was redacted in place, older table versions and the full-text index
        # still hold the raw text: prune them so that no snapshot carries it.
        written = index.write_chunks(
            target,
            model_name,
            written_chunks(),
            vectors,
            dimension,
            precision=precision,
            prune=prune,
        )
        if prune:  # the caches still hold the vectors of the text before redaction
            index.prune_caches(db, survey.hashes)
        say("listing each item's nearest items")
        now = gathering.done()  # lets go of the chunks' vectors: the lists need the items'
        del vectors
        made_by = nearest.basis(model_name, precision)
        listed = nearest.write(out, now, made_by, reuse=not full)
        counts = survey.counts
        report = BuildReport(
            model=model_name,
            dimension=dimension,
            documents=survey.documents,
            chunks=survey.chunks,
            embedded=len(missing),
            from_cache=cached,
            to_embed=len(missing),
            seconds=round(time.perf_counter() - started, 3),
            counts=counts,
            git=git_reports,
            redactions=dict(redactions),
            notes=notes,
            precision=precision,
            encoder=encoder,
            nearest=listed,
            **written,
        )
        if full:
            write_manifest(out / settings.manifest_path.name, con, report, chunking, doc_settings)
            staging.switch(settings.lance_path, settings.manifest_path)
        else:
            write_manifest(settings.manifest_path, con, report, chunking, doc_settings)
        if embedder_factory is None:  # readers embed queries with the very same encoder
            say("writing the query encoder beside the index")
            carry(settings.lance_path, model_name, precision, keep=not missing)
        with transaction(con):
            redaction.record_index(con)
        with transaction(con):
            cursors.record_run(
                con,
                run_id=str(uuid.uuid4()),
                command="build",
                started_at=started_at,
                status="ok",
                stats=report.as_dict(),
            )
    finally:
        con.close()
    return report


def _texts_of(chunks: Iterable[Chunk], wanted: set[str]) -> Iterator[tuple[str, str]]:
    """(content hash, text) of the chunks whose hash is `wanted`, each hash once, in the
    order the chunks come."""
    for chunk in chunks:
        if chunk.content_hash in wanted:
            wanted.discard(chunk.content_hash)
            yield chunk.content_hash, chunk.text


def _embed_in_slices(
    embedder: Any,
    texts: Iterator[tuple[str, str]],
    advance: Callable[[int], None],
    deadline: float | None = None,
) -> Iterator[tuple[list[str], np.ndarray]]:
    """(content hashes, their vectors) a slice at a time, as `embedder` makes them from
    `texts` ((hash, text) pairs). Stopped (Ctrl-C, SIGTERM, a job's time limit), it first
    hands over the steps it finished since the last slice, for the caller to store, and
    then stops: a rerun embeds none of them again. Past `deadline`
    (`time.perf_counter()`), it hands them over and ends there, with the rest not
    embedded."""
    pending: list[str] = []
    made: list[np.ndarray] = []
    since = time.monotonic()
    try:
        while step := list(itertools.islice(texts, EMBED_STEP)):
            made.append(embedder.encode([text for _hash, text in step], progress=advance))
            pending += [h for h, _text in step]
            late = deadline is not None and time.perf_counter() >= deadline
            last = late or len(step) < EMBED_STEP
            if last or len(pending) >= SLICE_ROWS or time.monotonic() - since >= SLICE_SECONDS:
                ready, pending = pending, []
                yield ready, np.concatenate(made)
                made, since = [], time.monotonic()
            if late:
                return
        if pending:
            yield pending, np.concatenate(made)
    except KeyboardInterrupt:
        if pending:
            yield pending, np.concatenate(made)
        raise


@dataclass
class _Survey:
    """What a first pass over the chunks finds: how many documents and chunks, the
    documents per type, and the content hashes (each once, in order) of the chunks that
    get a vector."""

    documents: int = 0
    chunks: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    hashes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, chunks: Iterable[Chunk], with_vector: Callable[[Chunk], bool]) -> _Survey:
        found = cls()
        seen: set[str] = set()
        types: Counter[str] = Counter()
        for chunk in chunks:
            found.chunks += 1
            if chunk.index == 0:  # a document's first chunk (every document has one)
                types[chunk.document.type] += 1
            if chunk.content_hash not in seen and with_vector(chunk):
                seen.add(chunk.content_hash)
                found.hashes.append(chunk.content_hash)
        found.documents = sum(types.values())
        found.counts = dict(sorted(types.items()))
        return found


def _new_precision(model: str, settings: Settings, factory: Callable | None) -> str:
    if factory is not None:
        return FP32
    from ghindex.index.onnx_encoder import new_index_precision

    return new_index_precision(model, settings.device)


def _embedder(
    model: str, precision: str, settings: Settings, factory: Callable[[str], Any] | None
) -> Any:
    """The encoder for this build: the factory's, or the one `build_encoder` chooses."""
    if factory is None:
        from ghindex.index.onnx_encoder import build_encoder

        return build_encoder(model, precision=precision, device=settings.device)
    embedder = factory(model)
    made = getattr(embedder, "precision", precision)
    if made != precision:
        raise ConfigError(f"the encoder makes {made} vectors, not the {precision} asked for")
    return embedder


def _sync_git(con, source: GitSource, full: bool, say: Say) -> dict[str, Any]:
    """Bring the docs, commits (or wiki pages) of one clone into the state."""
    from ghindex import gitsource

    remote = None if source.repo else gitsource.repo_from_remote(source.path)
    repo = source.repo or remote.repo
    if remote is not None and remote.is_wiki != source.wiki:  # said, not taken silently
        given, other = ("--wiki", "--git") if source.wiki else ("--git", "--wiki")
        what = f"the wiki of {repo}" if remote.is_wiki else repo
        raise ConfigError(
            f"{given} {source.path} is a clone of {what}, by its remote: pass it with {other}"
        )
    web = {"web_url": remote.web_url} if remote else {}
    say(f"{repo}: reading {'wiki' if source.wiki else 'git'} sources from {source.path}")
    sync = gitsource.sync_wiki if source.wiki else gitsource.sync_git
    report = sync(con, repo, source.path, full=full, **web).as_dict()
    with transaction(con):
        report["links"] = replace_doc_links(con, repo)
    return report


def write_manifest(
    path: Path,
    con,
    report: BuildReport,
    chunking: ChunkSettings,
    doc_settings: DocumentSettings,
) -> None:
    """The workdir's manifest: what the index holds and how it was built."""
    repos: dict[str, dict[str, Any]] = {}
    for repo, surface, mark in con.execute(
        "SELECT r.repo, s.surface, s.high_water_mark FROM repos r "
        "LEFT JOIN sync_state s USING (repo) ORDER BY 1, 2"
    ).fetchall():
        cursors = repos.setdefault(repo, {"cursors": {}})["cursors"]
        if surface:
            cursors[surface] = mark.isoformat() if mark else None
    for repo, health in gaps.health(con).items():
        if repo in repos:
            repos[repo]["fetch"] = health
    redacted = redaction.stored_counts(con)
    manifest = {
        "build_id": uuid.uuid4().hex[:12],
        "format_version": FORMAT_VERSION,
        "ghindex_version": __version__,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "repos": repos,
        "model": {
            "name": report.model,
            "dimension": report.dimension,
            "precision": report.precision,
            "encoder": report.encoder,
        },
        "chunking": chunking.as_dict(),
        "documents": doc_settings.as_dict(),
        "counts": {**report.counts, "chunks": report.chunks},
        "nearest": nearest.manifest_entry(report.nearest),
        "redaction": {"rules": redaction.state_of(con), "redacted": redacted},
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
