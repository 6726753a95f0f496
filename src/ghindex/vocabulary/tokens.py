"""What a text costs a language model's context, in tokens, estimated without a model:
the one estimate every answer is sized by (the MCP answer budget, `context`'s packs,
the characters a budget allows).

It is meant to be conservative for every script, so an answer sized by it fits the
reader's budget: a word (lower case, or capitalised) costs a token for every five
letters; any other run of letters and digits (numbers, hashes, base64, identifiers,
capitals) a token a character; each ASCII mark one, a line break with its indent one;
a character outside ASCII costs one and a half (CJK, Greek, Cyrillic, Arabic ...) or
three (the others: Hangul, Indic scripts, emoji). bench/README.md ("Token estimate")
measures it against real tokenizers, script by script.
"""

from __future__ import annotations

import re

_ALNUM = re.compile(r"[A-Za-z0-9]+")
_MARKS = re.compile(r"[\x00-\x08\x0e-\x1f\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]")
_BREAKS = re.compile(r"\s*\n[ \t]*|[ \t]{2,}")
# Characters outside ASCII: two-byte ones (Greek, Cyrillic, Arabic, Hebrew ...), CJK
# ideographs and kana cost one and a half tokens; the other three-byte characters
# (Hangul syllables, which a tokenizer may split into their letters; Indic scripts) and
# the four-byte ones (emoji, rare ideographs) three, a token per byte, as a byte-level
# tokenizer spends at the most.
_WIDE = re.compile(r"[\x80-\u07ff\u3040-\u30ff\u4e00-\u9fff]")
_OUTSIDE = re.compile(r"[^\x00-\x7f]")

# Characters per token a budget in tokens allows at most (an English text of words
# costs about one token per four characters, so four is the most a budget can hold).
CHARS_PER_TOKEN = 4


def estimate(text: str) -> int:
    """Tokens `text` costs a language model, never fewer than its tokenizer counts on
    real text of any script (see the module's docstring)."""
    count = 0
    for run in _ALNUM.findall(text):
        if run.isalpha() and (run.islower() or run.istitle()):  # a word
            count += 1 + len(run) // 5
        else:  # digits, capitals, or both among letters: numbers, hashes, base64, names
            count += len(run)
    count += len(_MARKS.findall(text))
    count += sum(1 + len(gap) // 16 for gap in _BREAKS.findall(text))
    if not text.isascii():
        wide = len(_OUTSIDE.findall(text))
        lighter = len(_WIDE.findall(text))
        count += 3 * (wide - lighter) + (3 * lighter + 1) // 2
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
