"""Retrieval quality of ghindex on an eval set: recall@k, MRR@k and nDCG@k per search
mode and task, and query latency per mode.

    python -m bench.eval_retrieval /work/shared/eval/httpx-changelog
    python -m bench.eval_retrieval DIR --json --limit-queries 60
    python -m bench.eval_retrieval DIR --limit-queries 20 --limit-docs 200

--limit-queries takes N queries spread evenly over the file; --limit-docs keeps the
documents those queries need (relevant and excluded) and fills up with others.

An eval set is a folder with `corpus.jsonl` and `queries.jsonl` (see
/work/shared/eval/README.md). Its corpus goes into a fresh state database the way
ghindex's own readers store what they read (eval_corpus.py), then
`ghindex.index.build.build` derives documents and chunks and embeds them, and
`ghindex.query.search.Searcher` answers every query in every mode: the numbers are
those of the product's own paths.

Results map back to corpus ids by handle: a hit counts for its `entity` (a file
diff's commit, a comment's issue; for a result without one, the commit of an
'owner/repo@<sha>:<path>' handle), followed by the hit's own row when that is a
corpus record too. A query's `exclude_ids` are dropped from the ranking before
the top k is cut. Relevant ids missing from the (possibly limited) corpus are
left out of scoring with a warning; a query with none left is skipped.

The workdir (default bench/.cache/eval-<set>) keeps the LanceDB index and its
embedding cache between runs, so only new chunk texts are embedded again; the
state database is rebuilt every run. Embedding is saved to the cache slice by
slice, so an interrupted run resumes where it stopped.

With --json, stdout is one object {mode: {task: {"recall@10", "mrr@10",
"ndcg@10", "n"}}}; tasks of hybrid+rerank also say whether a rerank happened
("reranked"). Latency, build counts and warnings go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import json
import math
import os
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.eval_baseline import MODES as NAIVE_MODES
from bench.eval_baseline import NaiveIndex
from bench.eval_corpus import EvalSet, Loaded, read_set, say, store_corpus
from ghindex.config import (
    DEFAULT_GRAPHQL_URL,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    PRECISIONS,
    Settings,
)
from ghindex.errors import GhindexError
from ghindex.index import table as index
from ghindex.index.build import build
from ghindex.index.chunking import ChunkSettings
from ghindex.index.documents import DocumentSettings
from ghindex.index.onnx_encoder import build_encoder, query_encoder
from ghindex.progress import Progress
from ghindex.query.search import Searcher
from ghindex.query.snapshot import Snapshot
from ghindex.state.database import open_state

MODES = ("sparse", "dense", "hybrid", "hybrid+rerank")
TEXT_ONLY = "hybrid, text only"  # hybrid without lifting what closes / fixes a hit
RERANK_MODEL_ENV = "GHINDEX_RERANK_MODEL"  # read by ghindex.query.rerank
CACHE = Path(__file__).resolve().parent / ".cache"
EMBED_SLICE = 256  # chunks embedded (and cached) per progress line
_FILE_HANDLE = re.compile(r"^([^/\s]+/[^/\s@:#]+@[0-9a-fA-F]{7,64}):")


# ----------------------------------------------------------------------- building


class CheckpointEmbedder:
    """Wraps an encoder to embed long lists in slices, saying how far it got and adding
    each slice to the index's embedding cache as soon as it is done.

    Cache keys are the sha256 of the text, as chunking computes `content_hash`.
    """

    def __init__(self, inner: Any, *, lance_path: Path, progress: Callable[[str], None]) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.precision = getattr(inner, "precision", DEFAULT_PRECISION)
        self.encoder = getattr(inner, "encoder", None)
        self.lance_path = lance_path
        self.progress = progress

    def encode(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        if len(texts) <= EMBED_SLICE:
            return self.inner.encode(texts, progress)
        db = index.connect(self.lance_path)
        started, parts = time.perf_counter(), []
        for start in range(0, len(texts), EMBED_SLICE):
            part = list(texts[start : start + EMBED_SLICE])
            vectors = self.inner.encode(part, progress)
            hashes = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in part]
            index.add_to_cache(db, self.name, hashes, vectors, self.precision)
            parts.append(vectors)
            done = start + len(part)
            rate = done / max(time.perf_counter() - started, 1e-9)
            left = (len(texts) - done) / rate
            self.progress(f"embedded {done}/{len(texts)} chunks ({rate:.0f}/s, ~{left:.0f} s left)")
        return np.concatenate(parts)


def build_index(
    workdir: Path,
    model: str,
    eval_set: EvalSet,
    chunking: ChunkSettings | None = None,
    precision: str = DEFAULT_PRECISION,
    documents: DocumentSettings | None = None,
) -> tuple[Settings, Loaded, Any]:
    settings = Settings(workdir=workdir, graphql_url=DEFAULT_GRAPHQL_URL, model=model)
    for stale in (settings.state_path, settings.state_path.with_name("state.duckdb.wal")):
        stale.unlink(missing_ok=True)
    con = open_state(settings.state_path)
    try:
        loaded = store_corpus(con, eval_set.corpus)
    finally:
        con.close()
    say(f"stored {', '.join(f'{n} {t}' for t, n in sorted(loaded.stored.items()) if n)}")
    for reason, n in sorted(loaded.skipped.items()):
        say(f"warning: skipped {n} record(s): {reason}")

    def factory(name: str) -> CheckpointEmbedder:
        inner = build_encoder(name, precision=precision)
        return CheckpointEmbedder(inner, lance_path=settings.lance_path, progress=say)

    started = time.perf_counter()
    report = build(
        settings,
        model=model,
        embedder_factory=factory,
        progress=Progress(say),
        chunking=chunking,
        precision=precision,
        full=True,  # full: the chunks may be of another precision
        doc_settings=documents,
    )
    say(
        f"built in {time.perf_counter() - started:.1f} s: {report.documents} documents "
        f"{report.counts}, {report.chunks} chunks, {report.embedded} embedded, "
        f"{report.from_cache} from cache"
    )
    return settings, loaded, report


# ----------------------------------------------------------------------- querying


def commit_of(handle: str) -> str | None:
    """'owner/repo@<sha>' of a file diff handle 'owner/repo@<sha>:<path>'."""
    match = _FILE_HANDLE.match(handle)
    return match[1] if match else None


def ranked_ids(hits: Sequence[Any], handles: dict[str, str]) -> list[str]:
    """Corpus ids in rank order. A hit stands for its entity (a file diff's commit, a
    comment's issue); when the row that represents it is a corpus record of its own
    (a comment in a corpus that has comments), that record follows the entity. A hit
    that is no corpus record keeps its place under a name that cannot be relevant."""
    ranking: list[str] = []
    for hit in hits:
        entity = getattr(hit, "entity", None)
        keys = (entity, commit_of(hit.handle), hit.handle)
        found = [handles[key] for key in dict.fromkeys(keys) if key and key in handles]
        for name in dict.fromkeys(found or [f"?{entity or hit.handle}"]):
            if name not in ranking:
                ranking.append(name)
    return ranking


def scores(ranking: Sequence[str], relevant: set[str], k: int) -> tuple[float, float, float]:
    """recall@k, reciprocal rank within k, and nDCG@k with binary gains."""
    top = list(ranking[:k])
    found = [rank for rank, doc in enumerate(top, 1) if doc in relevant]
    recall = len(found) / len(relevant)
    rr = 1.0 / found[0] if found else 0.0
    dcg = sum(1.0 / math.log2(rank + 1) for rank in found)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(relevant), k) + 1))
    return recall, rr, dcg / ideal


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass
class Run:
    """Per mode: per-task score lists and latencies; whether hybrid+rerank reranked."""

    scores: dict[str, dict[str, list[tuple[float, float, float]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    latency_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    reranked: bool = False


class Querier:
    """Asks the Searcher for one query's ranking of corpus ids in one mode."""

    def __init__(self, searcher: Searcher) -> None:
        self.searcher = searcher
        self.can_rerank = "rerank" in inspect.signature(searcher.search).parameters
        self.rerank_notes: Counter = Counter()  # why a query was not reranked

    def ranking(
        self, query: str, mode: str, k: int, exclude: set[str], handles: dict[str, str]
    ) -> tuple[list[str], float, bool]:
        """The top k corpus ids without excluded ones, the first call's latency (ms),
        and whether the results were reranked."""
        rerank = mode == "hybrid+rerank"
        args = {"mode": "hybrid", "rerank": True} if rerank else {"mode": mode}
        depth, latency, reranked = k + len(exclude), None, False
        while True:
            started = time.perf_counter()
            response = self.searcher.search(query, k=depth, **args)
            if latency is None:
                latency = (time.perf_counter() - started) * 1000
                reranked = rerank and self._reranked(response)
            ranking = [i for i in ranked_ids(response.results, handles) if i not in exclude]
            # hits of one entity collapsed: ask deeper while the index has more to give
            if len(ranking) >= k or len(response.results) < depth or depth >= 8 * (k + 1):
                return ranking[:k], latency, reranked
            depth *= 2

    def _reranked(self, response: Any) -> bool:
        """A rerank happened when a hit carries a rerank score; notes say why not."""
        if any(getattr(hit, "rerank_score", None) is not None for hit in response.results):
            return True
        notes = [n for n in getattr(response, "notes", []) if "rerank" in n.lower()]
        self.rerank_notes[notes[0] if notes else "no hit carries a rerank score"] += 1
        return False


def evaluate(
    querier: Querier,
    queries: Sequence[dict[str, Any]],
    handles: dict[str, str],
    modes: Sequence[str],
    k: int,
) -> Run:
    """Score every query in every mode. hybrid+rerank falls back to hybrid's numbers,
    marked not reranked, when ghindex cannot rerank (no `rerank` argument, the
    rerank fails, or a query comes back without rerank scores)."""
    run = Run()
    pending = list(modes)
    if "hybrid+rerank" in pending and not _rerank_works(querier, queries, handles, k):
        pending = list(dict.fromkeys(m if m != "hybrid+rerank" else "hybrid" for m in pending))
    for mode in pending:
        if queries:  # loads the models and warms caches, untimed
            querier.ranking(queries[0]["query"], mode, k, set(), handles)
        querier.rerank_notes.clear()
        started, reranked = time.perf_counter(), 0
        for n, query in enumerate(queries, 1):
            exclude = set(query.get("exclude_ids") or ())
            ranking, ms, was = querier.ranking(query["query"], mode, k, exclude, handles)
            run.scores[mode][query["task"]].append(scores(ranking, set(query["relevant"]), k))
            run.latency_ms[mode].append(ms)
            reranked += was
            if n % 50 == 0 or n == len(queries):
                say(f"{mode}: {n}/{len(queries)} queries ({time.perf_counter() - started:.0f} s)")
        if mode == "hybrid+rerank":
            run.reranked = reranked == len(queries) > 0
            for note, n in querier.rerank_notes.items():
                say(f"note: {n} quer(y/ies) of hybrid+rerank not reranked: {note}")
    if "hybrid+rerank" in modes and "hybrid+rerank" not in pending:
        run.scores["hybrid+rerank"] = run.scores["hybrid"]
    return run


def _rerank_works(
    querier: Querier, queries: Sequence[dict[str, Any]], handles: dict[str, str], k: int
) -> bool:
    """Try one reranked query; say why hybrid+rerank falls back to hybrid if it
    fails or comes back without rerank scores."""
    reason = None
    if not querier.can_rerank:
        reason = "Searcher.search takes no `rerank` argument"
    elif queries:
        try:
            _, _, reranked = querier.ranking(
                queries[0]["query"], "hybrid+rerank", k, set(), handles
            )
        except Exception as exc:  # a broken rerank must not cost the other modes
            reason = f"the rerank failed ({type(exc).__name__}: {exc})"
        else:
            if not reranked:
                reason = next(iter(querier.rerank_notes), "no rerank scores")
    if reason:
        say(f"note: hybrid+rerank not available: {reason}; it reports hybrid's numbers")
    return reason is None


def scorable(queries: Sequence[dict[str, Any]], corpus_ids: set[str]) -> list[dict[str, Any]]:
    """Queries with their relevant ids cut to the corpus; warns about what is missing."""
    kept, missing, empty = [], 0, 0
    for query in queries:
        relevant = [i for i in query["relevant_ids"] if i in corpus_ids]
        missing += len(query["relevant_ids"]) - len(relevant)
        if relevant:
            kept.append({**query, "relevant": relevant})
        else:
            empty += 1
    if missing:
        say(f"warning: {missing} relevant id(s) are not in the corpus: left out of scoring")
    if empty:
        say(f"warning: {empty} quer(y/ies) have no relevant document in the corpus: skipped")
    return kept


def unindexed(searcher: Searcher, handles: dict[str, str], wanted: set[str]) -> int:
    """How many of the corpus ids in `wanted` no chunk of the index belongs to."""
    names = [c for c in ("handle", "entity") if c in searcher.table.schema.names]
    table = searcher.table.to_arrow().select(names)
    keys = {v for column in names for v in table.column(column).to_pylist() if v}
    keys |= {c for c in map(commit_of, list(keys)) if c}
    indexed = {i for h, i in handles.items() if h in keys}
    return len(wanted - indexed)


# ------------------------------------------------------------------------ reports


def summary(run: Run, modes: Sequence[str], tasks: Sequence[str], k: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for mode in modes:
        result[mode] = {}
        for task in tasks:
            rows = run.scores[mode].get(task, [])
            n = len(rows)
            means = [sum(r[i] for r in rows) / n if n else 0.0 for i in range(3)]
            entry: dict[str, Any] = {
                f"recall@{k}": round(means[0], 4),
                f"mrr@{k}": round(means[1], 4),
                f"ndcg@{k}": round(means[2], 4),
                "n": n,
            }
            if mode == "hybrid+rerank":
                entry["reranked"] = run.reranked
            result[mode][task] = entry
    return result


def markdown(result: dict[str, Any], run: Run, k: int) -> str:
    lines = [
        f"| mode | task | n | recall@{k} | MRR@{k} | nDCG@{k} |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for mode, tasks in result.items():
        label = (
            mode if mode != "hybrid+rerank" or run.reranked else f"{mode} (not available: hybrid)"
        )
        for task, m in tasks.items():
            lines.append(
                f"| {label} | {task} | {m['n']} | {m[f'recall@{k}']:.3f} "
                f"| {m[f'mrr@{k}']:.3f} | {m[f'ndcg@{k}']:.3f} |"
            )
    return "\n".join(lines)


def margin_table(run: Run, k: int, ours: Sequence[str], theirs: str = "naive hybrid") -> str:
    """Per mode of `ours` and task: recall@k minus that of `theirs`, its paired-bootstrap
    95% interval, and how many queries each side ranked better (a small set moves in few
    queries)."""
    lines = [
        f"| mode | task | n | R@{k} | {theirs} R@{k} | difference | 95% interval "
        "| queries better / worse |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    rng = np.random.default_rng(0)
    for mode in ours:
        for task, rows in run.scores.get(mode, {}).items():
            other = run.scores.get(theirs, {}).get(task)
            if not other or len(other) != len(rows):
                continue
            diffs = np.array([a[0] - b[0] for a, b in zip(rows, other, strict=True)])
            draws = rng.integers(0, len(diffs), size=(2000, len(diffs)))
            low, high = np.percentile(diffs[draws].mean(axis=1), [2.5, 97.5])
            mine, base = np.mean([r[0] for r in rows]), np.mean([r[0] for r in other])
            lines.append(
                f"| {mode} | {task} | {len(rows)} | {mine:.3f} | {base:.3f} | {mine - base:+.3f} "
                f"| {low:+.3f} .. {high:+.3f} "
                f"| {int((diffs > 0).sum())} / {int((diffs < 0).sum())} |"
            )
    return "\n".join(lines)


def latency_table(run: Run, modes: Sequence[str]) -> str:
    lines = ["| mode | queries | p50 ms | p95 ms |", "|---|---:|---:|---:|"]
    for mode in modes:
        values = run.latency_ms.get(mode)  # none for a hybrid+rerank that fell back
        if values:
            p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
            label = mode if mode != "hybrid+rerank" or run.reranked else f"{mode} (not reranked)"
            lines.append(f"| {label} | {len(values)} | {p50:.1f} | {p95:.1f} |")
        else:
            lines.append(f"| {mode} | 0 | n/a | n/a |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def budget_pair(text: str) -> tuple[str, int]:
    name, _, rows = text.partition("=")
    if not name or not rows.isdigit():
        raise argparse.ArgumentTypeError(f"expected TYPE=ROWS, not {text!r}")
    return name, int(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Index an eval set with ghindex and report recall, MRR and nDCG per mode."
    )
    parser.add_argument("set", type=Path, help="eval set folder (corpus.jsonl, queries.jsonl)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--workdir", type=Path, help="default: bench/.cache/eval-<set>")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--model", default=DEFAULT_MODEL, help="embedding model")
    parser.add_argument(
        "--rerank-model",
        help="cross-encoder for hybrid+rerank (sets GHINDEX_RERANK_MODEL for the run)",
    )
    parser.add_argument("--limit-queries", type=int, help="N queries spread over the file")
    parser.add_argument("--limit-docs", type=int, help="the queries' documents, then others")
    parser.add_argument("--k", type=int, default=10, help="cut-off of every metric")
    parser.add_argument(
        "--budget",
        nargs="*",
        type=budget_pair,
        metavar="TYPE=ROWS",
        help="rows per document of a type (e.g. diff=2 issue=2), replacing the default "
        "budget; --budget alone: every piece",
    )
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION)
    parser.add_argument(
        "--no-commit-summary",
        dest="commit_summary",
        action="store_false",
        help="no row of each commit's message and files beside its file diffs",
    )
    parser.add_argument("--tail-tokens", type=int, help="text a budget's last row carries")
    parser.add_argument(
        "--no-baseline",
        dest="baseline",
        action="store_false",
        help="skip the naive whole-document index (BM25 + dense + RRF) measured beside",
    )
    args = parser.parse_args(argv)
    if args.k < 1:
        parser.error("--k must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    modes = [m for m in MODES if m in args.modes]
    out = sys.stdout
    previous = os.environ.get(RERANK_MODEL_ENV)
    if args.rerank_model:
        os.environ[RERANK_MODEL_ENV] = args.rerank_model
    try:
        # stdout carries only the result: anything a library prints goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            result, run = run_eval(args, modes)
    except GhindexError as exc:
        say(f"error: {exc}")
        return 1
    finally:
        if args.rerank_model:
            os.environ.pop(RERANK_MODEL_ENV, None)
            if previous is not None:
                os.environ[RERANK_MODEL_ENV] = previous
    margin = ""
    if args.baseline and "hybrid" in modes:
        margin = margin_table(run, args.k, ["hybrid", TEXT_ONLY])
    if args.json:
        print(latency_table(run, modes), file=sys.stderr)
        if margin:
            print(margin, file=sys.stderr)
        print(json.dumps(result), file=out)
    else:
        print(markdown(result, run, args.k), file=out)
        print(file=out)
        if margin:
            print(margin, file=out)
            print(file=out)
        print(latency_table(run, [*modes, TEXT_ONLY]), file=out)
    return 0


def run_eval(args: argparse.Namespace, modes: Sequence[str]) -> tuple[dict[str, Any], Run]:
    eval_set = read_set(args.set, args.limit_queries, args.limit_docs)
    workdir = args.workdir or CACHE / f"eval-{eval_set.name}"
    say(
        f"{eval_set.name}: {len(eval_set.corpus)} documents, {len(eval_set.queries)} queries; "
        f"workdir {workdir}"
    )
    chunking = ChunkSettings()
    if args.budget is not None:
        chunking = replace(chunking, budget=tuple(args.budget))
    if args.tail_tokens is not None:
        chunking = replace(chunking, tail_tokens=args.tail_tokens)
    documents = DocumentSettings(commit_summary=args.commit_summary)
    settings, loaded, report = build_index(
        workdir, args.model, eval_set, chunking, args.precision, documents
    )
    per_document = report.chunks / max(len(eval_set.corpus), 1)
    say(f"embedded rows per corpus document: {per_document:.2f} ({report.chunks} rows)")
    tasks = list(dict.fromkeys(q["task"] for q in eval_set.queries))
    queries = scorable(eval_set.queries, set(loaded.handles.values()))
    # the state held open, as `serve` holds it: latencies are a served search's
    held = Snapshot(settings.lance_path.parent, state="held")
    searcher = Searcher(settings.lance_path, state=held.state)
    relevant = {i for q in queries for i in q["relevant"]}
    missing = unindexed(searcher, loaded.handles, relevant)
    if missing:
        say(
            f"warning: {missing} of {len(relevant)} relevant documents have no chunk in the "
            "index (ghindex does not index their type): they count as misses"
        )
    run = evaluate(Querier(searcher), queries, loaded.handles, modes, args.k)
    shown = list(modes)
    if "hybrid" in modes:  # the same searcher without lifting linked items: text alone
        searcher.link_weight = 0.0
        alone = evaluate(Querier(searcher), queries, loaded.handles, ["hybrid"], args.k)
        run.scores[TEXT_ONLY] = alone.scores["hybrid"]
        run.latency_ms[TEXT_ONLY] = alone.latency_ms["hybrid"]
        shown.append(TEXT_ONLY)
    searcher.close()
    held.close()
    if args.baseline:
        naive = NaiveIndex(
            eval_set.corpus,
            query_encoder(args.model, args.precision),
            workdir / f"naive-vectors-{args.precision}.npz",
            progress=say,
        )
        evaluate_naive(naive, queries, run, args.k)
        shown += list(NAIVE_MODES)
    return summary(run, shown, tasks, args.k), run


def evaluate_naive(naive: NaiveIndex, queries: Sequence[dict[str, Any]], run: Run, k: int) -> None:
    """The naive whole-document index's scores, into the same run."""
    for mode in NAIVE_MODES:
        for query in queries:
            exclude = set(query.get("exclude_ids") or ())
            started = time.perf_counter()
            ranking = [i for i in naive.ranking(query["query"], mode) if i not in exclude]
            run.latency_ms[mode].append((time.perf_counter() - started) * 1000)
            run.scores[mode][query["task"]].append(scores(ranking, set(query["relevant"]), k))


if __name__ == "__main__":
    sys.exit(main())
