"""Characters that render as nothing: the one set every door removes (MCP, the Python
API) or shows as escapes (the CLI) before a reader sees text from GitHub.

Text written by GitHub users can carry what no one sees: Unicode tag characters
(U+E0000–E007F, which spell ASCII to a model: "ignore previous instructions" in a title
that reads "Build fails on Windows"), zero-width spaces and joiners, word joiners and
invisible operators, the line and paragraph separators U+2028/2029, variation
selectors, Hangul fillers, interlinear annotations, the bidirectional controls, and
stacks of combining marks thousands high. A model reads them all; a person reviewing
what it read sees nothing. The stored state keeps the original text: only what is
handed to a reader is cleaned, and an item whose text carried any says so.

Two that emoji need stay where they serve one: the zero-width joiner and variation
selector 16 right after a pictograph (family and profession emoji, the emoji form of
a symbol).
"""

from __future__ import annotations

import re
from typing import Any

# Pictographs, which emoji sequences join: a zero-width joiner between two, and
# variation selector 16 after one (the emoji form), render as one picture.
_PICTOGRAPHS = "\u00a9\u00ae\u203c\u2049\u2122-\u2bff\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
_EMOJI = f"[{_PICTOGRAPHS}]\ufe0f?(?:\u200d[{_PICTOGRAPHS}]\ufe0f?)*"
# Unicode's default-ignorable characters, as a regex class: soft hyphen, combining
# grapheme joiner, Arabic letter mark, Hangul fillers, Khmer inherent vowels, Mongolian
# selectors, zero-width space, non-joiner and joiner, bidirectional marks and controls,
# word joiner and invisible operators, variation selectors, the byte order mark, tags.
# Redaction drops them before it matches a token (state/secret_text.py).
IGNORABLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff"
)
# Characters that render as nothing: those, the line and paragraph separators,
# interlinear annotations, shorthand format controls and musical formatting; and
# combining marks past the third on one character (a stack no text needs).
_NOTHING = IGNORABLE + "\u2028\u2029\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
HIDDEN = re.compile(f"({_EMOJI})|[{_NOTHING}]+|(?<=[{_MARKS}]{{3}})[{_MARKS}]+")


def _hiding(text: str, shown: Any) -> tuple[str, int]:
    """`text` with each run of hidden characters replaced by `shown(run)`, and how many
    there were; emoji sequences stay as they are."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(1):
            return match.group(1)
        count += len(match.group(0))
        return shown(match.group(0))

    return HIDDEN.sub(replace, text), count


def hidden(text: str) -> int:
    """How many characters of `text` render as nothing."""
    return 0 if text.isascii() else _hiding(text, lambda run: "")[1]


def removed(text: str) -> tuple[str, int]:
    """`text` without the characters that render as nothing, and how many there were."""
    return (text, 0) if text.isascii() else _hiding(text, lambda run: "")


def shown(text: str) -> str:
    """`text` with each character that renders as nothing written as an escape, in the
    form JSON uses (`\\u200b`; beyond U+FFFF its two UTF-16 halves, `\\udb40\\udc41`), so
    a person sees that it is there and JSON text stays JSON."""
    if text.isascii():
        return text
    return _hiding(text, lambda run: "".join(_escape(c) for c in run))[0]


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


MARK = "hidden_characters"  # the key that says how many an answer's item carried


def cleaned(value: Any) -> Any:
    """`value` (an answer: mappings, lists, texts) with every text's hidden characters
    removed; each mapping whose texts (or lists of texts) carried any counts them under
    `MARK`, so the item they came from says so."""
    return _cleaned(value)[0]


def _cleaned(value: Any) -> tuple[Any, int]:
    """`value` cleaned, and the hidden characters found in it that no mapping inside it
    has counted yet."""
    if isinstance(value, str):
        return removed(value)
    if isinstance(value, list):
        shaped, count = [], 0
        for inner in value:
            kept, found = _cleaned(inner)
            shaped.append(kept)
            count += found
        return shaped, count
    if isinstance(value, dict):
        mapping, count = {}, 0
        for name, inner in value.items():
            kept, found = _cleaned(inner)
            key, in_name = removed(name) if isinstance(name, str) else (name, 0)
            mapping[key] = kept
            count += found + in_name
        if count:
            mapping[MARK] = mapping.get(MARK, 0) + count
        return mapping, 0
    return value, 0
