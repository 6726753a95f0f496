"""What a search answers: entity hits with their best-matching row, and the response
around them. The CLI prints these, `--json` and the Python API give them as they are,
and the MCP tools map them to their own compact shape."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from ghindex.vocabulary.times import iso_time


@dataclass
class SameEntity:
    """Another row of a hit's entity that matched (a comment, a review, a file diff)."""

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
    same_entity: list[SameEntity] = field(default_factory=list)
    fixed_by: list[str] = field(default_factory=list)
    closes: list[str] = field(default_factory=list)
    near: str | None = None  # the best hit whose nearest item this is, when that lifted it
    # The representative row's whole text and vector, set per hit by `make_hit` for the
    # reranker, MMR and context packs: not fields, so never part of an answer.
    text: ClassVar[str] = ""
    vector: ClassVar[Any] = None
    row_id: ClassVar[int | None] = None  # Lance's row id when only a few columns were read
    # characters that render as nothing a door removed from it (vocabulary/hidden.py)
    hidden_characters: ClassVar[int] = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResponse:
    query: str
    mode: str
    k: int
    filters: dict[str, Any]
    results: list[Hit] = field(default_factory=list)
    filters_unmatched: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    truncated: bool | None = None  # a scan: whether more entities matched than k
    graph_results: list[dict[str, Any]] | None = None  # when asked to expand the graph

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "query": self.query,
            "mode": self.mode,
            "k": self.k,
            "filters": self.filters,
            "results": [hit.as_dict() for hit in self.results],
            "filters_unmatched": self.filters_unmatched,
            "notes": self.notes,
        }
        if self.truncated is not None:
            shown["truncated"] = self.truncated
        if self.graph_results is not None:
            shown["graph_results"] = self.graph_results
        return shown


def make_hit(
    row: dict[str, Any],
    score: float,
    dense: int | None,
    sparse: int | None,
    *,
    with_snippet: bool = True,
) -> Hit:
    """A hit whose representative is `row` of the `chunks` table."""
    text = row.get("text") or ""
    hit = Hit(
        handle=row["handle"],
        entity=row["entity"],
        type=row["type"],
        entity_type=row["entity_type"],
        repo=row.get("repo") or "",  # a retriever's row has none until read whole
        number=row.get("number"),
        title=row.get("title") or "",
        url=row.get("url") or "",
        state=row.get("state"),
        labels=list(row.get("labels") or []),
        author=row.get("author"),
        author_association=row.get("author_association"),
        updated_at=iso_time(row.get("updated_at")),
        score=round(score, 6),
        dense_rank=dense,
        sparse_rank=sparse,
        snippet=snippet(text) if with_snippet else "",
    )
    hit.text, hit.vector, hit.row_id = text, row.get("vector"), row.get("_rowid")
    return hit


def snippet(text: str, limit: int = 240, query: str = "") -> str:
    """The chunk's body (without its breadcrumb), on one line; a long one is cut around
    the first word of `query` it holds (a row's words may lie far past its start)."""
    body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
    return excerpt(re.sub(r"\s+", " ", body).strip(), limit, query)


def excerpt(text: str, limit: int, query: str = "") -> str:
    """At most `limit` characters of `text`: from its start, or from a little before the
    first word of `query` (3 letters or more) it holds, marked with … where cut."""
    if len(text) <= limit:
        return text
    lowered = text.lower()
    found = [lowered.find(w) for w in re.findall(r"\w{3,}", query.lower())]
    first = min((at for at in found if at >= 0), default=0)
    start = first - limit // 4 if first > limit // 2 else 0  # near the start: from it
    if start:  # from a word's start, not the middle of one
        start = min(text.find(" ", start) + 1 or start, first)
    piece = text[start : start + limit - (2 if start else 1)].strip()
    return ("…" if start else "") + piece + ("…" if start + limit - 1 < len(text) else "")
