"""The reference graph: what holds now between items, walked from one item, and the
links docs hold. See docs/graph.md.

- `handles`: what a person types (a comment, a sha prefix) -> the item's handle;
- `neighbours`: the one recursive query that walks `edges`, and `fix_links`;
- `doc_links`: `links_to` and `mentions` edges derived from `docs`.
"""

from ghindex.graph.doc_links import doc_links, replace_doc_links
from ghindex.graph.handles import UnknownHandle, parent_item, resolve_handle
from ghindex.graph.neighbours import (
    KINDS,
    NearestItems,
    Neighbour,
    Provenance,
    Related,
    fix_links,
    neighbours,
    related,
)

__all__ = [
    "KINDS",
    "NearestItems",
    "Neighbour",
    "Provenance",
    "Related",
    "UnknownHandle",
    "doc_links",
    "fix_links",
    "neighbours",
    "parent_item",
    "related",
    "replace_doc_links",
    "resolve_handle",
]
