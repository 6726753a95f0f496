"""The query documents in `fetch/queries/`, assembled with the fragments they use.

`fragments.graphql` holds every shared selection once. A query file names the
fragments it needs with `...Name`; `load_query` appends those fragments, and the
fragments they use in turn, and nothing else (GitHub, like the spec, rejects a
document with unused fragments).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from graphql import (
    DocumentNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    OperationDefinitionNode,
    Visitor,
    parse,
    visit,
)

FRAGMENTS = "fragments"


def query_names() -> list[str]:
    """Every query document ghindex can send."""
    folder = resources.files("ghindex.fetch") / "queries"
    return sorted(
        p.name.removesuffix(".graphql")
        for p in folder.iterdir()
        if p.name.endswith(".graphql") and p.name != f"{FRAGMENTS}.graphql"
    )


@cache
def load_query(name: str) -> DocumentNode:
    """Query `name` with exactly the fragments it uses, transitively."""
    document = parse(_source(name))
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if len(operations) != 1:
        raise ValueError(f"{name}.graphql must hold exactly one operation")
    fragments = _fragments()
    needed: dict[str, FragmentDefinitionNode] = {}
    pending = _spreads(document)
    while pending:
        spread = pending.pop()
        if spread in needed:
            continue
        if spread not in fragments:
            raise ValueError(f"{name}.graphql uses an unknown fragment {spread!r}")
        needed[spread] = fragments[spread]
        pending |= _spreads(fragments[spread])
    definitions = (*document.definitions, *(needed[k] for k in sorted(needed)))
    return DocumentNode(definitions=definitions)


@cache
def _fragments() -> dict[str, FragmentDefinitionNode]:
    document = parse(_source(FRAGMENTS))
    return {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}


def _source(name: str) -> str:
    return (resources.files("ghindex.fetch") / "queries" / f"{name}.graphql").read_text("utf-8")


def _spreads(node) -> set[str]:
    found: set[str] = set()

    class Collect(Visitor):
        def enter_fragment_spread(self, spread: FragmentSpreadNode, *_args) -> None:
            found.add(spread.name.value)

    visit(node, Collect())
    return found
