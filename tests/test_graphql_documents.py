"""Every query ghindex sends is valid against GitHub's published schema, and
paginates every connection the way GitHub requires."""

from __future__ import annotations

import pytest
from graphql import FragmentDefinitionNode, print_ast

from ghindex.github.graphql import _fragments, load_query, query_names
from testkit.github_server import connection_errors, load_schema, parse_document, validate_document

DOCUMENTS = query_names()


def test_the_queries_are_found():
    assert {"repository", "issues", "pull_requests", "discussions", "releases", "nodes"} <= set(
        DOCUMENTS
    )


@pytest.mark.parametrize("name", DOCUMENTS)
def test_query_is_valid_against_githubs_schema(name):
    schema = load_schema()
    document = load_query(name)

    assert [e.message for e in validate_document(schema, document)] == []
    assert connection_errors(schema, document) == []
    assert connection_errors(schema, parse_document(print_ast(document))) == []


def test_every_fragment_is_used_by_some_query():
    used = {
        d.name.value
        for name in DOCUMENTS
        for d in load_query(name).definitions
        if isinstance(d, FragmentDefinitionNode)
    }
    assert used == set(_fragments())


def test_the_checks_catch_what_github_rejects():
    schema = load_schema()
    unknown = parse_document('query { repository(owner: "a", name: "b") { nope } }')
    unpaged = parse_document(
        'query { repository(owner: "a", name: "b") { issues { nodes { number } } } }'
    )
    assert validate_document(schema, unknown)
    assert connection_errors(schema, unpaged)
