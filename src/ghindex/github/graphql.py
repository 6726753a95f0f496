"""The query documents in `fetch/queries/`, assembled with the fragments they use.

`fragments.graphql` holds every shared selection once. A query file names the
fragments it needs with `...Name`; `load_query` appends those fragments, and the
fragments they use in turn, and nothing else (GitHub, like the spec, rejects a
document with unused fragments).

The light listings (`issue_ids`, `pull_request_ids`, `discussion_ids`) have no file:
each is its list query with the items' fields cut down to `id number updatedAt`, so
that both always ask for the same page in the same order.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    NameNode,
    OperationDefinitionNode,
    SelectionSetNode,
    Visitor,
    parse,
    visit,
)

FRAGMENTS = "fragments"
# light listing -> the list query it is cut from
LIGHT = {
    "issue_ids": "issues",
    "pull_request_ids": "pull_requests",
    "discussion_ids": "discussions",
}


def query_names() -> list[str]:
    """Every query document ghindex can send."""
    folder = resources.files("ghindex.github") / "queries"
    return sorted(
        [
            p.name.removesuffix(".graphql")
            for p in folder.iterdir()
            if p.name.endswith(".graphql") and p.name != f"{FRAGMENTS}.graphql"
        ]
        + list(LIGHT)
    )


@cache
def load_query(name: str) -> DocumentNode:
    """Query `name` with exactly the fragments it uses, transitively."""
    document = _light(LIGHT[name]) if name in LIGHT else parse(_source(name))
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
    return (resources.files("ghindex.github") / "queries" / f"{name}.graphql").read_text("utf-8")


def _spreads(node) -> set[str]:
    found: set[str] = set()

    class Collect(Visitor):
        def enter_fragment_spread(self, spread: FragmentSpreadNode, *_args) -> None:
            found.add(spread.name.value)

    visit(node, Collect())
    return found


def _light(name: str) -> DocumentNode:
    """List query `name` with its items' selection (`nodes { ...Fields }`) replaced by
    `nodes { id number updatedAt }`, and its operation named `...Ids`."""
    fields = tuple(FieldNode(name=NameNode(value=f)) for f in ("id", "number", "updatedAt"))

    class Cut(Visitor):
        def enter_operation_definition(self, node: OperationDefinitionNode, *_args):
            assert node.name is not None
            renamed = NameNode(value=node.name.value.removesuffix("s") + "Ids")
            return OperationDefinitionNode(
                operation=node.operation,
                name=renamed,
                variable_definitions=node.variable_definitions,
                directives=node.directives,
                selection_set=node.selection_set,
            )

        def enter_field(self, node: FieldNode, *_args):
            if node.name.value != "nodes" or node.selection_set is None:
                return None
            if not all(isinstance(s, FragmentSpreadNode) for s in node.selection_set.selections):
                return None
            return FieldNode(
                alias=node.alias,
                name=node.name,
                arguments=node.arguments,
                directives=node.directives,
                selection_set=SelectionSetNode(selections=fields),
            )

    return visit(parse(_source(name)), Cut())
