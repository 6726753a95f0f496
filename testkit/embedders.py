"""An embedder for tests that count (rows embedded, bytes moved, progress) and need no
meaning: each text's vector is derived from its sha256, so it is the same on every run
and machine, unit length, and made in microseconds. Handed to `build` as its
`embedder_factory`; tests of what the vectors *mean* use the real model."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from ghindex.config import FP32


class HashEmbedder:
    """`encode(texts, progress)` as the real encoders do, from hashes of the texts."""

    encoder = "hash"

    def __init__(self, dimension: int = 384, precision: str = FP32) -> None:
        self.dimension = dimension
        self.precision = precision
        self.calls: list[int] = []  # texts per call, for tests that count

    def encode(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
            vector = np.random.default_rng(seed).standard_normal(self.dimension)
            out[row] = vector / np.linalg.norm(vector)
        if progress is not None and texts:
            progress(len(texts))
        return out


def hash_factory(embedder: HashEmbedder | None = None) -> Callable[[str], HashEmbedder]:
    """A `build(embedder_factory=...)` handing out `embedder` (a new one by default)."""
    made = embedder or HashEmbedder()
    return lambda _model: made
