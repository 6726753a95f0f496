"""A small Python API for notebooks and scripts, on the same `Snapshot` the CLI and the
MCP server open.

    import ghindex.api as gh
    snap = gh.open("s3://my-bucket/ghindex")   # or a store directory, a snapshot, ".ghindex"
    snap.sql("SELECT * FROM open_prs_awaiting_review").fetchall()
    for hit in snap.search("flaky test on windows", state="open", k=5):
        print(hit.entity, hit.title)
    snap.scan(label="bug", state="open", k=20)           # newest first, no query
    snap.fetch("psf/requests#6240")["comments"]
    snap.related("psf/requests#6240", hops=2)["neighbours"]
    snap.context("why do uploads time out?", max_tokens=2000)["passages"]

Text that renders as nothing (`vocabulary/hidden.py`: tag characters, zero-width
characters, ...) is removed from what `search`, `scan`, `fetch`, `related`, `context`
and `status` return, and each item that carried some counts them (`hidden_characters`);
`open(..., raw=True)` gives the stored text as it is, as `sql` always does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from ghindex.query.filters import Filters
from ghindex.query.hits import Hit
from ghindex.query.snapshot import DemoFallback, Snapshot
from ghindex.vocabulary import hidden

__all__ = ["DemoFallback", "Reader", "open"]


class Reader:
    """What `open` returns: a snapshot's read operations with keyword filters (repo,
    type, state, label(s), author, assignee, milestone, path_prefix, since, until: one
    value or a list each) and plain Python answers, with text that renders as nothing
    removed unless `raw`."""

    def __init__(self, snapshot: Snapshot, *, raw: bool = False) -> None:
        self.snapshot = snapshot
        self.raw = raw
        self.root = snapshot.root
        self.manifest = snapshot.manifest

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A read-only DuckDB connection to the state database (shared by `sql`)."""
        return self.snapshot.connect()

    def sql(self, query: str, params: list[Any] | None = None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation: `.df()` for a pandas DataFrame, `.fetchall()` for tuples,
        `.pl()` for Polars (when installed)."""
        return self.snapshot.relation(query, params)

    def search(
        self,
        query: str | None = None,
        *,
        k: int = 10,
        mode: str = "hybrid",
        rerank: bool = False,
        sort: str = "relevance",
        **filters: Any,
    ) -> list[Hit]:
        """Hybrid search over the index; without a query (None or blank), the items the
        filters select, newest first, as `ghindex search` and the MCP `search` answer."""
        response = self.snapshot.find(
            query, Filters.of(**filters), k=k, mode=mode, rerank=rerank, sort=sort
        )
        return self._hits(response.results)

    def scan(self, *, k: int = 10, sort: str = "updated_desc", **filters: Any) -> list[Hit]:
        """The items the filters select, newest first."""
        return self._hits(self.snapshot.scan(Filters.of(**filters), k=k, sort=sort).results)

    def fetch(self, handle: str, max_chars: int = 100_000) -> dict[str, Any]:
        """One item in full (what `ghindex show` prints)."""
        return self._shown(self.snapshot.show(handle, max_chars=max_chars))

    def related(self, handle: str, hops: int = 1, *, nearest: bool = True) -> dict[str, Any]:
        """Graph neighbours of one item and its nearest items (what `ghindex related`
        prints); `nearest=False` leaves the nearest items out."""
        return self._shown(self.snapshot.related(handle, hops=hops, nearest=nearest).as_dict())

    def context(self, question: str, *, max_tokens: int = 4000, **filters: Any) -> dict[str, Any]:
        """A token-budgeted pack of the passages most relevant to `question`, cited."""
        found = self.snapshot.context(question, Filters.of(**filters), max_tokens=max_tokens)
        return self._shown(found)

    def status(self) -> dict[str, Any]:
        """Snapshot id, age, repositories and their cursors, counts, model, size."""
        return self._shown(self.snapshot.status())

    def export(self, dest: str | Path) -> dict[str, Any]:
        """Every table and view as Parquet under `dest`."""
        return self.snapshot.export(Path(dest)).as_dict()

    def report(self) -> str:
        """The HTML report, as a string."""
        return self.snapshot.report().html

    def close(self) -> None:
        self.snapshot.close()

    def _shown(self, answer: dict[str, Any]) -> dict[str, Any]:
        return answer if self.raw else hidden.cleaned(answer)

    def _hits(self, hits: list[Hit]) -> list[Hit]:
        """`hits` with hidden characters removed from their texts (and their matching
        rows'), each counting them in `hidden_characters`."""
        if self.raw:
            return hits
        for hit in hits:
            shown = hidden.cleaned({k: _plain(v) for k, v in vars(hit).items()})
            count = shown.pop(hidden.MARK, 0)
            for row, plain in zip(hit.same_entity, shown.pop("same_entity", []), strict=True):
                count += plain.pop(hidden.MARK, 0)
                vars(row).update(plain)
            if count:
                vars(hit).update({k: v for k, v in shown.items() if k in vars(hit)})
                hit.hidden_characters = count
        return hits


def _plain(value: Any) -> Any:
    """A hit's field as plain values (its matching rows as dicts)."""
    if isinstance(value, list):
        return [vars(v).copy() if hasattr(v, "__dataclass_fields__") else v for v in value]
    return value


def open(location: str | Path, *, dest: str | Path | None = None, raw: bool = False) -> Reader:
    """A snapshot from a local directory (a workdir holding only the demo's: the demo),
    or the newest one of a store (a URL, `file://` or a directory published to), pulled
    into `dest` (default: the user's cache, as the CLI's `--store`), downloading only
    what changed. Reading the demo in place of a workdir's own data warns
    (`DemoFallback`), as the CLI says it on stderr. `raw`: keep text that renders as
    nothing (see above)."""
    return Reader(Snapshot.open(location, built=True, dest=dest, state="people"), raw=raw)
