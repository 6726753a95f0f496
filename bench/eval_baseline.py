"""The naive index anyone would build first, measured beside ghindex in the same run.

One row per corpus document (title + body, whole), three retrievers:

- BM25 (Okapi, k1 = 1.5, b = 0.75) over lowercase alphanumeric tokens, with a negative
  IDF raised to a quarter of the mean IDF, as the common `rank-bm25` package scores;
- dense: the same embedding model as ghindex over `title + "\\n" + body` (the model
  reads its first 256 tokens), cosine;
- hybrid: reciprocal-rank fusion (k = 60) of the two top-100 lists.

The shared eval sets' READMEs quote these baselines; printing them from the same run
keeps ghindex's margin over them honest. Document vectors are cached in the workdir
(`naive-<model hash>.npz`), keyed by the sha256 of the text.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

MODES = ("naive sparse", "naive dense", "naive hybrid")
RRF_K = 60
DEPTH = 100
_WORD = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 over whole documents."""

    def __init__(self, documents: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(tokens(d)) for d in documents]
        self.lengths = np.array([sum(c.values()) for c in self.docs], dtype=np.float64)
        self.mean_length = float(self.lengths.mean()) if len(self.docs) else 0.0
        frequency = Counter(t for c in self.docs for t in c)
        n = len(self.docs)
        idf = {t: math.log((n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}
        floor = 0.25 * (sum(idf.values()) / len(idf)) if idf else 0.0
        self.idf = {t: (v if v >= 0 else floor) for t, v in idf.items()}
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for row, counts in enumerate(self.docs):
            for term, count in counts.items():
                self.postings.setdefault(term, []).append((row, count))

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs))
        norm = self.k1 * (1 - self.b + self.b * self.lengths / max(self.mean_length, 1e-9))
        for term in tokens(query):
            for row, count in self.postings.get(term, ()):
                out[row] += self.idf[term] * count * (self.k1 + 1) / (count + norm[row])
        return out


class NaiveIndex:
    """Ranks corpus ids for a query in each of MODES."""

    def __init__(
        self,
        corpus: Sequence[dict[str, Any]],
        encoder: Any,
        cache: Path,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.ids = [r["id"] for r in corpus]
        texts = [f"{r.get('title') or ''}\n{r.get('body') or ''}".strip() for r in corpus]
        self.bm25 = BM25(texts)
        self.encoder = encoder
        self.vectors = _embed(texts, encoder, cache, progress)

    def ranking(self, query: str, mode: str) -> list[str]:
        if mode == "naive sparse":
            return self._top(self.bm25.scores(query), matched_only=True)
        if mode == "naive dense":
            return self._top(self._dense(query))
        fused: dict[str, float] = {}
        sparse = self._top(self.bm25.scores(query), matched_only=True)
        for ranked in (sparse, self._top(self._dense(query))):
            for rank, doc in enumerate(ranked, 1):
                fused[doc] = fused.get(doc, 0.0) + 1.0 / (RRF_K + rank)
        return sorted(fused, key=lambda d: -fused[d])

    def _dense(self, query: str) -> np.ndarray:
        return self.vectors @ self.encoder.encode([query])[0]

    def _top(self, scores: np.ndarray, matched_only: bool = False) -> list[str]:
        """The DEPTH best ids; for BM25 only documents sharing a word with the query."""
        order = np.argsort(-scores, kind="stable")[:DEPTH]
        return [self.ids[i] for i in order if not matched_only or scores[i] > 0]


def _embed(
    texts: Sequence[str], encoder: Any, cache: Path, progress: Callable[[str], None]
) -> np.ndarray:
    """Document vectors, from the cache file where the text was embedded before."""
    keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
    known: dict[str, np.ndarray] = {}
    if cache.exists():
        with np.load(cache) as saved:
            known = dict(zip(saved["keys"].tolist(), saved["vectors"], strict=True))
    missing = [i for i, key in enumerate(keys) if key not in known]
    if missing:
        progress(f"naive index: embedding {len(missing)} whole documents")
        fresh = encoder.encode([texts[i] for i in missing])
        known.update((keys[i], fresh[n]) for n, i in enumerate(missing))
        cache.parent.mkdir(parents=True, exist_ok=True)
        names = list(known)
        np.savez(cache, keys=np.array(names), vectors=np.stack([known[k] for k in names]))
    return np.stack([known[k] for k in keys]).astype(np.float32)
