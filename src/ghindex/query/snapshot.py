"""One snapshot on disk, behind every door.

A `Snapshot` is a directory holding `state.duckdb`, `lance/` and `manifest.json`: a
workdir, a pulled snapshot, or the newest snapshot of a store pulled first. It owns the
layout's paths, the manifest, the read-only connections to the state database and the
index's `Searcher`, and its methods are the read operations: `search` and `scan`,
`fetch`/`show`, `related`, `context`, `sql`, `status`, `export`, `report`. The CLI's
query commands, the MCP tools and the Python API open one and map their arguments onto
these methods; none of them holds SQL or ranking.

How the state database is opened is the one thing that differs between doors:

- `per_call` (the CLI): a sandboxed read-only connection per call, so nothing is held
  open between commands and a workdir stays writable;
- `held` (a pulled snapshot being served): one sandboxed connection for the snapshot's
  life, a cursor per call (a tenth of a millisecond, against ~14 ms to open the file).
  Only for a snapshot nothing writes to: a held connection stops writers;
- `people` (the Python API): one held connection without the sandbox, for analysis that
  reads or writes files of its own (`COPY ... TO`);
- a `connection` callable (a served workdir's private state copy, `serve/state_copy.py`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import duckdb

from ghindex.errors import GhindexError, SnapshotError
from ghindex.query.filters import SORTS, Filters
from ghindex.query.hits import SearchResponse
from ghindex.snapshot.status import age_seconds, created_at
from ghindex.snapshot.verify import lance_damaged, lance_fault
from ghindex.state.database import LOCK_WAIT, damaged, no_state
from ghindex.vocabulary.layout import (
    DEMO_DIR,
    MANIFEST,
    NOT_BUILT,
    SNAPSHOT_NAMES,
    STATE_FILE,
    SnapshotFiles,
    live_root,
    local_manifest,
)
from ghindex.vocabulary.limits import (
    QUERY_CHARS,
    SQL_CHARS,
    check_flag,
    check_handles,
    check_text,
)

if TYPE_CHECKING:  # the index and its libraries load only for what reads it (search)
    from ghindex.query.search import Searcher


def _names_damage(read):
    """Around a read operation: a damaged state database or index file, found only
    when a read reaches the broken block, is one line naming the file and what to do,
    not DuckDB's or Lance's words with their source paths."""

    @functools.wraps(read)
    def reading(self: Snapshot, *args: Any, **kwargs: Any) -> Any:
        try:
            return read(self, *args, **kwargs)
        except GhindexError:
            raise
        except Exception as exc:
            error = damaged(exc, self.state_path)
            if error is None and lance_fault(exc):
                error = lance_damaged(exc, f"the index ({self.lance_path.name}/)")
            if error is None:
                raise
            raise error from None

    return reading


DEFAULT_MAX_CHARS = 20_000
SQL_TIMEOUT = 10.0
_SMALLEST_ITEM = 400  # budget below which the next item waits for the next answer


class Snapshot(SnapshotFiles):
    """A snapshot directory and its read operations (see the module's docstring)."""

    def __init__(
        self,
        root: Path,
        manifest: dict[str, Any] | None = None,
        *,
        state: str = "per_call",
        connection: Callable[[], duckdb.DuckDBPyConnection] | None = None,
        source: Path | None = None,
        reranker_factory: Callable[[], Any] | None = None,
    ) -> None:
        if state not in ("per_call", "held", "people"):
            raise ValueError(f"unknown state mode {state!r}")
        self.root = Path(root)
        self.source = source or self.root  # as the user named it
        self._manifest = manifest
        self._mode = state
        self._connection = connection
        self._held: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._searcher: Searcher | None = None
        self._reranker_factory = reranker_factory
        self._views: list[str] = []  # what brings a held connection's views up to date

    @classmethod
    def open(
        cls,
        location: str | Path,
        *,
        built: bool = False,
        dest: str | Path | None = None,
        **options: Any,
    ) -> Snapshot:
        """The snapshot in a local directory (its current version; a workdir holding only
        the demo's, the demo's), or the newest one of a store (a URL, `file://` or a
        directory published to), pulled into `dest` (default: the user's cache, as the
        CLI's `--store` does) first, downloading only what changed. `built`: refuse a
        directory with no manifest (no build yet)."""
        text = str(location)
        if text.startswith("file://"):
            text = unquote(urlsplit(text).path)
        given = Path(text).expanduser()
        if "://" in text or _is_store(given):
            from ghindex.snapshot import Store, pull
            from ghindex.snapshot.local import reading_copy

            store = Store(text)
            given = Path(dest) if dest else reading_copy(store)
            pull(store, given)
        elif built and not given.exists():
            raise SnapshotError(
                f"nothing at {location}: check the path (a snapshot, a workdir or a store "
                "directory)"
            )
        else:
            demo = demo_in(given)
            if demo is not None:  # said, as the CLI says it: the reader meant their own data
                warnings.warn(
                    f"reading the demo snapshot in {demo} ({given} holds no data of its own "
                    "yet: run ghindex build there, or open the demo's directory to silence this)",
                    DemoFallback,
                    stacklevel=3,
                )
                given = demo
        root = live_root(given)
        if built and not (root / MANIFEST).exists():
            raise SnapshotError(NOT_BUILT.format(location))
        return cls(root, source=given, **options)

    # -- what it is

    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest (read on first use: reading the state or the index needs none)."""
        if self._manifest is None:
            self._manifest = self._read_manifest()
        return self._manifest

    @property
    def snapshot_id(self) -> str | None:
        """The published snapshot's id; for a local build not yet published, `local-<build>`."""
        if self.manifest.get("snapshot_id"):
            return self.manifest["snapshot_id"]
        build = self.manifest.get("build_id")
        return f"local-{build}" if build else None

    @property
    def created_at(self) -> str | None:
        return created_at(self.manifest)

    def age_seconds(self) -> int | None:
        return age_seconds(self.manifest)

    # -- what it holds open

    @contextlib.contextmanager
    def state(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection to the state database for one request, closed after it."""
        self._check_not_empty()
        if self._connection is not None:
            con = self._connection()
        elif self._mode == "per_call":  # a command: wait out a writer, check the schema
            from ghindex.query.sql import connect

            con = connect(self.state_path, wait=LOCK_WAIT, check=True)
        else:
            con = self.connect().cursor()
            for view in self._views:  # temporary views are each cursor's own
                con.execute(view)
        try:
            yield con
        finally:
            con.close()

    def _check_not_empty(self) -> None:
        """A directory holding nothing of a snapshot is named as such, with what to run."""
        if self._connection is None and not any(
            (self.root / name).exists() for name in SNAPSHOT_NAMES
        ):
            raise SnapshotError(NOT_BUILT.format(self.source))

    def connect(self) -> duckdb.DuckDBPyConnection:
        """The snapshot's held connection to the state database (opened once)."""
        with self._lock:
            if self._held is None:
                if not self.state_path.exists():
                    raise no_state(self.state_path)
                if self._mode == "people":
                    held = duckdb.connect(str(self.state_path), read_only=True)
                else:
                    from ghindex.query.sql import connect

                    held = connect(self.state_path)
                self._views = _reader_views(held, self.state_path)
                for view in self._views:
                    held.execute(view)
                self._held = held
            return self._held

    @property
    def searcher(self) -> Searcher:
        """The index's retrievers, opened on first use."""
        return self._open_searcher(embeds=False)

    def _open_searcher(self, *, embeds: bool) -> Searcher:
        """The searcher; opened for a query that `embeds`, the query encoder loads in a
        thread while the index's libraries import (`query/encoder_ahead.py`)."""
        with self._lock:
            if self._searcher is None:
                self._check_not_empty()
                options: dict[str, Any] = {}
                if embeds and self.lance_path.is_dir():
                    from ghindex.query import encoder_ahead

                    try:
                        hint = self.manifest
                    except SnapshotError:
                        hint = {}  # the manifest's own error belongs to what reads it
                    options["embedder_factory"] = encoder_ahead.start(hint, self.lance_path)
                from ghindex.query.search import Searcher

                state = self.state if self.state_path.exists() else None
                self._searcher = Searcher(
                    self.lance_path,
                    state=state,
                    reranker_factory=self._reranker_factory,
                    **options,
                )
            return self._searcher

    def close(self) -> None:
        with self._lock:
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None
            if self._held is not None:
                self._held.close()
                self._held = None

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the read operations

    @_names_damage
    def search(
        self,
        query: str,
        filters: Filters | None = None,
        *,
        k: int = 10,
        mode: str = "hybrid",
        rerank: bool = False,
        mmr: float | None = None,
        sort: str = "relevance",
        expand: bool = False,
        hops: int = 1,
    ) -> SearchResponse:
        """Hybrid (or dense, or sparse) search; results in order of relevance, or of
        update or creation time with `sort`; `expand` adds the items linked to them."""
        if sort not in SORTS:
            raise GhindexError(f"unknown sort {sort!r}: use one of {', '.join(SORTS)}")
        check_text("search", "query", query, QUERY_CHARS)
        check_flag("search", "rerank", rerank)
        check_flag("search", "graph_expand", expand)
        searcher = self._open_searcher(embeds=mode != "sparse")
        response = searcher.search(query, filters=filters, k=k, mode=mode, rerank=rerank, mmr=mmr)
        if sort == "updated_desc":
            response.results.sort(key=lambda h: h.updated_at or "", reverse=True)
        elif sort == "created_desc":  # a hit carries no creation time: look its item up
            created = self.searcher.created([h.entity for h in response.results])
            response.results.sort(key=lambda h: created.get(h.entity, ""), reverse=True)
        if expand:
            response.graph_results = self._expand(response, hops)
        return response

    def find(
        self,
        query: str | None,
        filters: Filters | None = None,
        *,
        k: int = 10,
        mode: str = "hybrid",
        rerank: bool = False,
        mmr: float | None = None,
        sort: str = "relevance",
        expand: bool = False,
        hops: int = 1,
    ) -> SearchResponse:
        """What every door's `search` answers: with a query, `search`; without one (None,
        empty or blank), `scan`: the items the filters select, newest first (by update,
        unless `sort` asks for creation)."""
        check_flag("search", "rerank", rerank)
        check_flag("search", "graph_expand", expand)
        if query is None or not query.strip():
            order = "updated_desc" if sort == "relevance" else sort
            return self.scan(filters, k=k, sort=order, expand=expand, hops=hops)
        return self.search(
            query,
            filters,
            k=k,
            mode=mode,
            rerank=rerank,
            mmr=mmr,
            sort=sort,
            expand=expand,
            hops=hops,
        )

    @_names_damage
    def scan(
        self,
        filters: Filters | None = None,
        *,
        k: int = 10,
        sort: str = "updated_desc",
        expand: bool = False,
        hops: int = 1,
    ) -> SearchResponse:
        """The items the filters select, newest first (by update, or creation with
        `sort="created_desc"`); `truncated` says whether more matched than `k`."""
        response, more = self.searcher.scan(filters=filters, k=k, sort=sort)
        response.truncated = more
        if expand:
            response.graph_results = self._expand(response, hops)
        return response

    @_names_damage
    def context(
        self, question: str, filters: Filters | None = None, *, max_tokens: int = 4000
    ) -> dict[str, Any]:
        """The passages most relevant to `question` that fit `max_tokens`, each cited."""
        from ghindex.query.context import CANDIDATES, pack

        check_text("context", "query", question, QUERY_CHARS)
        searcher = self._open_searcher(embeds=True)
        response = searcher.search(question, filters=filters, k=CANDIDATES, mode="hybrid")
        return pack(response, max_tokens)

    @_names_damage
    def show(
        self, handle: str, *, max_chars: int = DEFAULT_MAX_CHARS, skip: int = 0
    ) -> dict[str, Any]:
        """One item in full: an issue with its comments, a pull request with its reviews
        and threads, a discussion, a doc, a release, a commit with its diffs; within
        `max_chars` of JSON, from piece `skip` on (`query/show.py`)."""
        from ghindex.query.show import show

        check_handles("show", [handle])
        with self.state() as con:
            return show(con, handle, max_chars=max_chars, skip=skip)

    @_names_damage
    def fetch(
        self, handles: list[str], *, max_chars: int = DEFAULT_MAX_CHARS, skip: int = 0
    ) -> dict[str, Any]:
        """Several items in full (`items`) within `max_chars` of JSON in all, the first
        from piece `skip` on; the handles that name none (`not_found`); and, when the
        budget ran out, `next`: the `handles` and `skip` that go on where this stopped."""
        from ghindex.query.handles import UnknownHandle
        from ghindex.query.show import show, size

        check_handles("fetch", handles)
        found, missing, left = [], [], []
        room = max_chars
        with self.state() as con:
            for position, handle in enumerate(handles):
                if found and room < _SMALLEST_ITEM:
                    left = handles[position:]
                    break
                try:
                    item = show(con, handle, max_chars=room, skip=skip if not found else 0)
                except UnknownHandle:
                    missing.append(handle)
                    continue
                found.append(item)
                room -= size(item)
                if item.get("next_skip") is not None:
                    left = [handle, *handles[position + 1 :]]
                    break
        body: dict[str, Any] = {"items": found, "not_found": missing}
        if left:
            # the last item read goes on inside itself only when it was cut (a handle
            # asked for twice can be next without being cut)
            cut = found[-1].get("next_skip") if found else None
            body["next"] = {"handles": left, "skip": cut if cut is not None else 0}
        return body

    @_names_damage
    def related(
        self,
        handle: str,
        *,
        hops: int = 1,
        kinds: list[str] | tuple[str, ...] | None = None,
        history: bool = False,
        nearest: bool = True,
    ):
        """Graph neighbours of one item and (with `nearest`, when the snapshot has an
        index) the items whose text is nearest to it."""
        from ghindex.query.graph import related

        check_handles("related", [handle])
        near = self._nearest_items() if nearest and self.lance_path.exists() else None
        with self.state() as con:
            return related(
                con,
                handle,
                hops=hops,
                kinds=kinds or None,
                include_history=history,
                nearest_items=near,
            )

    def _nearest_items(self):
        """The nearest items the build listed (no model, no LanceDB), or for a snapshot
        whose manifest lists none, the index's own vector search."""
        from ghindex.index import nearest

        listed = self.manifest.get("nearest") if isinstance(self.manifest, dict) else None
        return nearest.reader(self.lance_path, listed) or self.searcher.nearest

    def sql(
        self,
        query: str,
        *,
        max_rows: int = 100,
        timeout: float = SQL_TIMEOUT,
        offset: int = 0,
        max_bytes: int | None = None,
    ):
        """One read-only statement over the state database, with row, size, memory and time
        limits, in a process of its own (`query/sql_process.py`); rows from `offset` on, and
        at most `max_bytes` of JSON (below `GHINDEX_SQL_MAX_BYTES`)."""
        from ghindex.query import sql_process
        from ghindex.query.sql import database_path

        with self.state() as con:  # checks the schema, and names the file it reads
            path = database_path(con)
            views = self._views if self._held is not None else _reader_views(con, Path(path))
        check_text("sql", "query", query, SQL_CHARS)
        return sql_process.run(
            Path(path), views, query, max_rows, timeout, offset=offset, max_bytes=max_bytes
        )

    def relation(self, query: str, params: list[Any] | None = None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation on the held connection: `.df()`, `.pl()`, `.fetchall()`."""
        return self.connect().sql(query, params=params)

    @_names_damage
    def status(self, *, check: bool = True) -> dict[str, Any]:
        """Snapshot id, age, repositories and their cursors, counts, model, size, and
        (`check`) whether its state and index open; `check=False` reads the manifest
        alone (a server's status, answered while queries run)."""
        from ghindex.snapshot.status import local_status, manifest_summary

        if check:
            return local_status(self.source)
        return manifest_summary(self.root, self.manifest, source=str(self.source))

    @_names_damage
    def export(self, dest: Path, *, partition: bool | None = None):
        """Every table and view as Parquet under `dest`."""
        from ghindex.analysis.export import export

        return export(self.state_path, Path(dest), partition=partition)

    @_names_damage
    def report(self):
        """A self-contained HTML page with charts of the project's flow (`.html`), and
        counts of what it shows."""
        from ghindex.analysis.report import render

        return render(self.state_path)

    # -- helpers

    def _read_manifest(self) -> dict[str, Any]:
        # none: fetched but not built yet (the state answers, the index does not)
        return local_manifest(self.manifest_path) or {}

    def _expand(self, response: SearchResponse, hops: int) -> list[dict[str, Any]]:
        """Items linked to the results (not among them), each with where it was reached from."""
        from ghindex.query.graph import neighbours
        from ghindex.query.handles import UnknownHandle

        shown = {h.entity for h in response.results}
        found: dict[str, dict[str, Any]] = {}
        with self.state() as con:
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


def _reader_views(con: duckdb.DuckDBPyConnection, path: Path) -> list[str]:
    """The views a held connection to an older state needs (`reader_views`); a state a
    reader cannot bring up to date is held as it is, as before."""
    from ghindex.state.database import reader_views

    try:
        return reader_views(con, path)
    except GhindexError:
        return []


class DemoFallback(UserWarning):
    """`Snapshot.open` of a workdir that holds only the demo's snapshot reads the demo."""


def demo_in(workdir: Path) -> Path | None:
    """The snapshot `ghindex demo` built in WORKDIR/demo, when WORKDIR holds no fetch,
    build or pull of its own: every door then reads it, so what the demo suggests works
    as typed. A build or fetch that failed before storing anything (an empty
    state.duckdb, an empty lance/) is no data of its own; real data always wins."""
    from ghindex.state.database import holds_data

    root = live_root(workdir)
    if (root / MANIFEST).exists() or holds_data(root / STATE_FILE):
        return None
    demo = live_root(workdir / DEMO_DIR)
    return demo if (demo / MANIFEST).exists() else None


def _is_store(path: Path) -> bool:
    """Whether a local directory is a store (published to) rather than a snapshot."""
    return (path / "refs").is_dir() and not (path / MANIFEST).exists()
