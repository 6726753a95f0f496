"""GitHub's time format, both ways: what the state stores and what every door prints."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from ghindex.errors import GhindexError


def github_time(value: str) -> datetime:
    """A GitHub DateTime ('2015-03-01T12:00:00Z') as an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def readable_time(value: object) -> datetime | None:
    """A GitHub DateTime as `github_time` reads it, or None when it is not one (GitHub's
    answers are read as hostile: a malformed time must not stop a repository)."""
    if not isinstance(value, str):
        return None
    try:
        moment = github_time(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def iso_time(value: datetime | None) -> str | None:
    """The other way: a UTC time as GitHub writes it, 'Z' for '+00:00'."""
    if value is None:
        return None
    if value.tzinfo is not None:  # a connection in another time zone gives local times
        value = value.astimezone(UTC)
    return value.isoformat().replace("+00:00", "Z")


# An ISO 8601 date, or a date and time with an optional zone, in ASCII digits: what every
# door takes for `since` and `until`. A bare number is not one (it is no Unix time here).
_ISO_MOMENT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?"
)
ISO_EXAMPLE = "2024-05-01 or 2024-05-01T12:00:00Z"


def iso_moment(value: object, name: str = "date") -> date | datetime:
    """`value` as a date or a time: a `date` or `datetime` as it is, or a string in ISO
    8601 form (`ISO_EXAMPLE`). Anything else (a number, a boolean, a bare year, digits
    that are not ASCII) is refused in one line naming `name`."""
    if isinstance(value, date):  # a datetime is a date too
        return value
    text = value.strip() if isinstance(value, str) else None
    if text is None or not _ISO_MOMENT.fullmatch(text):
        shown = repr(value)[:40]
        raise GhindexError(f"{name} must be an ISO date or time ({ISO_EXAMPLE}), not {shown}")
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise GhindexError(f"{name}: {text!r} is not a real date or time ({exc})") from None
