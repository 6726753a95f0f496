"""Chunking: Markdown blocks and diff hunks under the token budget, every chunk
self-describing, code kept whole, credentials redacted."""

from __future__ import annotations

from datetime import UTC, datetime

from ghindex.index.chunking import (
    ChunkSettings,
    chunk_document,
    estimate_tokens,
    split_diff,
    split_markdown,
    split_text,
)
from ghindex.index.documents import Document

T = datetime(2024, 1, 1, tzinfo=UTC)


def doc(body, title="Title", type="issue", path=None, preamble="", handle="o/r#7"):
    return Document(
        handle=handle,
        entity=handle,
        entity_type=type,
        repo="o/r",
        type=type,
        number=7,
        title=title,
        body=body,
        preamble=preamble,
        state="open",
        labels=(),
        author=None,
        author_association=None,
        assignees=(),
        milestone=None,
        path=path,
        created_at=T,
        updated_at=T,
        url="https://github.com/o/r/issues/7",
    )


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


def test_headings_start_chunks_and_become_the_breadcrumb():
    text = (
        "# Guide\n\nIntro text.\n\n## Install\n\nRun pip.\n\n### From source\n\nClone it.\n\n"
        "## Use\n\nImport it."
    )
    assert split_markdown(text, ChunkSettings()) == [
        (("Guide",), "# Guide\n\nIntro text."),
        (("Guide", "Install"), "## Install\n\nRun pip.\n\n### From source\n\nClone it."),
        (("Guide", "Use"), "## Use\n\nImport it."),
    ]


def test_rst_and_setext_underlines_are_headings():
    text = "Title\n=====\n\nFirst.\n\nSection\n-------\n\nSecond."
    assert [path for path, _ in split_markdown(text, ChunkSettings())] == [
        ("Title",),
        ("Title", "Section"),
    ]


def test_a_code_block_is_not_cut_unless_it_alone_exceeds_the_budget():
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(8)) + "\n```"
    text = "Some words here.\n\n" + code + "\n\nAfter."
    pieces = split_markdown(text, ChunkSettings(max_tokens=40))

    assert any(code in piece for _, piece in pieces)
    assert all("```" not in piece or piece.count("```") == 2 for _, piece in pieces)

    huge = "```\n" + "\n".join(f"line {i} with words" for i in range(60)) + "\n```"
    cut = split_markdown(huge, ChunkSettings(max_tokens=40))
    assert len(cut) > 1
    assert all(estimate_tokens(piece) <= 40 for _, piece in cut)
    assert "".join(p for _, p in cut).count("line ") == 60


def test_a_heading_inside_a_code_block_is_not_a_heading():
    text = "# Real\n\n```bash\n# just a comment\necho hi\n```\n"
    assert [path for path, _ in split_markdown(text, ChunkSettings())] == [("Real",)]


def test_every_chunk_starts_with_its_breadcrumb():
    body = "# Part one\n\n" + "a " * 150 + "\n\n# Part two\n\n" + "b " * 150
    guide = doc(body, title="Guide", type="doc", path="docs/guide.md", handle="o/r:docs/guide.md")
    chunks = chunk_document(guide, ChunkSettings(max_tokens=100))

    assert [c.id for c in chunks][:2] == ["o/r:docs/guide.md::0", "o/r:docs/guide.md::1"]
    assert chunks[0].text.startswith("Guide > Part one\n\n# Part one")
    assert chunks[-1].text.startswith("Guide > Part two\n\n")
    assert len({c.content_hash for c in chunks}) == len(chunks)


def test_an_empty_body_still_gets_one_chunk():
    chunks = chunk_document(doc("   "), ChunkSettings())

    assert [(c.id, c.text) for c in chunks] == [("o/r#7::0", "Title")]


def test_a_title_only_doc_is_one_chunk_with_its_title():
    chunks = chunk_document(
        doc(
            "",
            title="Release checklist",
            type="doc",
            path="CHECKLIST.md",
            handle="o/r:CHECKLIST.md",
        ),
        ChunkSettings(),
    )
    assert [c.text for c in chunks] == ["Release checklist"]


def test_the_preamble_leads_the_first_chunk():
    chunks = chunk_document(
        doc("Looks good.", preamble="Review (approved) by ana"), ChunkSettings()
    )
    assert chunks[0].text == "Title\n\nReview (approved) by ana\n\nLooks good."


def test_diffs_are_cut_at_hunks_with_the_path_in_the_breadcrumb():
    patch = (
        "diff --git a/src/app.py b/src/app.py\nindex 1..2 100644\n--- a/src/app.py\n"
        "+++ b/src/app.py\n@@ -1,2 +1,2 @@\n-import os\n+import sys\n@@ -10,2 +10,3 @@ def f():\n"
        "     return 1\n+    # done\n"
    )
    assert split_diff(patch, ChunkSettings()) == [
        "@@ -1,2 +1,2 @@\n-import os\n+import sys\n\n"
        "@@ -10,2 +10,3 @@ def f():\n     return 1\n+    # done"
    ]
    assert split_diff(patch, ChunkSettings(max_tokens=25)) == [
        "@@ -1,2 +1,2 @@\n-import os\n+import sys",
        "@@ -10,2 +10,3 @@ def f():\n     return 1\n+    # done",
    ]
    diff = doc(
        patch,
        title="Use sys",
        type="diff",
        path="src/app.py",
        preamble="Details.",
        handle="o/r@abc:src/app.py",
    )
    chunks = chunk_document(diff, ChunkSettings(max_tokens=25, budget=()))
    assert chunks[0].text.startswith("Use sys > src/app.py\n\nDetails.\n\n@@ -1,2 +1,2 @@")
    assert chunks[1].text.startswith("Use sys > src/app.py\n\n@@ -10,2")


def test_huge_documents_are_capped():
    body = "\n\n".join(f"Paragraph {i} " + "word " * 50 for i in range(100))
    assert len(chunk_document(doc(body), ChunkSettings(max_chunks=5, budget=()))) == 5
    assert len(chunk_document(doc(body), ChunkSettings(max_chunks=5))) == 1  # an issue: one row


def test_the_same_text_hashes_the_same():
    a = chunk_document(doc("same body"), ChunkSettings())[0]
    b = chunk_document(doc("same body"), ChunkSettings())[0]
    c = chunk_document(doc("same body", title="Other"), ChunkSettings())[0]
    assert a.content_hash == b.content_hash != c.content_hash


def test_a_budget_keeps_the_rest_of_the_text_in_its_last_row():
    body = "\n\n".join(f"para{n} " + "word " * 90 for n in range(6))  # six ~92-token blocks
    unlimited = chunk_document(doc(body), ChunkSettings(max_tokens=100, budget=()))
    two = chunk_document(doc(body), ChunkSettings(max_tokens=100, budget=(("issue", 2),)))

    assert len(unlimited) == 6
    assert [c.id for c in two] == ["o/r#7::0", "o/r#7::1"]
    assert two[0].text == unlimited[0].text  # the item's own row is unchanged
    assert two[1].text.startswith("Title\n\npara1 ")
    assert all(f"para{n} " in two[1].text for n in range(1, 6))  # words past the window
    # a cap on the last row's text: blocks past it are left to the state
    capped = chunk_document(
        doc(body), ChunkSettings(max_tokens=100, budget=(("issue", 2),), tail_tokens=200)
    )
    assert "para2 " in capped[1].text and "para3 " not in capped[1].text
    # other types are not cut
    issues_only = ChunkSettings(max_tokens=100, budget=(("issue", 1),))
    other = chunk_document(doc(body, type="doc"), issues_only)
    assert len(other) == 6


def test_a_diff_on_a_budget_of_one_is_one_row_with_every_hunk():
    hunks = "".join(f"@@ -{n},1 +{n},1 @@\n-old{n} " + "x " * 60 + f"\n+new{n}\n" for n in range(4))
    diff = doc(
        hunks,
        title="Fix it",
        type="diff",
        path="src/app.py",
        handle="o/r@abc:src/app.py",
        preamble="Longer message.",
    )
    rows = chunk_document(diff, ChunkSettings(max_tokens=80, budget=(("diff", 1),)))

    assert len(rows) == 1
    assert rows[0].text.startswith("Fix it > src/app.py\n\nLonger message.\n\n@@ -0,1")
    assert all(f"+new{n}" in rows[0].text for n in range(4))
    assert ChunkSettings(budget=(("diff", 1),)).as_dict()["budget"] == {"diff": 1}
