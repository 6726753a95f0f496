"""What a text costs a language model's context, in tokens, estimated without a model:
the one estimate every answer is sized by (the MCP answer budget, `context`'s packs,
the characters a budget allows).

It is meant to be conservative for every script, so an answer sized by it fits the
reader's budget: a run of letters costs a token for every five, one mixing letters and
digits (hashes, base64, identifiers) three for every four characters, digits one per
three, each ASCII mark one, a line break with its indent one; a character outside ASCII
costs one and a half (CJK, Greek, Cyrillic, Arabic ...) or two (other three-byte
characters, such as Hangul) or three (four-byte ones: emoji and rarer ideographs).
bench/README.md ("Token estimate") measures it against real tokenizers, script by
script.
"""

from __future__ import annotations

import re

_ALNUM = re.compile(r"[A-Za-z0-9]+")
_MARKS = re.compile(r"[\x00-\x08\x0e-\x1f\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]")
_BREAKS = re.compile(r"\s*\n[ \t]*|[ \t]{2,}")
# half-tokens: 3 for two-byte characters and CJK ideographs and kana, 4 for the other
# three-byte characters, 6 for those beyond the Basic Multilingual Plane
_WIDE = re.compile(r"[\x80-\u07ff\u3040-\u30ff\u4e00-\u9fff]|([\u0800-\uffff])|([^\x00-\uffff])")

# Characters per token a budget in tokens allows at most (an English text of words
# costs about one token per four characters, so four is the most a budget can hold).
CHARS_PER_TOKEN = 4


def estimate(text: str) -> int:
    """Tokens `text` costs a language model, never fewer than its tokenizer counts on
    real text of any script (see the module's docstring)."""
    count = 0
    for run in _ALNUM.findall(text):
        if run.isalpha():
            count += 1 + len(run) // 5
        elif run.isdigit():
            count += (len(run) + 2) // 3
        else:
            count += (3 * len(run) + 3) // 4
    count += len(_MARKS.findall(text))
    count += sum(1 + len(gap) // 16 for gap in _BREAKS.findall(text))
    if not text.isascii():
        halves = 0
        for wide in _WIDE.finditer(text):
            halves += 6 if wide.group(2) else 4 if wide.group(1) else 3
        count += (halves + 1) // 2
    return count


def most_chars(tokens: int) -> int:
    """The most characters a text of `tokens` tokens can have: where a budget in tokens
    is spent as characters (a cut text, a byte limit), spend no more than this."""
    return tokens * CHARS_PER_TOKEN


def within(text: str, limit: int) -> str:
    """The longest start of `text` that costs at most `limit` tokens (found by halving:
    how many characters a token holds depends on the script)."""
    if estimate(text) <= limit:
        return text
    low, high = 0, min(len(text), most_chars(limit))
    while low < high:
        middle = (low + high + 1) // 2
        if estimate(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]
