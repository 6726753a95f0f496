"""Fixtures of the workflow scenarios: the copy of this checkout that act runs as
`ghindex/ghindex@vX`, the stand-in cache shared by every scenario, and one repository
with its GitHub side per test (tests/actions/act.py)."""

from __future__ import annotations

import pytest
from act import Repository, copy_of_this_repository


@pytest.fixture(scope="session")
def action_copy(tmp_path_factory):
    return copy_of_this_repository(tmp_path_factory.mktemp("ghindex-action"))


@pytest.fixture(scope="session")
def caches(tmp_path_factory):
    """actions/cache's store for the whole test run: the first job saves the packages'
    caches and the model's export, every later job restores them."""
    return tmp_path_factory.mktemp("actions-cache")


@pytest.fixture
def repository(github, action_copy, caches, tmp_path):
    repo = Repository(tmp_path / "repository", github, action_copy, caches)
    yield repo
    repo.close()
