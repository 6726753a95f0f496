"""Splitting documents into chunks that fit the embedding model.

A chunk is at most `max_tokens` estimated tokens of body text, cut at paragraph
boundaries where possible and at word boundaries otherwise. Every chunk repeats
the document's title and handle, so a fragment of a long thread still says
what it belongs to, and a document with an empty body still gets one chunk.

Tokens are estimated with a BERT-like pre-tokenizer (runs of word characters
and single punctuation marks), so chunking needs no model and stays stable
across builds; the estimate errs high, so chunks rarely reach the model's limit.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ghindex.documents import Document

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_PARAGRAPH_RE = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class ChunkSettings:
    max_tokens: int = 200
    overlap_tokens: int = 32

    def as_dict(self) -> dict[str, object]:
        return {
            "strategy": "paragraphs",
            "max_tokens": self.max_tokens,
            "overlap_tokens": self.overlap_tokens,
            "token_estimate": "bert-pretokenizer",
        }


@dataclass(frozen=True)
class Chunk:
    id: str
    document: Document
    index: int
    text: str  # what is embedded and full-text indexed: header + body piece
    content_hash: str  # sha256 of `text`


def estimate_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def chunk_document(doc: Document, settings: ChunkSettings) -> list[Chunk]:
    header = f"{doc.title}\n{doc.handle}"
    pieces = split_text(doc.body, settings) or [""]
    chunks = []
    for index, piece in enumerate(pieces):
        text = f"{header}\n\n{piece}".rstrip()
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        chunks.append(Chunk(f"{doc.handle}::{index}", doc, index, text, digest))
    return chunks


def split_text(text: str, settings: ChunkSettings) -> list[str]:
    """Pack paragraphs into pieces of at most `max_tokens`; split long paragraphs."""
    limit = settings.max_tokens
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for paragraph in _PARAGRAPH_RE.split(text.strip()):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        tokens = estimate_tokens(paragraph)
        if tokens > limit:
            if current:
                pieces.append("\n\n".join(current))
                current, size = [], 0
            pieces.extend(_split_long(paragraph, settings))
            continue
        if size + tokens > limit and current:
            pieces.append("\n\n".join(current))
            current, size = [], 0
        current.append(paragraph)
        size += tokens
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def _split_long(paragraph: str, settings: ChunkSettings) -> list[str]:
    """Windows of whole words, each under the limit, overlapping a little."""
    words = paragraph.split(" ")
    costs = [max(1, estimate_tokens(w)) for w in words]
    windows = []
    start = 0
    while start < len(words):
        end, size = start, 0
        while end < len(words) and (size + costs[end] <= settings.max_tokens or end == start):
            size += costs[end]
            end += 1
        windows.append(" ".join(words[start:end]).strip())
        if end >= len(words):
            break
        back, overlap = end, 0
        while back > start + 1 and overlap + costs[back - 1] <= settings.overlap_tokens:
            back -= 1
            overlap += costs[back]
        start = back
    return [w for w in windows if w]
