"""One index, one precision: fp32 or int8 vectors are cached apart and never mixed, the
query side embeds as the index was built, and a build embeds where it is told to. No
model is loaded here: the tables are made with their schemas, the devices with made-up
provider lists (tests/test_onnx_encoder.py builds with the real model)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ghindex.config import DEFAULT_MODEL, load_settings
from ghindex.errors import ConfigError, IndexUnusable
from ghindex.index import table as index
from ghindex.index.onnx_encoder import (
    CPU,
    CUDA,
    NO_CUDA,
    Placement,
    build_encoder,
    place,
    query_encoder,
)
from ghindex.query.search import Searcher
from testkit.github_server import issue_node
from testkit.state import settings_for, store_issues

INT8_ON_CUDA = (
    "int8 vectors are made on the CPU only: use --device cpu, or --precision fp32 to embed "
    "on the GPU"
)
INT8_BY_TORCH = (
    "int8 vectors are made by ONNX Runtime only: unset GHINDEX_ENCODER=torch, or use "
    "--precision fp32"
)


def gpu(answer):
    def torch_cuda():
        return answer

    return torch_cuda


def no_torch():
    raise AssertionError("torch was asked about a GPU it did not need to be")


@pytest.mark.parametrize(
    ("device", "precision", "encoder", "providers", "torch_cuda", "expected"),
    [
        ("cpu", "fp32", "onnx", [CUDA, CPU], no_torch, Placement("onnx", "cpu")),
        ("auto", "fp32", "onnx", [CUDA, CPU], no_torch, Placement("onnx", "cuda")),
        ("auto", "fp32", "onnx", [CPU], no_torch, Placement("onnx", "cpu")),
        ("cuda", "fp32", "onnx", [CUDA, CPU], no_torch, Placement("onnx", "cuda")),
        ("cuda", "fp32", "onnx", [CPU], gpu(True), Placement("torch", "cuda")),
        ("cuda", "fp32", "onnx", [CPU], gpu(False), NO_CUDA),
        ("cpu", "fp32", "torch", [CUDA, CPU], no_torch, Placement("torch", "cpu")),
        ("auto", "fp32", "torch", [CUDA, CPU], gpu(True), Placement("torch", "cuda")),
        ("auto", "fp32", "torch", [CUDA, CPU], gpu(False), Placement("torch", "cpu")),
        ("cuda", "fp32", "torch", [CUDA, CPU], gpu(False), NO_CUDA),
        # int8 runs on the CPU only: auto means the CPU, cuda is refused
        ("auto", "int8", "onnx", [CUDA, CPU], no_torch, Placement("onnx", "cpu")),
        ("cpu", "int8", "onnx", [CPU], no_torch, Placement("onnx", "cpu")),
        ("cuda", "int8", "onnx", [CUDA, CPU], no_torch, INT8_ON_CUDA),
        ("auto", "int8", "torch", [CPU], no_torch, INT8_BY_TORCH),
    ],
)
def test_where_a_build_embeds(device, precision, encoder, providers, torch_cuda, expected):
    def chosen():
        return place(
            device,
            precision=precision,
            encoder=encoder,
            ort_providers=providers,
            torch_cuda=torch_cuda,
        )

    if isinstance(expected, Placement):
        assert chosen() == expected
    else:
        with pytest.raises(ConfigError) as refused:
            chosen()
        assert str(refused.value) == expected


def test_nothing_but_known_devices_and_precisions_is_placed():
    with pytest.raises(ConfigError, match=r"^device must be one of auto, cpu, cuda, not 'gpu'$"):
        place("gpu", precision="fp32", encoder="onnx", ort_providers=[CPU], torch_cuda=no_torch)
    with pytest.raises(ConfigError, match=r"^precision must be one of fp32, int8, not 'int4'$"):
        place("cpu", precision="int4", encoder="onnx", ort_providers=[CPU], torch_cuda=no_torch)


def test_precision_and_device_come_from_flag_env_or_toml(isolated, monkeypatch):
    # no precision: the index's own decides (a new index: new_index_precision)
    assert (load_settings().precision, load_settings().device) == (None, "auto")
    (isolated / "ghindex.toml").write_text('precision = "int8"\ndevice = "cpu"\n')
    assert (load_settings().precision, load_settings().device) == ("int8", "cpu")
    monkeypatch.setenv("GHINDEX_PRECISION", " FP32 ")
    assert load_settings().precision == "fp32"
    assert load_settings(precision="int8").precision == "int8"


def test_a_bad_precision_or_device_is_one_line(isolated, run, monkeypatch):
    monkeypatch.setenv("GHINDEX_PRECISION", "int4")
    result = run("build")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: precision must be one of fp32, int8, not 'int4' "
        "(from --precision, GHINDEX_PRECISION or ghindex.toml)\n"
    )
    monkeypatch.delenv("GHINDEX_PRECISION")
    monkeypatch.setenv("GHINDEX_DEVICE", "gpu")
    assert run("build").stderr == (
        "Error: device must be one of auto, cpu, cuda, not 'gpu' "
        "(from --device, GHINDEX_DEVICE or ghindex.toml)\n"
    )

    flag = run("build", "--precision", "int4")
    assert flag.exit_code == 2
    assert flag.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--precision': 'int4' is not one of 'fp32', 'int8'."
    )


def test_each_precision_has_its_own_embedding_cache(isolated):
    db = index.connect(isolated / "lance")
    fp32, int8 = np.full((1, 4), 0.5, np.float32), np.full((2, 4), 0.25, np.float32)
    index.add_to_cache(db, DEFAULT_MODEL, ["a"], fp32)
    index.add_to_cache(db, DEFAULT_MODEL, ["a", "b"], int8, "int8")

    before = index.EMBEDDINGS_PREFIX + hashlib.sha256(DEFAULT_MODEL.encode()).hexdigest()[:16]
    assert index.cache_table(DEFAULT_MODEL) == index.cache_table(DEFAULT_MODEL, "fp32") == before
    assert index.cache_table(DEFAULT_MODEL, "int8") == before + "_int8"
    assert sorted(index.table_names(db)) == [before, before + "_int8"]
    found = index.cached_vectors(db, DEFAULT_MODEL, ["a", "b"])
    assert list(found) == ["a"] and found["a"].tolist() == [0.5] * 4
    found = index.cached_vectors(db, DEFAULT_MODEL, ["a", "b"], "int8")
    assert sorted(found) == ["a", "b"] and found["a"].tolist() == [0.25] * 4
    assert index.cache_dimension(db, DEFAULT_MODEL, "int8") == 4
    assert index.cache_dimension(db, "another/model", "int8") is None


def chunks_of(settings, precision):
    """An empty chunks table of the default model at `precision` (None: written before
    precisions were recorded)."""
    schema = index.chunks_schema(DEFAULT_MODEL, 384, precision or "fp32")
    if precision is None:
        schema = schema.with_metadata(
            {k: v for k, v in schema.metadata.items() if k != index.PRECISION_KEY}
        )
    db = index.connect(settings.lance_path)
    db.create_table(index.CHUNKS, schema=schema)
    return db


def test_an_index_from_before_precisions_holds_fp32(isolated):
    db = chunks_of(settings_for(isolated / "work"), None)
    assert index.index_precision(db) == "fp32"
    index.check_model(db, isolated, DEFAULT_MODEL, "fp32")
    assert index.index_precision(index.connect(isolated / "none")) is None


def test_vectors_of_another_precision_are_refused_not_mixed(isolated, run):
    settings = settings_for(isolated / "work")
    store_issues(settings, [issue_node(1, title="Crash on start")])
    db = chunks_of(settings, "int8")

    with pytest.raises(IndexUnusable) as refused:
        index.check_model(db, settings.lance_path, DEFAULT_MODEL, "fp32")
    line = (
        f"the index in {settings.lance_path} holds int8 vectors, not fp32: pass --precision "
        "int8, or --full to rebuild the index with fp32 vectors (cached vectors of both "
        "precisions are kept)"
    )
    assert str(refused.value) == line
    index.check_model(db, settings.lance_path, DEFAULT_MODEL, "int8")

    result = run("build", "--precision", "fp32")  # refused before any model is loaded
    assert (result.exit_code, result.stderr) == (1, f"Error: {line}\n")


def test_merge_refuses_a_shard_of_another_precision_before_copying(isolated, run):
    shard = settings_for(isolated / "shard")
    store_issues(shard, [issue_node(1, title="Crash on start")])
    chunks_of(shard, "int8")

    result = run("merge", str(shard.workdir), "--precision", "fp32")

    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {shard.workdir} holds int8 vectors, not fp32: build every shard with the "
        "same --precision, or merge with --precision int8\n"
    )
    assert not list((isolated / "work").rglob("state.duckdb"))


def test_queries_are_embedded_at_the_index_precision(isolated):
    settings = settings_for(isolated / "work")
    chunks_of(settings, "int8")
    asked = []

    class Fixed:
        def encode(self, texts):
            return np.ones((len(texts), 384), np.float32) / np.sqrt(384)

    def factory(name, precision):
        asked.append((name, precision))
        return Fixed()

    searcher = Searcher(settings.lance_path, embedder_factory=factory)
    try:
        searcher.search("crash", mode="dense")
    finally:
        searcher.close()
    assert (searcher.precision, asked) == ("int8", [(DEFAULT_MODEL, "int8")])


def test_int8_has_no_torch_fallback(monkeypatch):
    monkeypatch.setenv("GHINDEX_ENCODER", "torch")
    with pytest.raises(IndexUnusable) as refused:
        query_encoder(DEFAULT_MODEL, "int8")
    assert str(refused.value) == (
        "the index holds int8 vectors, which only ONNX Runtime makes: unset "
        "GHINDEX_ENCODER=torch to search it"
    )
    with pytest.raises(ConfigError) as refused:
        build_encoder(DEFAULT_MODEL, precision="int8")
    assert str(refused.value) == INT8_BY_TORCH


def test_a_new_index_is_int8_where_onnx_runs_the_model_and_fp32_where_not(monkeypatch):
    from ghindex.index import onnx_encoder

    monkeypatch.setattr(onnx_encoder, "ready", lambda model, precision: None)
    monkeypatch.setattr(onnx_encoder, "_ort_providers", lambda: ["CPUExecutionProvider"])
    assert onnx_encoder.new_index_precision(DEFAULT_MODEL) == "int8"
    assert onnx_encoder.new_index_precision(DEFAULT_MODEL, "cuda") == "fp32"  # int8 is CPU-only
    monkeypatch.setattr(onnx_encoder, "_ort_providers", lambda: [])  # no ONNX Runtime
    assert onnx_encoder.new_index_precision(DEFAULT_MODEL) == "fp32"
    both = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnx_encoder, "_ort_providers", lambda: both)
    assert onnx_encoder.new_index_precision(DEFAULT_MODEL, "auto") == "fp32"
    assert onnx_encoder.new_index_precision(DEFAULT_MODEL, "cpu") == "int8"

    def no_export(model, precision):
        raise RuntimeError("exporter broke")

    monkeypatch.setattr(onnx_encoder, "ready", no_export)
    assert onnx_encoder.new_index_precision(DEFAULT_MODEL, "cpu") == "fp32"
    monkeypatch.setenv("GHINDEX_ENCODER", "torch")
    monkeypatch.setattr(onnx_encoder, "ready", lambda model, precision: None)
    assert onnx_encoder.new_index_precision(DEFAULT_MODEL, "cpu") == "fp32"
