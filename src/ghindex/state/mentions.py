"""References to issues and pull requests written in text.

Recognises what GitHub itself links: `#123`, `GH-123`, `owner/repo#123`, and
URLs of issues, pull requests and discussions on github.com. Fenced code blocks
and inline code are skipped: `#123` inside code is not a reference.

A reference right after one of GitHub's closing keywords ("fixes #12", "Closes:
owner/repo#3", "resolved https://github.com/o/r/issues/4") is also a claim to close
it (`closing_handles`): GitHub acts on it only for pull requests into the default
branch and commits on it, but a pull request into another branch that says "fixes #12"
is still that issue's fix.
"""

from __future__ import annotations

import re

from ghindex.vocabulary.handles import REPO, item_handle

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(rf"https?://github\.com/({REPO})/(?:issues|pull|discussions)/(\d+)")
_CROSS = re.compile(rf"(?<![\w/.-])({REPO})#(\d+)\b")
_LOCAL = re.compile(r"(?<![\w&/#-])(?:#|GH-)(\d+)\b")
# GitHub's closing keywords, each followed by one reference (`Fixes #1, fixes #2`)
_CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?[ \t]+"
    rf"(?:https?://github\.com/({REPO})/(?:issues|pull)/(\d+)|({REPO})#(\d+)\b|#(\d+)\b)",
    re.I,
)


def mentioned_handles(text: str | None, repo: str) -> list[str]:
    """Handles ('owner/name#N') mentioned in `text`, in order, without repeats."""
    if not text:
        return []
    prose = _prose(text)
    found: dict[str, None] = {}
    spans: list[tuple[int, int]] = []
    for pattern in (_URL, _CROSS):
        for match in pattern.finditer(prose):
            found[item_handle(match.group(1), int(match.group(2)))] = None
            spans.append(match.span())
    for match in _LOCAL.finditer(prose):
        if not any(start <= match.start() < end for start, end in spans):
            found[item_handle(repo, int(match.group(1)))] = None
    return list(found)


def _prose(text: str) -> str:
    """`text` without its code: fenced blocks and inline code spans become spaces."""
    return _INLINE_CODE.sub(" ", _FENCE.sub(" ", text))


def closing_handles(text: str | None, repo: str) -> list[str]:
    """Handles `text` says it closes with a closing keyword, in order, without repeats."""
    if not text:
        return []
    prose = _prose(text)
    found: dict[str, None] = {}
    for match in _CLOSING.finditer(prose):
        url_repo, url_number, cross_repo, cross_number, local = match.groups()
        owner = url_repo or cross_repo or repo
        found[item_handle(owner, int(url_number or cross_number or local))] = None
    return list(found)
