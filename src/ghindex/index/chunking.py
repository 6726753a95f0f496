"""Splitting documents into chunks that fit the embedding model.

Markdown (and reStructuredText) is split into blocks (paragraphs, list runs,
fenced code, headings) that are packed into chunks of at most `max_tokens`
estimated tokens. A heading of level 1 or 2 always starts a new chunk, a code
block is cut only when it alone exceeds the budget, and every chunk begins with
a breadcrumb, `repo > title > heading > subheading`, so a fragment still says
what it belongs to. Diffs are split at hunk boundaries, with the commit subject
and the file path in the breadcrumb. A document with no text still gets one
chunk (its breadcrumb), so an item that is only a title stays findable.

Tokens are estimated with a BERT-like pre-tokenizer (runs of word characters and
single punctuation marks), so chunking needs no model and is stable across builds.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ghindex.index.documents import Document

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_PARAGRAPH_RE = re.compile(r"\n\s*\n")
_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_UNDERLINE_LEVEL = {"=": 1, "-": 2, "~": 3}


# Rows per document of each type (`ChunkSettings.budget`): the last row of a document
# cut short carries the rest of its text (up to `tail_tokens`) for full-text search,
# while its vector reads only the model's window at its start. An item is one vector
# of its title and opening, a file diff one of its commit, path and first hunk (each
# commit also has a summary row: documents.py). Types not named here keep every piece,
# up to `max_chunks`. Chosen by measurement on the eval sets: docs/search.md.
DEFAULT_BUDGET: tuple[tuple[str, int], ...] = (
    ("issue", 1),
    ("pull_request", 1),
    ("discussion", 1),
    ("issue_comment", 1),
    ("pr_review", 1),
    ("pr_review_comment", 1),
    ("release", 2),
    ("doc", 8),
    ("wiki_doc", 8),
    ("diff", 1),
)


@dataclass(frozen=True)
class ChunkSettings:
    max_tokens: int = 200
    overlap_tokens: int = 32
    max_chunks: int = 64  # per document: the rest of a huge file or diff is not embedded
    budget: tuple[tuple[str, int], ...] = DEFAULT_BUDGET  # (document type, rows) pairs
    tail_tokens: int = 2000  # most text a budget's last row carries

    def rows_for(self, doc_type: str) -> int:
        return min(dict(self.budget).get(doc_type, self.max_chunks), self.max_chunks)

    def as_dict(self) -> dict[str, object]:
        return {
            "strategy": "markdown-blocks+diff-hunks",
            "max_tokens": self.max_tokens,
            "overlap_tokens": self.overlap_tokens,
            "max_chunks": self.max_chunks,
            "budget": dict(self.budget),
            "tail_tokens": self.tail_tokens,
            "token_estimate": "bert-pretokenizer",
        }


@dataclass(frozen=True)
class Chunk:
    id: str
    document: Document
    index: int
    text: str  # what is embedded and full-text indexed: breadcrumb + body piece
    content_hash: str  # sha256 of `text`


def estimate_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def chunk_document(doc: Document, settings: ChunkSettings) -> list[Chunk]:
    if doc.type == "diff":
        pieces = [(_breadcrumb(doc, ()), p) for p in split_diff(doc.body, settings)]
    else:
        pieces = [(_breadcrumb(doc, path), p) for path, p in split_markdown(doc.body, settings)]
    if doc.preamble and pieces:
        crumb, first = pieces[0]
        pieces[0] = (crumb, f"{doc.preamble}\n\n{first}".strip())
    pieces = _within_budget(pieces, settings.rows_for(doc.type), settings.tail_tokens)
    pieces = pieces or [(_breadcrumb(doc, ()), doc.preamble or "")]
    chunks = []
    for index, (crumb, piece) in enumerate(pieces):
        text = f"{crumb}\n\n{piece}".rstrip()  # redacted when it was stored (redact.py)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        chunks.append(Chunk(f"{doc.handle}::{index}", doc, index, text, digest))
    return chunks


def _within_budget(
    pieces: list[tuple[str, str]], rows: int, tail_tokens: int
) -> list[tuple[str, str]]:
    """At most `rows` pieces: the last one takes the following pieces' text too, up to
    `tail_tokens`, so full-text search still finds words the embedding never reads."""
    if len(pieces) <= rows or rows < 1:
        return pieces[: max(rows, 0)]
    crumb, first = pieces[rows - 1]
    tail, size = [first], estimate_tokens(first)
    for _, piece in pieces[rows:]:
        cost = estimate_tokens(piece)
        if size + cost > tail_tokens:
            break
        tail.append(piece)
        size += cost
    return [*pieces[: rows - 1], (crumb, "\n\n".join(tail))]


def _breadcrumb(doc: Document, headings: tuple[str, ...]) -> str:
    # No repository name: it is a filter, not words of the item, and in an embedded text
    # it pulls every row toward every query alike (measured in bench/README.md, #34).
    parts = [doc.title or doc.path or doc.handle]
    if doc.type == "diff" and doc.path:
        parts.append(doc.path)
    parts.extend(h for h in headings if h)
    return " > ".join(p.replace("\n", " ") for p in parts if p)


def split_text(text: str, settings: ChunkSettings) -> list[str]:
    """Pack paragraphs into pieces of at most `max_tokens`; split long paragraphs."""
    blocks = [p.strip() for p in _PARAGRAPH_RE.split(text.strip()) if p.strip()]
    return [piece for _, piece in _pack([((), b, False) for b in blocks], settings)]


def split_markdown(text: str, settings: ChunkSettings) -> list[tuple[tuple[str, ...], str]]:
    """(heading path, piece) pairs: blocks packed under the budget, per section."""
    return _pack(_blocks(text), settings)


def split_diff(patch: str, settings: ChunkSettings) -> list[str]:
    """Hunks of a unified diff packed under the budget; a huge hunk is cut by lines."""
    hunks: list[str] = []
    current: list[str] = []
    for line in patch.splitlines():
        if line.startswith("@@") and current:
            hunks.append("\n".join(current))
            current = []
        if not current and not line.startswith("@@") and _is_diff_header(line):
            continue
        current.append(line)
    if current:
        hunks.append("\n".join(current))
    pieces: list[str] = []
    for hunk in hunks:
        pieces.extend(
            _split_lines(hunk, settings) if estimate_tokens(hunk) > settings.max_tokens else [hunk]
        )
    return [p for _, p in _pack([((), p, True) for p in pieces], settings, respect_headings=False)]


def _is_diff_header(line: str) -> bool:
    return line.startswith(
        (
            "diff --git",
            "index ",
            "--- ",
            "+++ ",
            "new file mode",
            "deleted file mode",
            "similarity index",
            "rename from",
            "rename to",
            "old mode",
            "new mode",
            "Binary files",
        )
    )


def _blocks(text: str) -> list[tuple[tuple[str, ...], str, bool]]:
    """(heading path, block text, is code) in order; headings are blocks of their own."""
    blocks: list[tuple[tuple[str, ...], str, bool]] = []
    headings: list[tuple[int, str]] = []
    current: list[str] = []
    fence: str | None = None

    def path() -> tuple[str, ...]:
        return tuple(title for _, title in headings)

    def flush(code: bool = False) -> None:
        if current and any(line.strip() for line in current):
            blocks.append((path(), "\n".join(current).strip("\n"), code))
        current.clear()

    def heading(level: int, title: str, line: str) -> None:
        flush()
        while headings and headings[-1][0] >= level:
            headings.pop()
        headings.append((level, title.strip()))
        blocks.append((path(), line, False))

    for line in text.replace("\r\n", "\n").split("\n"):
        if fence is not None:
            current.append(line)
            if line.strip().startswith(fence):
                fence = None
                flush(code=True)
            continue
        opening = _FENCE.match(line)
        if opening:
            flush()
            fence = opening.group(1)[0] * len(opening.group(1))
            current.append(line)
            continue
        atx = _ATX.match(line)
        if atx:
            if atx.group(2).strip():
                heading(len(atx.group(1)), atx.group(2), line)
            else:
                flush()  # an empty heading is only a separator
            continue
        underline = _UNDERLINE.match(line)
        if underline and len(current) == 1 and current[0].strip():
            title = current.pop()
            level = _UNDERLINE_LEVEL.get(underline.group(1), 4)
            heading(level, title, f"{title}\n{line}")
            continue
        if not line.strip():
            flush()
            continue
        current.append(line)
    flush(code=fence is not None)
    return blocks


def _pack(
    blocks: list[tuple[tuple[str, ...], str, bool]],
    settings: ChunkSettings,
    respect_headings: bool = True,
) -> list[tuple[tuple[str, ...], str]]:
    limit = settings.max_tokens
    pieces: list[tuple[tuple[str, ...], str]] = []
    current: list[str] = []
    current_path: tuple[str, ...] = ()
    size = 0

    def flush() -> None:
        nonlocal current, size
        if current:
            pieces.append((current_path, "\n\n".join(current)))
        current, size = [], 0

    for path, block, code in blocks:
        tokens = estimate_tokens(block)
        major = respect_headings and _ATX.match(block) and len(_ATX.match(block).group(1)) <= 2
        major = major or (respect_headings and "\n" in block and _is_underlined(block))
        if major or (current and size + tokens > limit):
            flush()
        if not current:
            current_path = path
        if tokens > limit:
            flush()
            current_path = path
            parts = _split_lines(block, settings) if code else _split_long(block, settings)
            pieces.extend((path, part) for part in parts)
            continue
        current.append(block)
        size += tokens
    flush()
    return pieces


def _is_underlined(block: str) -> bool:
    lines = block.split("\n")
    return (
        len(lines) == 2
        and bool(_UNDERLINE.match(lines[1]))
        and _UNDERLINE_LEVEL.get(lines[1].strip()[0], 4) <= 2
    )


def _split_lines(block: str, settings: ChunkSettings) -> list[str]:
    """Consecutive lines under the budget (code and diffs are cut between lines)."""
    pieces, current, size = [], [], 0
    for line in block.split("\n"):
        tokens = estimate_tokens(line)
        if current and size + tokens > settings.max_tokens:
            pieces.append("\n".join(current))
            current, size = [], 0
        if tokens > settings.max_tokens:
            pieces.extend(_split_long(line, settings))
            continue
        current.append(line)
        size += tokens
    if current:
        pieces.append("\n".join(current))
    return [p for p in pieces if p.strip()]


def _split_long(paragraph: str, settings: ChunkSettings) -> list[str]:
    """Windows of whole words, each under the limit, overlapping a little."""
    words = paragraph.split(" ")
    # a word of letters and digits alone is one token: the pattern is run on the others
    costs = [1 if w.isalnum() else max(1, estimate_tokens(w)) for w in words]
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
