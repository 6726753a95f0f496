"""A context pack: the passages most relevant to a question that fit a token budget,
each with the handle and URL to cite, and a note when the evidence is thin."""

from __future__ import annotations

from typing import Any

from ghindex.query.hits import SearchResponse, excerpt
from ghindex.vocabulary.tokens import estimate as tokens
from ghindex.vocabulary.tokens import most_chars, within

CANDIDATES = 20  # hits considered for a pack
CITATION_TOKENS = 30  # what the fields around a passage cost
PASSAGE_TOKENS = 400  # a longer row (one that carries a document's rest) is cut to this
NOTHING_FOUND = (
    "nothing in the snapshot matches this question: say that no source was found "
    "instead of answering from memory"
)
WEAK_LEADS = (
    "no passage matched by both meaning and wording: treat these as weak leads and "
    "check them before relying on them"
)


def pack(response: SearchResponse, max_tokens: int) -> dict[str, Any]:
    """The hits of `response`, best first, as passages until `max_tokens` is spent; the
    best one is always given, cut to fit, when the budget allows any text at all."""
    passages, kept, used = [], [], 0
    for hit in response.results:
        text = passage(hit.text, response.query) if hit.text else hit.snippet
        cost = tokens(text) + CITATION_TOKENS
        if used + cost > max_tokens:
            if not passages and max_tokens > 60:
                text = within(text, max_tokens - CITATION_TOKENS)
                cost = tokens(text) + CITATION_TOKENS
            else:
                continue
        passages.append(
            {
                "handle": hit.entity,
                "matched": hit.handle,
                "type": hit.entity_type,
                "title": hit.title,
                "url": hit.url,
                "state": hit.state,
                "author": hit.author,
                "author_association": hit.author_association,
                "text": text,
            }
        )
        kept.append(hit)
        used += cost
    body: dict[str, Any] = {"question": response.query, "passages": passages, "tokens": used}
    body["filters_unmatched"] = response.filters_unmatched
    if not passages:
        body["note"] = NOTHING_FOUND
    elif not any(h.dense_rank and h.sparse_rank for h in kept):
        body["note"] = WEAK_LEADS
    return body


def passage(text: str, question: str) -> str:
    """A row's text, cut to PASSAGE_TOKENS around the question's first word in it; the
    breadcrumb line, which says what the passage belongs to, stays."""
    if tokens(text) <= PASSAGE_TOKENS:
        return text
    crumb, _, body = text.partition("\n\n")
    room = most_chars(PASSAGE_TOKENS) - len(crumb) - 2
    return f"{crumb}\n\n{excerpt(body, max(room, 200), question)}"
