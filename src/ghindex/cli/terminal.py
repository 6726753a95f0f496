"""Text for a terminal: what the CLI prints for people never makes the terminal act.

Titles, bodies, comments, labels, logins, paths, SQL values and error messages come
from GitHub or from the person typing, and a terminal acts on some characters instead
of showing them: ESC starts OSC 52 clipboard writes, window titles, OSC 8 links,
screen clears and the alternate screen; backspace and carriage return overwrite what
was shown; bidirectional overrides reorder it; and some characters render as nothing at all
(tag characters, zero-width characters: `vocabulary/hidden.py`), hiding text from the
person reading. Every line for a person goes through `say` (or `visible`), which
writes those characters as escapes; tab and newline stay.
"""

from __future__ import annotations

import re

import click

from ghindex.vocabulary import hidden

# Characters a terminal acts on instead of showing: C0 controls but tab and newline
# (so also BEL, backspace, carriage return, ESC), DEL, the C1 controls (8-bit CSI, OSC
# and the rest), and the bidirectional marks, overrides and isolates that reorder text.
ACTIVE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with every character a terminal would act on, or that renders as
    nothing, written as an escape (`\\u001b` for ESC, `\\u200b`): the same form JSON
    uses, so JSON text stays JSON. A carriage return that ends a line (CRLF, as GitHub
    stores most bodies) is the line's end."""
    shown = ACTIVE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text.replace("\r\n", "\n"))
    return hidden.shown(shown)


def say(text: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print `text` for a person, on stdout (stderr with `err`), made `visible`."""
    click.echo(visible(str(text)), err=err, nl=nl)


def shown_safely(exc: click.ClickException) -> click.ClickException:
    """`exc` (any click failure: ours, a usage error quoting what was typed, a bad
    parameter) with its message made `visible` when click prints it to stderr."""
    if not getattr(exc, "_visible", False):
        message = exc.format_message
        exc.format_message = lambda: visible(message())  # type: ignore[method-assign]
        exc._visible = True  # type: ignore[attr-defined]
    return exc
