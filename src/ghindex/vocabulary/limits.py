"""How big a request may be: the bounds every door (CLI, MCP, Python) checks before any
work starts, each defined once here and quoted in the refusal.

A refusal is one line naming the argument, its limit and what to do:
`search: query is 2,700,000 characters, over the limit of 4,000: shorten it`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ghindex.errors import GhindexError

QUERY_CHARS = 4_000  # a search query or a context question
SQL_CHARS = 20_000  # one SQL statement
HANDLE_CHARS = 1_000  # a handle (a doc's path can be long, not longer)
VALUE_CHARS = 300  # a filter value: a repository, label, login, milestone, path
VALUES = 20  # values of one filter (labels, repos, authors, ...)
HANDLES = 50  # handles of one fetch
MAX_NUMBER = 2**31 - 1  # GitHub's issue numbers and database ids are 32-bit
MAX_OFFSET = 100_000  # where a continued answer starts


def check_text(where: str, name: str, value: str | None, limit: int) -> None:
    """Refuse `value` longer than `limit` characters."""
    if value is not None and len(value) > limit:
        raise GhindexError(
            f"{where}: {name} is {len(value):,} characters, over the limit of {limit:,}: shorten it"
        )


def check_values(where: str, name: str, values: Sequence[str], limit: int = VALUES) -> None:
    """Refuse more than `limit` values, or a value longer than `VALUE_CHARS`."""
    if len(values) > limit:
        raise GhindexError(
            f"{where}: {name} has {len(values):,} values, over the limit of {limit}: "
            "give fewer (several values of one filter rarely narrow anything)"
        )
    for value in values:
        check_text(where, f"a value of {name}", str(value), VALUE_CHARS)


def check_handles(where: str, handles: Sequence[str], limit: int = HANDLES) -> None:
    """Refuse more than `limit` handles, or one longer than `HANDLE_CHARS`."""
    if len(handles) > limit:
        raise GhindexError(
            f"{where}: {len(handles):,} handles, over the limit of {limit}: fetch them in parts"
        )
    for handle in handles:
        check_text(where, "a handle", handle, HANDLE_CHARS)


def check_flag(where: str, name: str, value: object) -> None:
    """Refuse a flag that is not `True` or `False`: "true", 1 or "no" are not flags."""
    if not isinstance(value, bool):
        raise GhindexError(f"{where}: {name} must be true or false, not {value!r:.40}")


def is_number(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits (0-9), the only digits a number
    is written in here: `str.isdigit` is true of '²' and '①' too, which `int` refuses,
    and `int` reads the Arabic-Indic '١٢' as 12, which no handle or setting means."""
    return text.isascii() and text.isdecimal()


def number_or_none(text: str) -> int | None:
    """`text` as an issue number or database id, or None when no item can have it."""
    if not is_number(text) or len(text) > 10:
        return None
    number = int(text)
    return number if number <= MAX_NUMBER else None
