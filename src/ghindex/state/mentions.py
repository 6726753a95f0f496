"""References to issues and pull requests written in text.

Recognises what GitHub itself links: `#123`, `GH-123`, `owner/repo#123`, and
URLs of issues, pull requests and discussions on github.com. Fenced code blocks
and inline code are skipped: `#123` inside code is not a reference.
"""

from __future__ import annotations

import re

from ghindex.vocabulary.handles import REPO, item_handle

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(rf"https?://github\.com/({REPO})/(?:issues|pull|discussions)/(\d+)")
_CROSS = re.compile(rf"(?<![\w/.-])({REPO})#(\d+)\b")
_LOCAL = re.compile(r"(?<![\w&/#-])(?:#|GH-)(\d+)\b")


def mentioned_handles(text: str | None, repo: str) -> list[str]:
    """Handles ('owner/name#N') mentioned in `text`, in order, without repeats."""
    if not text:
        return []
    prose = _INLINE_CODE.sub(" ", _FENCE.sub(" ", text))
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
