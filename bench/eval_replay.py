"""Ranking variants measured in seconds: each query's retriever lists are read once from
the product's own Searcher, then the text-only hybrid ranking is replayed in memory with
each variant's settings, on every eval set given.

    python -m bench.eval_replay SET [SET ...] --variant rrf_k=12 \\
        --variant "title_boost=1.5 type_cap=5"

A variant is space-separated `name=value` pairs of REPLAYED; `defaults` (always shown
first) is the product as it is. Each set's index is the one `eval_retrieval.py` built
in its workdir (default bench/.cache/eval-<set>): run that first, for the same set.

What is replayed is `Searcher.search` in hybrid mode with no filters and `link_weight`
0 (the "hybrid, text only" row of eval_retrieval.py): the two BM25 lists (text, title)
merged by `by_title`, the kNN list, `fuse`, `lift_nearest` (the best hit's nearest items
as the build listed them), `cap_types`, the exact-identifier hits first,
each query asked for k + its excluded ids as `eval_retrieval.Querier` asks. With the
defaults it gives the same ranking as the real search (tests/test_eval_retrieval.py);
only a query whose first answer falls short of k after exclusion, which the Querier
asks again deeper, can differ. Lists are read LIST_DEPTH rows deep, so depths past that
are refused.

Printed: recall@k and MRR@k per set and task for each variant, its difference to the
defaults, and how many queries it ranks better / worse (a small set moves in few
queries).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.eval_corpus import read_set, say, store_corpus
from bench.eval_retrieval import CACHE, ranked_ids, scorable, scores
from ghindex.query import fusion
from ghindex.query.search import (
    DEPTH,
    NEAR_WEIGHT,
    TITLE_BOOST,
    Searcher,
    _may_be_identifier,
    by_title,
    lift_nearest,
)
from ghindex.state.database import open_state

LIST_DEPTH = 300  # rows read from each retriever per query


@dataclass(frozen=True)
class Variant:
    """The settings a replay can change; each default is the product's own."""

    rrf_k: float = fusion.RRF_K
    near_weight: float = NEAR_WEIGHT
    title_boost: float = TITLE_BOOST
    type_cap: int = fusion.TYPE_CAP
    type_block: int = fusion.TYPE_BLOCK
    dense_depth: int = 0  # rows of the kNN list fused; 0: the product's rule (DEPTH)
    sparse_depth: int = 0  # rows of each BM25 list; 0: the product's rule

    @classmethod
    def parse(cls, text: str) -> Variant:
        known = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for pair in text.split():
            name, _, value = pair.partition("=")
            if name not in known or not value:
                raise ValueError(f"{pair!r}: expected name=value, name one of {', '.join(known)}")
            values[name] = float(value) if known[name] == "float" else int(value)
        variant = replace(cls(), **values)
        if max(variant.dense_depth, variant.sparse_depth) > LIST_DEPTH:
            raise ValueError(f"{text!r}: depths are replayed up to {LIST_DEPTH} rows")
        return variant


REPLAYED = [f.name for f in fields(Variant)]


@dataclass
class Lists:
    """One query's retriever lists, as the Searcher's retrievers return them."""

    query: dict[str, Any]
    dense: list[dict[str, Any]]
    text: list[dict[str, Any]]
    title: list[dict[str, Any]]
    exact: list[Any]
    near: Callable[[str], list[tuple[str, str, float]]]  # the build's nearest lists


def read_lists(searcher: Searcher, queries: Sequence[dict[str, Any]]) -> list[Lists]:
    out = []
    for query in queries:
        words = query["query"]
        exact = searcher._exact(words.strip(), None) if _may_be_identifier(words) else []
        out.append(
            Lists(
                query,
                searcher._dense(words, None, LIST_DEPTH),
                searcher._light(searcher._match(words, "text", None, LIST_DEPTH)),
                searcher._light(searcher._match(words, "head_title", None, LIST_DEPTH)),
                [SimpleNamespace(handle=h.handle, entity=h.entity) for h in exact],
                searcher.listed_near,
            )
        )
    return out


def ranking(lists: Lists, variant: Variant, k: int, handles: dict[str, str]) -> list[str]:
    """The top k corpus ids of one query under `variant`, excluded ids dropped."""
    exclude = set(lists.query.get("exclude_ids") or ())
    asked = k + len(exclude)  # as eval_retrieval.Querier asks
    depth = max(DEPTH[0], DEPTH[1] * asked)
    dense = lists.dense[: variant.dense_depth or depth]
    sparse_depth = variant.sparse_depth or depth
    sparse = by_title(
        lists.text[:sparse_depth], lists.title[:sparse_depth], sparse_depth, variant.title_boost
    )
    ranked = fusion.fuse(dense, sparse, "hybrid", rrf_k=variant.rrf_k)
    if variant.near_weight and ranked:
        near = lists.near(ranked[0].entity)
        kinds = {handle: kind for handle, kind, _ in near}

        def heads(entities: list[str], where: str | None) -> list[Any]:
            return [
                SimpleNamespace(entity=e, handle=e, entity_type=kinds[e], score=0.0)
                for e in entities
            ]

        ranked = lift_nearest(ranked, near, heads, None, variant.near_weight)
    found = {e.entity for e in lists.exact}
    ranked = [h for h in ranked if h.entity not in found]
    ranked = fusion.cap_types(ranked, variant.type_cap, variant.type_block)
    shown = (lists.exact + ranked)[:asked]
    return [i for i in ranked_ids(shown, handles) if i not in exclude][:k]


def replay(
    sets: Sequence[tuple[str, list[Lists], dict[str, str]]], variants: Sequence[Variant], k: int
) -> dict[Variant, dict[tuple[str, str], list[tuple[float, float]]]]:
    """Per variant, per (set, task): each query's recall@k and reciprocal rank."""
    out: dict[Variant, dict[tuple[str, str], list[tuple[float, float]]]] = {}
    for variant in variants:
        per: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for name, queries, handles in sets:
            for lists in queries:
                ranked = ranking(lists, variant, k, handles)
                recall, rr, _ = scores(ranked, set(lists.query["relevant"]), k)
                per[(name, lists.query["task"])].append((recall, rr))
        out[variant] = per
    return out


def load(folder: Path, workdir: Path | None) -> tuple[str, list[Lists], dict[str, str]]:
    eval_set = read_set(folder, None, None)
    lance = (workdir or CACHE / f"eval-{eval_set.name}") / "lance"
    with tempfile.TemporaryDirectory() as scratch:  # only for the corpus ids' handles
        con = open_state(Path(scratch) / "state.duckdb")
        try:
            loaded = store_corpus(con, eval_set.corpus)
        finally:
            con.close()
    queries = scorable(eval_set.queries, set(loaded.handles.values()))
    searcher = Searcher(lance, link_weight=0.0)
    try:
        lists = read_lists(searcher, queries)
    finally:
        searcher.close()
    say(f"{eval_set.name}: {len(lists)} queries' lists read from {lance}")
    return eval_set.name, lists, loaded.handles


def label(variant: Variant) -> str:
    changed = [
        f"{f.name}={getattr(variant, f.name):g}"
        for f in fields(Variant)
        if getattr(variant, f.name) != f.default
    ]
    return " ".join(changed) or "defaults"


def table(results: dict[Variant, dict[tuple[str, str], list[tuple[float, float]]]], k: int) -> str:
    """recall@k, then MRR@k: a table each."""
    return "\n\n".join(
        _table(results, k, at, name) for at, name in ((0, f"recall@{k}"), (1, f"MRR@{k}"))
    )


def _table(
    results: dict[Variant, dict[tuple[str, str], list[tuple[float, float]]]],
    k: int,
    at: int,
    metric: str,
) -> str:
    base = {key: [q[at] for q in rows] for key, rows in next(iter(results.values())).items()}
    keys = list(base)
    head = " | ".join(f"{name} · {task}" for name, task in keys)
    lines = [f"| variant | {head} |", "|---|" + "---:|" * len(keys)]
    for position, (variant, per) in enumerate(results.items()):
        cells = []
        for key in keys:
            mine, theirs = [q[at] for q in per[key]], base[key]
            mean = sum(mine) / len(mine)
            if position == 0:
                cells.append(f"{mean:.3f}")
                continue
            better = sum(a > b for a, b in zip(mine, theirs, strict=True))
            worse = sum(a < b for a, b in zip(mine, theirs, strict=True))
            delta = mean - sum(theirs) / len(theirs)
            cells.append(f"{mean:.3f} ({delta:+.3f}, {better}/{worse})")
        lines.append(f"| {label(variant)} | " + " | ".join(cells) + " |")
    title = f"{metric}, text-only hybrid (difference to defaults, queries better/worse)"
    return title + "\n" + "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Replay ranking variants over each eval set's retriever lists."
    )
    parser.add_argument("sets", nargs="+", type=Path, help="eval set folders")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help=f"space-separated name=value pairs, names: {', '.join(REPLAYED)}",
    )
    parser.add_argument("--workdir", type=Path, help="one set only: its eval_retrieval workdir")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)
    if args.workdir and len(args.sets) > 1:
        parser.error("--workdir names one set's workdir: give one set")
    try:
        variants = [Variant(), *(Variant.parse(v) for v in args.variant)]
    except ValueError as exc:
        parser.error(str(exc))
    sets = [load(folder, args.workdir) for folder in args.sets]
    print(table(replay(sets, list(dict.fromkeys(variants)), args.k), args.k))
    return 0


if __name__ == "__main__":
    sys.exit(main())
