"""Queries are embedded with ONNX Runtime on an export of the real packaged model: the
same vectors as sentence-transformers, without importing torch, and the torch path
whenever the export cannot be used."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

from ghindex.config import DEFAULT_MODEL
from ghindex.errors import ConfigError
from ghindex.index.embed import Embedder
from ghindex.index.onnx_encoder import (
    META_FILE,
    MODEL_FILE,
    OnnxEncoder,
    export,
    export_dir,
    query_encoder,
)
from testkit.state import built_workdir

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


@pytest.fixture(scope="module")
def exported():
    folder = export_dir(DEFAULT_MODEL)
    if not (folder / META_FILE).exists():
        export(DEFAULT_MODEL)
    return folder


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


def test_a_damaged_export_falls_back_to_torch(exported, monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("GHINDEX_CACHE_DIR", str(tmp_path / "cache"))
    damaged = export_dir(DEFAULT_MODEL)
    damaged.mkdir(parents=True)
    for name in ("meta.json", "tokenizer.json"):
        (damaged / name).write_bytes((exported / name).read_bytes())
    (damaged / MODEL_FILE).write_bytes(b"not a model")

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
    script = (
        "import sys\n"
        "from ghindex.cli import cli\n"
        "cli(['search', 'issue about topic 3', '--snapshot', sys.argv[1], '-k', '2'],"
        " standalone_mode=False)\n"
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
    )
    found = subprocess.run([sys.executable, "-c", script, str(workdir)], capture_output=True,
                           text=True, check=True)  # fmt: skip
    lines = found.stdout.strip().splitlines()
    assert lines[0].startswith("1. octo/hello#3  (issue, open)  Issue 3 about topic 3")
    assert lines[-1] == "False False"
