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
