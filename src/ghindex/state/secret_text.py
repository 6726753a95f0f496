"""Text as a detector should read it: what hides a credential from a pattern undone.

A token written with a zero-width space, a soft hyphen or a word joiner inside it, with
its `_` escaped for markdown (`ghp\\_…`), as an HTML entity (`&#95;`), percent-encoded
(`%5F`), as a JSON or C escape (`\\u005f`, `\\x5f`), or wrapped onto the next line right
after its prefix (`ghp_⏎…`) renders or decodes as the token, and a pattern that reads
the raw characters does not see it. `normalised(text)` gives the text with all of that
undone and a map from its offsets back to the original's, so a span found in it is
replaced in the text as it is stored.

Only what cannot change a credential's meaning is undone: characters that render as
nothing are dropped; escapes are decoded only where they stand for a character tokens
are made of (letters, digits, `-._~+/=:@`); a line is joined to the next only after a
prefix's separator (`_`, `-`) that follows two letters or digits.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ghindex.vocabulary.hidden import IGNORABLE

Span = tuple[int, int, str]

# Characters that render as nothing are dropped before matching: one set, the
# vocabulary's (a zero-width space inside a token hides it from every rule).
_INVISIBLE = IGNORABLE
_NAMED = {
    "lowbar": "_",
    "UnderBar": "_",
    "hyphen": "-",
    "dash": "-",
    "period": ".",
    "colon": ":",
    "sol": "/",
    "equals": "=",
    "plus": "+",
    "commat": "@",
    "tilde": "~",
    "amp": "&",
}
# Every branch starts with a character or a class, so `re` skips to candidates fast.
_ESCAPES = (
    rf"(?P<drop>[{_INVISIBLE}]+)"
    r"|\\u(?P<u4>[0-9A-Fa-f]{4})|\\x(?P<x2>[0-9A-Fa-f]{2})"
    r"|\\(?P<md>[!-/:-@\[-`{-~])"
    r"|&#(?P<dec>[0-9]{1,7});|&#[xX](?P<hex>[0-9A-Fa-f]{1,6});"
    r"|&(?P<named>" + "|".join(_NAMED) + r");"
    r"|%(?P<pct>[0-9A-Fa-f]{2})"
)
_HIDING = re.compile(_ESCAPES)
# `_` and `-` are everywhere: the wrapped-line branch is used only in a text that has a
# line ending in one.
_HIDING_WRAPPED = re.compile(_ESCAPES + r"|(?P<wrap>[_-])\r?\n[ \t>+]*(?=[A-Za-z0-9_-])")
_WRAPS = ("_\n", "-\n", "_\r\n", "-\r\n")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=:@")
# Percent-encoding: only RFC 3986's unreserved characters, which a URL never needs to
# encode (`%20`, `%2F` and `%3D` stay as they are: URLs are full of them).
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ALNUM = re.compile(r"[A-Za-z0-9]{2}")


@dataclass(frozen=True)
class Normalised:
    """`text` as a detector should read it, and where each of its edits came from:
    (start in `text`, length in `text`, start in the original, end in the original)."""

    text: str
    edits: list[tuple[int, int, int, int]]

    def windows(self, reach: int = 2048) -> list[tuple[int, int]]:
        """The parts of `text` within `reach` of an edit, merged: a credential an edit
        hid lies across it, and the rest of the text was scanned as it was."""
        merged: list[tuple[int, int]] = []
        for start, length, _, _ in self.edits:
            low, high = max(start - reach, 0), min(start + length + reach, len(self.text))
            if merged and low <= merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
            else:
                merged.append((low, high))
        return merged

    def to_original(self, spans: list[Span]) -> list[Span]:
        starts = [edit[0] for edit in self.edits]
        return [(self._start(s, starts), self._end(e, starts), k) for s, e, k in spans if e > s]

    def _start(self, at: int, starts: list[int]) -> int:
        i = bisect.bisect_right(starts, at) - 1
        if i < 0:
            return at
        start, length, source, source_end = self.edits[i]
        return source if at < start + length else source_end + at - start - length

    def _end(self, end: int, starts: list[int]) -> int:
        last = end - 1
        i = bisect.bisect_right(starts, last) - 1
        if i < 0:
            return end
        start, length, _, source_end = self.edits[i]
        return source_end if last < start + length else source_end + end - start - length


def normalised(text: str) -> Normalised | None:
    """`text` with invisible characters dropped, escapes of token characters decoded and
    lines wrapped after a prefix joined; None when nothing is to be undone."""
    pieces: list[str] = []
    edits: list[tuple[int, int, int, int]] = []
    done = 0
    length = 0  # of the normalised text so far
    hiding = _HIDING_WRAPPED if any(w in text for w in _WRAPS) else _HIDING
    for match in hiding.finditer(text):
        new = _undone(match, text)
        if new is None:
            continue
        before = text[done : match.start()]
        pieces += [before, new]
        length += len(before)
        edits.append((length, len(new), match.start(), match.end()))
        length += len(new)
        done = match.end()
    if not edits:
        return None
    pieces.append(text[done:])
    return Normalised("".join(pieces), edits)


def _undone(match: re.Match[str], text: str) -> str | None:
    """What `match` stands for, or None to leave it as it is."""
    kind = match.lastgroup
    value = match.group(kind)
    if kind == "drop":
        return ""
    if kind == "md":
        return value
    if kind == "wrap":
        return value if _ALNUM.fullmatch(text, max(match.start() - 2, 0), match.start()) else None
    if kind == "named":
        return _NAMED[value]
    code = int(value, 10 if kind == "dec" else 16)
    char = chr(code) if code < 0x110000 else ""
    allowed = _UNRESERVED if kind == "pct" else _TOKEN_CHARS
    return char if char in allowed else None
