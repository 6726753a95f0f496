import pytest
from github_server import GitHubServer


@pytest.fixture
def github_server():
    """A running local GitHub GraphQL API with no repositories (see tests/github_server.py)."""
    with GitHubServer() as server:
        yield server
