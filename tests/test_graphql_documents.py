"""Every query ghindex sends is valid against GitHub's published schema, and
paginates every connection the way GitHub requires."""

from __future__ import annotations

from importlib import resources

import pytest
from github_server import connection_errors, load_schema, parse_document, validate_document

QUERY_DIR = resources.files("ghindex.fetch") / "queries"
DOCUMENTS = sorted(p.name for p in QUERY_DIR.iterdir() if p.name.endswith(".graphql"))


def test_the_queries_are_found():
    assert DOCUMENTS == ["issues.graphql", "pull_requests.graphql", "repository.graphql"]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_query_is_valid_against_githubs_schema(name):
    schema = load_schema()
    document = parse_document((QUERY_DIR / name).read_text("utf-8"))

    assert [e.message for e in validate_document(schema, document)] == []
    assert connection_errors(schema, document) == []


def test_the_checks_catch_what_github_rejects():
    schema = load_schema()
    unknown = parse_document('query { repository(owner: "a", name: "b") { nope } }')
    unpaged = parse_document(
        'query { repository(owner: "a", name: "b") { issues { nodes { number } } } }'
    )
    assert validate_document(schema, unknown)
    assert connection_errors(schema, unpaged)
