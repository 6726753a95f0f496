"""GitHub's time format, both ways: what the state stores and what every door prints."""

from __future__ import annotations

from datetime import UTC, datetime


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
