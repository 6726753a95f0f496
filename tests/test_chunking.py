"""Chunking: whole paragraphs under the token budget, every chunk self-describing."""

from __future__ import annotations

from datetime import UTC, datetime

from ghindex.chunking import ChunkSettings, chunk_document, estimate_tokens, split_text
from ghindex.documents import Document

T = datetime(2024, 1, 1, tzinfo=UTC)


def doc(body, title="Title"):
    return Document(
        handle="o/r#7", repo="o/r", type="issue", number=7, title=title, body=body,
        state="open", labels=(), author=None, assignees=(), milestone=None, path=None,
        created_at=T, updated_at=T, url="https://github.com/o/r/issues/7",
    )  # fmt: skip


def test_token_estimate_counts_words_and_punctuation():
    assert estimate_tokens("foo(bar, baz) == 3") == 9  # foo ( bar , baz ) = = 3


def test_short_paragraphs_are_packed_together():
    settings = ChunkSettings(max_tokens=6)
    assert split_text("one two\n\nthree four\n\n\n  five six seven eight", settings) == [
        "one two\n\nthree four",
        "five six seven eight",
    ]


def test_a_long_paragraph_is_cut_into_overlapping_windows_under_the_limit():
    settings = ChunkSettings(max_tokens=10, overlap_tokens=3)
    words = " ".join(f"w{i}" for i in range(25))

    pieces = split_text(words, settings)

    assert pieces == [
        "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9",
        "w7 w8 w9 w10 w11 w12 w13 w14 w15 w16",
        "w14 w15 w16 w17 w18 w19 w20 w21 w22 w23",
        "w21 w22 w23 w24",
    ]
    assert all(estimate_tokens(p) <= 10 for p in pieces)


def test_every_chunk_starts_with_title_and_handle():
    chunks = chunk_document(doc("a " * 150 + "\n\n" + "b " * 150), ChunkSettings(max_tokens=100))

    assert len(chunks) == 4
    assert [c.id for c in chunks] == ["o/r#7::0", "o/r#7::1", "o/r#7::2", "o/r#7::3"]
    assert all(c.text.startswith("Title\no/r#7\n\n") for c in chunks)
    assert len({c.content_hash for c in chunks}) == 4


def test_an_empty_body_still_gets_one_chunk():
    chunks = chunk_document(doc("   "), ChunkSettings())

    assert [(c.id, c.text) for c in chunks] == [("o/r#7::0", "Title\no/r#7")]


def test_the_same_text_hashes_the_same():
    a = chunk_document(doc("same body"), ChunkSettings())[0]
    b = chunk_document(doc("same body"), ChunkSettings())[0]
    c = chunk_document(doc("same body", title="Other"), ChunkSettings())[0]
    assert a.content_hash == b.content_hash != c.content_hash
