"""References written in text, as GitHub links them."""

from __future__ import annotations

import pytest

from ghindex.state.mentions import closing_handles, mentioned_handles


def test_local_cross_repo_and_url_references():
    text = (
        "Fixes #12, see GH-3 and psf/requests#6000.\n"
        "Also https://github.com/encode/httpx/pull/3371 and "
        "https://github.com/encode/httpx/discussions/7#discussioncomment-1"
    )
    assert mentioned_handles(text, "octo/hello") == [
        "encode/httpx#3371",
        "encode/httpx#7",
        "psf/requests#6000",
        "octo/hello#12",
        "octo/hello#3",
    ]


def test_code_is_not_a_reference():
    text = "Run `pytest -k #5`.\n\n```python\ncolor = '#123'\nissue = #77\n```\nbut #8 counts"
    assert mentioned_handles(text, "o/r") == ["o/r#8"]


def test_things_that_look_alike_are_not_references():
    text = "&#39; color:#fff id#4 a/b#x word#12 /#13 x-#14 ##15"
    assert mentioned_handles(text, "o/r") == []


def test_repeats_are_listed_once_and_empty_text_has_none():
    assert mentioned_handles("#1 #1 o/r#1", "o/r") == ["o/r#1"]
    assert mentioned_handles(None, "o/r") == []
    assert mentioned_handles("", "o/r") == []


def test_closing_keywords_name_what_a_text_closes():
    text = (
        "Fixes #12 and closes: o/r#3. Resolved https://github.com/a/b/issues/4; "
        "FIX #6, fixes #7 and fixes #12 again"
    )
    assert closing_handles(text, "x/y") == ["x/y#12", "o/r#3", "a/b#4", "x/y#6", "x/y#7"]


@pytest.mark.parametrize(
    "text",
    [
        "see #5",  # a mention, not a claim to close
        "hotfix #9 and unfixed #10 and prefixes #11",  # keywords inside other words
        "`fixes #8`",  # code
        "```\nfixes #8\n```",
        "fixes the bug in #13",  # the keyword must come right before the reference
    ],
)
def test_mentions_without_a_closing_keyword_close_nothing(text):
    assert closing_handles(text, "o/r") == []
    assert closing_handles(None, "o/r") == []


def test_hostile_text_yields_only_well_formed_handles():
    text = (
        "fixes #1'; DROP TABLE edges;-- closes ../../etc#2 "
        "resolves https://evil.example/o/r/issues/3 "
        + "fix " * 20_000
        + "fixes #12345678901234567890"
    )
    found = closing_handles(text, "o/r")
    assert found == ["o/r#1", "o/r#12345678901234567890"]
    assert all(h.startswith("o/r#") and h[4:].isdigit() for h in found)
