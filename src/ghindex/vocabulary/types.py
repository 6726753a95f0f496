"""Document types and entity types: what the index holds and what results collapse to.

A document is one searchable text (`chunks.type`); an entity is the item a document's
results collapse to (`chunks.entity_type`): a comment's entity is its issue, a diff's
its commit. A search can be narrowed to either (FILTER_TYPES).
"""

from __future__ import annotations

# One per surface, in the order documents are built (see ghindex.index.documents).
DOCUMENT_TYPES = (
    "issue",
    "pull_request",
    "discussion",
    "issue_comment",
    "pr_review",
    "pr_review_comment",
    "release",
    "doc",
    "wiki_doc",
    "diff",
)

# What results collapse to: an item, a release, a doc or wiki page, a commit.
ENTITY_TYPES = ("issue", "pull_request", "discussion", "release", "doc", "wiki_doc", "commit")

# What `type` filters accept: every document type, then the entity types that are not
# one ('commit'). The MCP tools' `type` enum, in this order.
FILTER_TYPES = (*DOCUMENT_TYPES, *(t for t in ENTITY_TYPES if t not in DOCUMENT_TYPES))
