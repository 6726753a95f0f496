"""Values from GitHub written as cells of a table a person opens elsewhere: data, never
instructions. Every door that writes such a table (`sql --format csv` and `markdown`,
the HTML report) writes its cells through here.

- A CSV cell that begins like a formula (`=`, `+`, `-`, `@`, tab or carriage return, or
  their full-width forms, which some spreadsheets read alike) is written after a single
  quote, as OWASP's "CSV Injection" page recommends: `=HYPERLINK(...)` in a title stays
  text when the file is opened in a spreadsheet. Numbers are written as they are.
- A Markdown cell has its pipes and brackets escaped and its line breaks made spaces,
  so a value cannot add cells or rows, nor become an image (a tracking pixel wherever
  the table is pasted) or a link; `<` and `>` are written as entities, so neither can
  raw HTML.
"""

from __future__ import annotations

import re

# What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_MARKDOWN = re.compile(r"[\\|\[\]<>]|\r\n|[\r\n]")
_MARKDOWN_AS = {"<": "&lt;", ">": "&gt;", "\r\n": " ", "\r": " ", "\n": " "}


def csv_cell(value: object) -> object:
    """`value` as a CSV cell a spreadsheet shows as text: a text beginning like a
    formula gets a leading `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def markdown_cell(text: str) -> str:
    """`text` as the content of one Markdown table cell, on one line, inert."""
    return _MARKDOWN.sub(lambda m: _MARKDOWN_AS.get(m.group(0), "\\" + m.group(0)), text)
