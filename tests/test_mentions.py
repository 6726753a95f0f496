"""References written in text, as GitHub links them."""

from __future__ import annotations

from ghindex.state.mentions import mentioned_handles


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
