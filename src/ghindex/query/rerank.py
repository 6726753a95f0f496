"""Second-stage ranking: a cross-encoder rescores candidates, MMR diversifies them.

A cross-encoder reads the query and one candidate text together and returns a
relevance score, which is more accurate than comparing two independent vectors
but costs a model forward pass per candidate, so it only reorders the few dozen
candidates that first-stage retrieval returned.

The model is `cross-encoder/ms-marco-MiniLM-L-6-v2` unless GHINDEX_RERANK_MODEL
(or the caller) names another hub model or a local directory. Loading tries the
local files first (a directory, or the Hugging Face cache) and only then the
hub; before downloading, one short request checks that the hub answers at all,
so a machine with no network fails in a fraction of a second instead of waiting
out huggingface_hub's retries (about 45 s). Every failure is a RerankUnavailable
with a one-line message. `sentence_transformers` is imported only when a model
is loaded: the import alone takes seconds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ghindex.config import env
from ghindex.errors import RerankUnavailable, first_line
from ghindex.index.embed import BUILD_EXTRA, builder_installed

DEFAULT_RERANK_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"
RERANK_MODEL_ENV = "GHINDEX_RERANK_MODEL"
HUB_PROBE_TIMEOUT = 5.0  # seconds for the one request that checks the hub answers
# Texts are cut to this many characters per token of the model's limit before
# tokenising: the tokenizer truncates anyway, but only after reading all of it.
_CHARS_PER_TOKEN = 8

T = TypeVar("T")
log = logging.getLogger(__name__)


def rerank_model_name(name: str | None = None) -> str:
    """The model to use: `name`, else GHINDEX_RERANK_MODEL, else the default."""
    return name or env("GHINDEX_RERANK_MODEL") or DEFAULT_RERANK_MODEL


class Reranker:
    """A loaded cross-encoder: `score(query, texts)` gives one relevance score per text.

    Higher is more relevant; the scale depends on the model (the default returns
    probabilities in (0, 1)). Models are cached per process, so constructing a
    second Reranker for the same model is free.
    """

    def __init__(
        self,
        name_or_path: str | None = None,
        *,
        batch_size: int = 32,
        max_length: int | None = None,
    ) -> None:
        self.name = rerank_model_name(name_or_path)
        self.batch_size = batch_size
        self._model = _load(_source(self.name), max_length)
        self.max_length = int(self._model.max_seq_length)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        limit = self.max_length * _CHARS_PER_TOKEN
        pairs = [(query[:limit], text[:limit]) for text in texts]
        scores = self._model.predict(
            pairs,
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [float(s) for s in np.asarray(scores, dtype=np.float64).reshape(len(pairs))]


def _text_of(candidate: Any) -> str:
    return candidate["text"] if isinstance(candidate, Mapping) else candidate.text


def rerank(
    query: str,
    candidates: Sequence[T],
    reranker: Reranker,
    *,
    key: Callable[[T], str] = _text_of,
    top_n: int | None = None,
) -> list[tuple[T, float]]:
    """Candidates with their cross-encoder scores, best first.

    `key` gives a candidate's text (default: `c["text"]` for mappings, `c.text`
    otherwise). Equal scores keep the input order, so the first-stage ranking
    breaks ties. `top_n` keeps only the best n.
    """
    scores = reranker.score(query, [key(c) for c in candidates])
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    if top_n is not None:
        order = order[: max(top_n, 0)]
    return [(candidates[i], scores[i]) for i in order]


def mmr(
    candidates: Sequence[Any],
    vectors: np.ndarray | Sequence[Sequence[float]],
    relevance: Sequence[float] | np.ndarray,
    *,
    lambda_: float = 0.7,
    k: int,
) -> list[int]:
    """Maximal marginal relevance: indices into `candidates` of k picks, in pick order.

    Each step picks the candidate maximising
    lambda_ * relevance - (1 - lambda_) * (highest cosine similarity to a pick so far),
    with relevance rescaled to [0, 1] so the two terms are comparable whatever the
    scorer's scale. lambda_=1 is plain relevance order; lower values trade
    relevance for variety. Ties go to the earlier candidate. O(k * n) dot products.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_ must be between 0 and 1, not {lambda_}")
    n = len(candidates)
    matrix = np.asarray(vectors, dtype=np.float64).reshape(n, -1) if n else np.zeros((0, 0))
    rel = np.asarray(relevance, dtype=np.float64)
    if rel.shape != (n,):
        raise ValueError(f"{n} candidates but {rel.size} relevance scores")
    if n == 0 or k <= 0:
        return []

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms > 0, norms, 1.0)
    spread = rel.max() - rel.min()
    rel = (rel - rel.min()) / spread if spread > 0 else np.ones(n)

    picked: list[int] = []
    available = np.ones(n, dtype=bool)
    redundancy = np.zeros(n)
    for _ in range(min(k, n)):
        gain = lambda_ * rel - (1.0 - lambda_) * redundancy
        gain[~available] = -np.inf
        best = int(np.argmax(gain))  # the first maximum: ties keep input order
        picked.append(best)
        available[best] = False
        similarity = matrix @ matrix[best]
        redundancy = similarity if len(picked) == 1 else np.maximum(redundancy, similarity)
    return picked


def _quiet() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for noisy in ("sentence_transformers", "transformers", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


def _source(name: str) -> str:
    """The cache key and load source: existing directories by absolute path."""
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def _looks_like_path(name: str) -> bool:
    """A hub id is `name` or `owner/name`; anything else can only be a directory."""
    return name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1


def _offline() -> bool:
    from huggingface_hub import constants

    # huggingface_hub reads HF_HUB_OFFLINE once, at import; the environment may have changed
    flags = {
        os.environ.get(v, "").strip().lower() for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    return constants.is_offline_mode() or bool(flags & {"1", "true", "yes", "on"})


def _unavailable_offline(name: str, reason: str) -> RerankUnavailable:
    return RerankUnavailable(
        f"cross-encoder model {name!r} is not available offline ({reason}): download it once "
        "with network access, or set GHINDEX_RERANK_MODEL to a local directory"
    )


def _check_hub(name: str) -> None:
    """One quick request (no retries) so an unreachable hub fails fast."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if _offline():
        raise _unavailable_offline(name, "HF_HUB_OFFLINE is set")
    try:
        HfApi().model_info(name, timeout=HUB_PROBE_TIMEOUT)
    except GatedRepoError:
        raise RerankUnavailable(
            f"cross-encoder model {name!r} is gated on the Hugging Face Hub: accept its terms "
            "and log in with `hf auth login`, or set GHINDEX_RERANK_MODEL to a local directory"
        ) from None
    except RepositoryNotFoundError:
        raise RerankUnavailable(
            f"cross-encoder model {name!r} was not found on the Hugging Face Hub (or is private): "
            "check the name, or set GHINDEX_RERANK_MODEL to a local directory"
        ) from None
    except Exception as exc:  # whatever went wrong, the hub cannot serve the model now
        raise _unavailable_offline(name, f"hub unreachable: {first_line(exc)}") from None


@cache
def _load(name: str, max_length: int | None):
    _quiet()
    if not builder_installed():
        raise RerankUnavailable(
            "reranking runs a cross-encoder with sentence-transformers, which this install "
            f"of ghindex lacks (the reader-only install): {BUILD_EXTRA}, or search without "
            "rerank"
        )
    from sentence_transformers import CrossEncoder
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    def load(source: str, *, local_only: bool):
        return CrossEncoder(
            source, device="cpu", max_length=max_length, local_files_only=local_only
        )

    path = Path(name).expanduser()
    if path.exists() or _looks_like_path(name):
        if not path.is_dir():
            problem = "is not a directory" if path.exists() else "does not exist"
            raise RerankUnavailable(
                f"cross-encoder model directory {name!r} {problem}: set GHINDEX_RERANK_MODEL "
                "to a saved CrossEncoder directory or a Hugging Face model name"
            )
        try:
            model = load(str(path), local_only=True)
        except (OSError, ValueError) as exc:
            raise RerankUnavailable(
                f"cannot load cross-encoder model from {name!r} ({first_line(exc)}): "
                "set GHINDEX_RERANK_MODEL to a saved CrossEncoder directory"
            ) from None
    else:
        try:
            model = load(name, local_only=True)  # the Hugging Face cache, no network
        except (OSError, ValueError):
            _check_hub(name)
            log.info("downloading cross-encoder model %s", name)
            try:
                model = load(name, local_only=False)
            except (OSError, ValueError) as exc:
                raise RerankUnavailable(
                    f"cannot download cross-encoder model {name!r} ({first_line(exc)}): check "
                    "network access, or set GHINDEX_RERANK_MODEL to a local directory"
                ) from None

    if model.num_labels != 1:
        raise RerankUnavailable(
            f"model {name!r} is not a reranker: it has {model.num_labels} output labels, a "
            "cross-encoder reranker has one; set GHINDEX_RERANK_MODEL to a reranking model"
        )
    return model
