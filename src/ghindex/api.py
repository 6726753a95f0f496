"""A small Python API for notebooks and scripts, on the same functions the CLI and
the MCP server use.

    import ghindex.api as gh
    snap = gh.open("s3://my-bucket/ghindex")          # or a local snapshot directory
    snap.sql("SELECT * FROM open_prs_awaiting_review").df()
    for hit in snap.search("flaky test on windows", state="open", k=5):
        print(hit.entity, hit.title)
    snap.fetch("psf/requests#6240")["comments"]
    snap.related("psf/requests#6240", hops=2)["neighbours"]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from ghindex.errors import SnapshotError
from ghindex.query.search import Filters, Hit, Searcher
from ghindex.snapshot.local import live_root


@dataclass
class Snapshot:
    """A local snapshot (or workdir): its state database, its index, its manifest."""

    root: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    _searcher: Searcher | None = None
    _con: duckdb.DuckDBPyConnection | None = None

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A read-only DuckDB connection to the state database (shared by `sql`)."""
        if self._con is None:
            self._con = duckdb.connect(str(self.root / "state.duckdb"), read_only=True)
        return self._con

    def sql(self, query: str, params: list[Any] | None = None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation: `.df()` for pandas, `.pl()` for Polars, `.fetchall()`."""
        return self.connect().sql(query, params=params)

    def search(self, query: str, *, k: int = 10, mode: str = "hybrid", **filters: Any) -> list[Hit]:
        """Hybrid search; filters as keyword arguments: repo, type, state, label(s), author,
        assignee, milestone, path_prefix, since, until (one value or a list each)."""
        if self._searcher is None:
            # the state through this snapshot's own connection: one configuration per file
            self._searcher = Searcher(
                self.root / "lance", state_connection=lambda: self.connect().cursor()
            )
        return self._searcher.search(query, filters=_filters(filters), k=k, mode=mode).results

    def fetch(self, handle: str, max_chars: int = 100_000) -> dict[str, Any]:
        """One item in full (what `ghindex show` prints)."""
        from ghindex.query.show import show

        return show(self.connect(), handle, max_chars=max_chars)

    def related(self, handle: str, hops: int = 1) -> dict[str, Any]:
        """Graph neighbours of one item (what `ghindex related` prints)."""
        from ghindex.query.graph import related

        return related(self.connect(), handle, hops=hops).as_dict()

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None
        if self._con is not None:
            self._con.close()
            self._con = None


def open(location: str | Path, *, dest: str | Path | None = None) -> Snapshot:
    """A snapshot from a local directory, or the newest one of a store URL (pulled into
    `dest`, default `.ghindex/snapshot`, downloading only what changed)."""
    text = str(location)
    root = Path(text).expanduser()
    if "://" in text and not text.startswith("file://"):
        from ghindex.snapshot import Store, pull

        root = Path(dest or ".ghindex/snapshot")
        pull(Store(text), root)
    root = live_root(root)
    manifest_path = root / "manifest.json"
    if not manifest_path.exists():
        raise SnapshotError(f"no snapshot in {root}: build, pull or give a store URL")
    return Snapshot(root, json.loads(manifest_path.read_text(encoding="utf-8")))


_PLURAL = {"repo": "repos", "type": "types", "state": "states", "label": "labels",
           "author": "authors", "assignee": "assignees", "milestone": "milestones"}  # fmt: skip


def _filters(given: dict[str, Any]) -> Filters:
    values: dict[str, Any] = {}
    for key, value in given.items():
        name = _PLURAL.get(key, key)
        if name in ("path_prefix", "since", "until", "created_since", "created_until"):
            values[name] = value
        else:
            values[name] = (value,) if isinstance(value, str) else tuple(value)
    return Filters(**values)
