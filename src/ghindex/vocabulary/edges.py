"""The kinds of link in the reference graph (`edges.kind`), and what each means.

Storing writes only these kinds (`check_kind`), the graph walk ranks neighbours by
their order (strongest first), and docs/schema.md lists them with their meaning.
"""

from __future__ import annotations

# kind -> what a link of that kind means. Strongest first: the order neighbours of one
# hop are listed in.
MEANINGS = {
    "closes": "a pull request (or commit) closes an issue: closing references, close "
    "events, cross-references that will close their target, a closing keyword (fixes #N) "
    "in a pull request's body or a commit message",
    "duplicate_of": "an item was marked as a duplicate of another",
    "sub_issue_of": "an issue is a sub-issue of its parent",
    "connected": "a pull request was connected to an issue by hand",
    "commit_in_pr": "a commit belongs to a pull request (its commits and merge commit)",
    "references": "a commit message referenced an issue or pull request (a timeline "
    "event, or #N in the message)",
    "cross_references": "an item was referenced from another item's body or comment",
    "links_to": "a doc or wiki page links to another doc or page",
    "mentions": "text (a body, comment, review, release notes, a doc) mentions an item "
    "by #N, owner/repo#N or URL",
    "disconnected": "a manual connection was removed",
    "unmarked_duplicate_of": "a duplicate mark was removed (the pair is no longer a duplicate)",
}
KINDS = tuple(MEANINGS)

# event kind -> the kind it undoes
UNDOES = {"disconnected": "connected", "unmarked_duplicate_of": "duplicate_of"}


def check_kind(kind: str) -> str:
    """`kind` itself when it is one of KINDS; a ValueError (a writer's mistake) if not."""
    if kind not in MEANINGS:
        raise ValueError(f"unknown edge kind {kind!r}: add it to ghindex.vocabulary.edges")
    return kind
