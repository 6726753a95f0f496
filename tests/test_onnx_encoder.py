"""Builds and queries embed with ONNX Runtime on an export of the real packaged model: the
same vectors as sentence-transformers, without importing torch, and the torch path
whenever the export cannot be used; int8 is that export quantised, with no such
fallback."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ghindex.config import DEFAULT_MODEL
from ghindex.errors import ConfigError, IndexUnusable
from ghindex.index import table as index
from ghindex.index.embed import Embedder
from ghindex.index.onnx_encoder import (
    INT8_FILE,
    MODEL_FILE,
    OnnxEncoder,
    build_encoder,
    export_dir,
    query_encoder,
)
from ghindex.query.search import Searcher
from testkit.github_server import issue_node
from testkit.process import cli_in_fresh_python
from testkit.state import built_workdir, settings_for, store_issues

pytestmark = pytest.mark.slow  # loads the real model and exports it

TEXTS = [
    "",
    "flaky test on windows",
    "TypeError: 'NoneType' object is not subscriptable",
    "def load(path):\n    return json.loads(Path(path).read_text())",
    "日本語のテキストと絵文字 🚀 and zero\u200bwidth",
    "word " * 700,  # far past the 256 tokens the model reads
    "Crash on startup when config.toml is missing. " * 12,
]


TOPICS = [
    "Connection pool exhausted under load",
    "Backslashes in Windows paths are not escaped",
    "Memory leak in the config parser",
    "Startup takes ten seconds",
    "Typo in the installation guide",
]


def cosines(a, b):
    return (a * b).sum(axis=1)


def test_the_export_gives_the_vectors_torch_gives(exported):
    onnx = OnnxEncoder(exported).encode(TEXTS)
    torch = Embedder(DEFAULT_MODEL).encode(TEXTS)

    assert onnx.shape == torch.shape == (len(TEXTS), 384) and onnx.dtype == np.float32
    assert float(np.abs(onnx - torch).max()) < 1e-5
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)
    assert OnnxEncoder(exported).encode([]).shape == (0, 384)


def test_queries_use_the_export_and_export_only_once(exported):
    stamp = (exported / MODEL_FILE).stat().st_mtime_ns
    encoder = query_encoder("all-MiniLM-L6-v2")  # an alias of the default: the same export

    assert isinstance(encoder, OnnxEncoder) and encoder.name == DEFAULT_MODEL
    assert (exported / MODEL_FILE).stat().st_mtime_ns == stamp


def test_torch_can_be_chosen_and_a_typo_is_refused(monkeypatch):
    monkeypatch.setenv("GHINDEX_ENCODER", "torch")
    assert isinstance(query_encoder(DEFAULT_MODEL), Embedder)

    monkeypatch.setenv("GHINDEX_ENCODER", "onxx")
    with pytest.raises(ConfigError, match="GHINDEX_ENCODER must be one of onnx, torch, not 'onxx'"):
        query_encoder(DEFAULT_MODEL)


@pytest.fixture
def damaged(exported, monkeypatch, tmp_path):
    """A cache whose export has a good tokenizer and a model file that is not a model."""
    monkeypatch.setenv("GHINDEX_CACHE_DIR", str(tmp_path / "cache"))
    folder = export_dir(DEFAULT_MODEL)
    folder.mkdir(parents=True)
    for name in ("meta.json", "tokenizer.json"):
        (folder / name).write_bytes((exported / name).read_bytes())
    (folder / MODEL_FILE).write_bytes(b"not a model")
    return folder


def test_a_damaged_export_falls_back_to_torch(damaged, caplog):
    with caplog.at_level(logging.WARNING, logger="ghindex"):
        encoder = query_encoder(DEFAULT_MODEL)

    assert isinstance(encoder, Embedder)
    assert "ONNX encoder unavailable" in caplog.text and "embedding with torch" in caplog.text


def test_a_model_that_cannot_load_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("GHINDEX_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="cannot load embedding model"):
        query_encoder(str(tmp_path / "no-such-model"))


def test_a_cli_search_never_imports_torch(exported, isolated):
    workdir = built_workdir(isolated / "work", 6)
    lines = cli_in_fresh_python(
        ["search", "issue about topic 3", "--snapshot", str(workdir), "-k", "2"],
        after="print('torch' in sys.modules, 'sentence_transformers' in sys.modules)",
    )
    assert lines[0].startswith("1. octo/hello#3  (issue, open)  Issue 3 about topic 3")
    assert lines[-1] == "False False"


def test_int8_vectors_are_close_to_fp32_but_another_kind(quantised):
    fp32 = OnnxEncoder(quantised).encode(TEXTS)
    int8 = OnnxEncoder(quantised, precision="int8").encode(TEXTS)

    assert int8.shape == fp32.shape and int8.dtype == np.float32
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    assert float(cosines(int8, fp32).min()) > 0.95
    assert float(np.abs(int8 - fp32).max()) > 1e-3  # not the fp32 file under another name
    assert (quantised / INT8_FILE).stat().st_size < (quantised / MODEL_FILE).stat().st_size / 3


def test_batches_by_token_count_answer_in_the_order_given(exported):
    encoder = OnnxEncoder(exported, batch_size=2)
    one_by_one = np.stack([encoder.encode([text])[0] for text in TEXTS])
    assert float(np.abs(encoder.encode(TEXTS) - one_by_one).max()) < 1e-5


def test_builds_use_every_core_and_spin_and_queries_a_few_that_sleep(quantised):
    build = build_encoder(DEFAULT_MODEL, precision="int8", device="cpu")
    query = query_encoder(DEFAULT_MODEL, "int8")

    assert (build.encoder, build.precision, build.device) == ("onnx", "int8", "cpu")
    assert build._session.get_session_options().intra_op_num_threads == os.cpu_count()
    assert query._session.get_session_options().intra_op_num_threads == min(os.cpu_count(), 4)
    assert query.precision == "int8"
    # a query's threads sleep between runs: the kNN search that follows needs the cores
    spinning = "session.intra_op.allow_spinning"
    assert query._session.get_session_options().get_session_config_entry(spinning) == "0"
    assert build.spin and not query.spin
    assert np.allclose(query.encode(TEXTS), build.encode(TEXTS), atol=1e-5)


def test_a_damaged_export_is_an_error_for_int8_not_a_fallback(damaged):
    with pytest.raises(
        IndexUnusable,
        match=r"^the index holds int8 vectors, which only ONNX "
        r"Runtime makes, and it failed here \(.+\): repair the onnxruntime "
        r"install, or rebuild the index with --precision fp32$",
    ):
        query_encoder(DEFAULT_MODEL, "int8")
    with pytest.raises(
        ConfigError,
        match=r"^int8 vectors need ONNX Runtime, which failed "
        r"here \(.+\): use --precision fp32$",
    ):
        build_encoder(DEFAULT_MODEL, precision="int8")


def test_an_int8_index_records_it_searches_alike_and_keeps_both_caches(quantised, isolated, run):
    settings = settings_for(isolated / "work")
    store_issues(
        settings,
        [
            issue_node(n, title=title, body=f"{title}: seen since the last release.")
            for n, title in enumerate(TOPICS, 1)
        ],
    )

    built = run("build", "--precision", "int8", "--json")

    assert built.exit_code == 0, built.output
    assert (json.loads(built.stdout)["precision"], json.loads(built.stdout)["embedded"]) == (
        "int8",
        5,
    )
    manifest = json.loads(settings.manifest_path.read_text())
    assert manifest["model"] == {
        "name": DEFAULT_MODEL,
        "dimension": 384,
        "precision": "int8",
        "encoder": "onnx",
    }
    db = index.connect(settings.lance_path)
    assert index.index_precision(db) == "int8"
    assert index.cache_table(DEFAULT_MODEL) not in index.table_names(db)
    searcher = Searcher(settings.lance_path)
    try:
        found = searcher.search("the parser uses more and more RAM", mode="dense", k=1)
        assert found.results[0].handle == "octo/hello#3"
        assert searcher._embedder.precision == "int8"
    finally:
        searcher.close()

    kept = json.loads(run("build", "--json").stdout)  # no precision asked: the index's own
    assert (kept["precision"], kept["embedded"]) == ("int8", 0)
    refused = run("build", "--precision", "fp32")
    assert refused.exit_code == 1 and "holds int8 vectors, not fp32" in refused.stderr
    again = json.loads(run("build", "--full", "--precision", "fp32", "--json").stdout)
    assert (again["precision"], again["embedded"], again["encoder"]) == ("fp32", 5, "onnx")
    back = json.loads(run("build", "--full", "--precision", "int8", "--json").stdout)
    assert (back["embedded"], back["from_cache"], back["encoder"]) == (0, 5, None)
    assert json.loads(settings.manifest_path.read_text())["model"]["encoder"] is None


def test_a_build_never_imports_torch_when_onnx_works(quantised, isolated):
    for precision in ("fp32", "int8"):
        store_issues(settings_for(isolated / precision), [issue_node(1, title="Crash")])
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ghindex.config import DEFAULT_MODEL, Settings\n"
        "from ghindex.index.build import build\n"
        "for path in sys.argv[1:]:\n"
        "    settings = Settings(workdir=Path(path), graphql_url='', model=DEFAULT_MODEL)\n"
        "    report = build(settings, precision=path.rsplit('/', 1)[1])\n"
        "    print(report.precision, report.encoder, report.embedded)\n"
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script, str(isolated / "fp32"), str(isolated / "int8")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.splitlines() == ["fp32 onnx 1", "int8 onnx 1", "False False"]


_ENCODERS: dict[str, OnnxEncoder] = {}


def _int8(folder) -> OnnxEncoder:
    """One int8 encoder for every example (a session loads in about a second)."""
    return _ENCODERS.setdefault(str(folder), OnnxEncoder(folder, precision="int8", threads=2))


_PHRASE = "the build fails when a cache is cold and an index is rebuilt after merge of two shards"
_WORDS = st.sampled_from([*_PHRASE.split(" "), "🙂", "überall", "#12", "`code`", "null"])


@settings(max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "8")), deadline=None)
@given(
    texts=st.lists(
        st.lists(_WORDS, min_size=1, max_size=120).map(" ".join), min_size=2, max_size=12
    ),
    pick=st.integers(0, 11),
)
def test_an_int8_vector_does_not_depend_on_its_batch(quantised, texts, pick):
    """The same text alone (a query), among others (a build) and among others again (a
    shard): one vector. Dynamic quantisation scales each run's input as a whole."""
    int8_encoder = _int8(quantised)
    text = texts[pick % len(texts)]
    alone = int8_encoder.encode([text])[0]
    among = int8_encoder.encode(texts)[texts.index(text)]
    shuffled = int8_encoder.encode([*reversed(texts), text.upper(), text])[-1]
    assert np.array_equal(alone, among)
    assert np.array_equal(alone, shuffled)
