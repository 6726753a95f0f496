"""Reranking with a cross-encoder and diversifying with MMR.

The cross-encoder here is a tiny randomly initialised BERT saved to a temporary
directory: its scores mean nothing, but it goes through the real loading and
scoring path of sentence-transformers in a few milliseconds.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

from ghindex.errors import GhindexError, RerankUnavailable
from ghindex.query.rerank import DEFAULT_RERANK_MODEL, Reranker, mmr, rerank, rerank_model_name

TEXTS = [
    "search crashes when the index is missing",
    "add a dark theme to the documentation site",
    "fetch stops at the GitHub rate limit and resumes later",
    "typo in README",
    "the reranker scores candidates with a cross-encoder",
]


def test_loads_a_local_cross_encoder_and_scores_deterministically(tiny_cross_encoder):
    reranker = Reranker(tiny_cross_encoder)

    first = reranker.score("index crash", TEXTS)
    second = reranker.score("index crash", TEXTS)

    assert first == second
    assert len(first) == len(TEXTS)
    assert all(isinstance(s, float) for s in first)
    assert len(set(first)) == len(TEXTS)
    assert reranker.score("index crash", []) == []


def test_scores_do_not_depend_on_batching(tiny_cross_encoder):
    one_batch = Reranker(tiny_cross_encoder).score("q", TEXTS)
    small_batches = Reranker(tiny_cross_encoder, batch_size=2).score("q", TEXTS)

    assert small_batches == pytest.approx(one_batch, abs=1e-5)


def test_models_are_loaded_once_per_process(tiny_cross_encoder):
    assert Reranker(tiny_cross_encoder)._model is Reranker(tiny_cross_encoder)._model


def test_long_texts_are_truncated_to_the_model_limit(tiny_cross_encoder):
    reranker = Reranker(tiny_cross_encoder)
    assert reranker.max_length == 128  # the model's own limit (its position embeddings)

    long = "word " * 50_000
    (score,) = reranker.score("q", [long])
    assert reranker.score("q", [long[:2000]]) == [score]  # nothing past the limit matters


def test_max_length_can_be_lowered(tiny_cross_encoder):
    assert Reranker(tiny_cross_encoder, max_length=16).max_length == 16


def test_loading_is_quiet(tiny_cross_encoder, capfd):
    Reranker(tiny_cross_encoder, max_length=17)  # a new cache key: really loads

    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_the_model_comes_from_the_environment(tiny_cross_encoder, monkeypatch):
    assert rerank_model_name() == DEFAULT_RERANK_MODEL == "cross-encoder/ms-marco-MiniLM-L-6-v2"
    monkeypatch.setenv("GHINDEX_RERANK_MODEL", tiny_cross_encoder)

    assert Reranker().name == tiny_cross_encoder
    assert rerank_model_name("explicit/name") == "explicit/name"


def test_rerank_orders_by_cross_encoder_score(tiny_cross_encoder):
    reranker = Reranker(tiny_cross_encoder)
    candidates = [{"handle": f"o/r#{i}", "text": t} for i, t in enumerate(TEXTS)]

    ranked = rerank("index crash", candidates, reranker)

    scores = reranker.score("index crash", TEXTS)
    assert [c["handle"] for c, _ in ranked] == [
        f"o/r#{i}" for i in sorted(range(len(TEXTS)), key=lambda i: -scores[i])
    ]
    assert [s for _, s in ranked] == sorted(scores, reverse=True)
    assert rerank("index crash", candidates, reranker, top_n=2) == ranked[:2]


class FixedScores:
    """A stand-in reranker: the score of a text is looked up in a table."""

    def __init__(self, table):
        self.table = table

    def score(self, query, texts):
        return [self.table[t] for t in texts]


def test_rerank_keeps_input_order_for_ties_and_takes_a_key():
    candidates = [SimpleNamespace(id=i, body=b) for i, b in enumerate("abcd")]
    scorer = FixedScores({"a": 0.1, "b": 0.5, "c": 0.1, "d": 0.5})

    ranked = rerank("q", candidates, scorer, key=lambda c: c.body)

    assert [(c.id, s) for c, s in ranked] == [(1, 0.5), (3, 0.5), (0, 0.1), (2, 0.1)]
    assert rerank("q", [], scorer) == []
    assert [c.text for c, _ in rerank("q", [SimpleNamespace(text="a")], scorer)] == ["a"]


def test_a_missing_directory_is_reported_in_one_line(tmp_path):
    missing = tmp_path / "no-such-model"

    with pytest.raises(RerankUnavailable) as caught:
        Reranker(str(missing))

    assert isinstance(caught.value, GhindexError)
    assert str(caught.value) == (
        f"cross-encoder model directory {str(missing)!r} does not exist: set "
        "GHINDEX_RERANK_MODEL to a saved CrossEncoder directory or a Hugging Face model name"
    )


def test_a_directory_that_is_not_a_model_is_reported_in_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")

    with pytest.raises(RerankUnavailable, match=r"^cannot load cross-encoder model from ") as exc:
        Reranker(str(tmp_path))

    assert "\n" not in str(exc.value)


def test_an_uncached_hub_model_fails_fast_in_offline_mode(tiny_cross_encoder):
    Reranker(tiny_cross_encoder)  # sentence-transformers imported: time only the failure
    start = time.monotonic()

    with pytest.raises(RerankUnavailable) as caught:
        Reranker("ghindex-tests/no-such-reranker")

    assert time.monotonic() - start < 5
    assert str(caught.value) == (
        "cross-encoder model 'ghindex-tests/no-such-reranker' is not available offline "
        "(HF_HUB_OFFLINE is set): download it once with network access, or set "
        "GHINDEX_RERANK_MODEL to a local directory"
    )


@pytest.fixture
def unreachable_hub(monkeypatch):
    """Online mode, with the hub at a local port where nothing listens."""
    from huggingface_hub import constants

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")


def test_an_uncached_hub_model_fails_fast_when_the_hub_is_unreachable(
    tiny_cross_encoder, unreachable_hub
):
    Reranker(tiny_cross_encoder)
    start = time.monotonic()

    with pytest.raises(RerankUnavailable) as caught:
        Reranker("ghindex-tests/no-such-reranker")

    assert time.monotonic() - start < 5  # no retries with backoff (those take ~45 s)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "cross-encoder model 'ghindex-tests/no-such-reranker' is not available offline "
        "(hub unreachable: "
    )
    assert message.endswith(
        "): download it once with network access, or set GHINDEX_RERANK_MODEL to a local directory"
    )


def test_importing_the_module_does_not_import_sentence_transformers():
    code = "import sys, ghindex.query.rerank; print('sentence_transformers' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_mmr_pushes_a_near_duplicate_down():
    vectors = np.stack(
        [
            unit(1.0, 0.0, 0.0),
            unit(1.0, 0.01, 0.0),  # near-duplicate of 0, nearly as relevant
            unit(0.0, 1.0, 0.0),
            unit(0.0, 0.0, 1.0),
        ]
    )
    relevance = [0.95, 0.94, 0.80, 0.10]

    picks = mmr(range(4), vectors, relevance, lambda_=0.7, k=4)

    assert picks[:2] == [0, 2]
    assert sorted(picks) == [0, 1, 2, 3]
    assert mmr(range(4), vectors, relevance, lambda_=0.7, k=2) == [0, 2]


def test_mmr_with_lambda_one_is_relevance_order():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(8, 5))
    relevance = [0.3, 0.9, 0.1, 0.9, 0.5, 0.7, 0.2, 0.8]

    picks = mmr(list("abcdefgh"), vectors, relevance, lambda_=1.0, k=8)

    assert picks == sorted(range(8), key=lambda i: -relevance[i])  # ties: input order
    assert picks == [1, 3, 7, 5, 4, 0, 6, 2]


def test_mmr_relevance_scale_does_not_matter_and_results_repeat():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(20, 8))
    relevance = rng.normal(size=20)

    picks = mmr(range(20), vectors, relevance, k=10)

    assert picks == mmr(range(20), vectors, relevance * 1000 - 7, k=10)
    assert picks == mmr(range(20), vectors, relevance, k=10)
    assert len(set(picks)) == 10


def test_mmr_edge_cases():
    vectors = np.eye(3)
    assert mmr([], np.zeros((0, 3)), [], k=5) == []
    assert mmr(range(3), vectors, [1, 2, 3], k=0) == []
    assert mmr(range(3), vectors, [1, 2, 3], k=10) == [2, 1, 0]
    assert mmr(range(3), vectors, [5, 5, 5], k=3) == [0, 1, 2]  # equal relevance: input order
    with pytest.raises(ValueError):
        mmr(range(3), vectors, [1, 2], k=2)
    with pytest.raises(ValueError):
        mmr(range(3), vectors, [1, 2, 3], lambda_=1.5, k=2)
