"""GitHub's rate limits: what its answers say about them (headers, `rateLimit`,
Retry-After), and the client's waits for a reset or a secondary limit's pause, each
bounded by `max_wait`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import requests

from ghindex.errors import RateLimited
from ghindex.progress import Progress, duration

log = logging.getLogger(__name__)

# Waits past a reset time by this much: GitHub's clock and ours disagree a little.
RESET_MARGIN = 1.0
# Without Retry-After, GitHub asks to wait at least a minute after a secondary limit.
SECONDARY_WAIT = 60.0
# Rate-limit waits per query before giving up: after waiting out a reset, GitHub
# should answer; if it still does not, something is off and a later run is better.
RATE_LIMIT_WAITS = 3
# GitHub's numbers are read as hostile: past these they are clamped, with a warning.
# No wait it asks for (Retry-After, a reset time) is longer than a day; no query costs
# more than 5,000 points (a query over 500,000 nodes is refused before it runs, and
# costs one point per 100 nodes); no budget holds more than MOST_POINTS.
MOST_WAIT = 24 * 3600.0
MOST_COST = 5_000
MOST_POINTS = 10_000_000


class RateLimit(Exception):
    """GitHub asked us to slow down: wait `retry_after`, or until `reset`, then retry."""

    def __init__(self, retry_after: float | None = None, reset: float | None = None) -> None:
        super().__init__("rate limited")
        self.retry_after = retry_after
        self.reset = reset  # epoch seconds


class RateLimitBudget:
    """The rate-limit half of `GraphQLClient`: what GitHub last said about the budget,
    and waiting for it. The client sets these attributes in its `__init__`."""

    max_wait: float
    remaining: int | None
    last_rate_limit: dict[str, Any] | None
    cost: int
    waited_seconds: float
    progress: Progress  # where a wait shows while it lasts
    _reset: float | None
    _costs: dict[str, int]
    _sleep: Callable[[float], None]
    _clock: Callable[[], float]

    def _note_headers(self, headers: Any) -> None:
        remaining = _int_or_none(headers.get("X-RateLimit-Remaining"))
        reset = reset_time(
            _int_or_none(headers.get("X-RateLimit-Reset")), "X-RateLimit-Reset", self._clock()
        )
        if remaining is not None:
            self.remaining = _count(remaining, MOST_POINTS, "X-RateLimit-Remaining")
        if reset is not None:
            self._reset = reset

    def _note_rate_limit(self, name: str, rate_limit: Any) -> None:
        if not isinstance(rate_limit, dict):
            return  # GitHub Enterprise Server without rate limiting answers null
        rate_limit = dict(rate_limit)
        cost = rate_limit.get("cost")
        if type(cost) is int:
            cost = rate_limit["cost"] = _count(cost, MOST_COST, "rateLimit.cost")
            self.cost += cost
            self._costs[name] = cost
        if type(rate_limit.get("remaining")) is int:
            remaining = _count(rate_limit["remaining"], MOST_POINTS, "rateLimit.remaining")
            self.remaining = rate_limit["remaining"] = remaining
        reset = reset_time(
            _parse_time(rate_limit.get("resetAt")), "rateLimit.resetAt", self._clock()
        )
        if reset is not None:
            self._reset = reset
        self.last_rate_limit = rate_limit

    def _mind_budget(self, name: str) -> None:
        """Wait for the reset first when the points left would not cover query `name`."""
        if self.remaining is None or self._reset is None:
            return
        if self.remaining >= self._costs.get(name, 1):
            return
        if self._reset + RESET_MARGIN > self._clock():
            self._wait_for_reset(self._reset)
        self.remaining = None  # unknown until GitHub says again

    def _wait_out(self, limit: RateLimit, waits: int) -> None:
        if limit.retry_after is None and limit.reset is not None:
            self._wait_for_reset(limit.reset, at_least=RESET_MARGIN)
            self.remaining = None
            return
        seconds = limit.retry_after
        if seconds is None:
            seconds = SECONDARY_WAIT * 2 ** (waits - 1)
        if seconds > self.max_wait:
            raise RateLimited(
                f"GitHub's secondary rate limit asks for a pause of {duration(seconds)} "
                f"(more than --max-wait {self.max_wait:g}s): progress is saved; "
                "run again in a few minutes"
            )
        log.warning("secondary rate limit: waiting %s before retrying", duration(seconds))
        with self.progress.task("secondary rate limit", verb=f"pausing {duration(seconds)}"):
            self._pause(seconds)

    def _wait_for_reset(self, reset: float, at_least: float = 0.0) -> None:
        seconds = max(reset + RESET_MARGIN - self._clock(), at_least)
        until = time.strftime("%H:%M:%S", time.gmtime(reset))
        if seconds > self.max_wait:
            raise RateLimited(
                f"GitHub's rate limit is exhausted until {until} UTC (waiting would exceed "
                f"--max-wait {self.max_wait:g}s): progress is saved; run again after the reset"
            )
        log.warning(
            "rate limit: %d points left, waiting %s until %s UTC",
            self.remaining or 0,
            duration(seconds),
            until,
        )
        waiting = f"waiting {duration(seconds)} until the reset at {until} UTC"
        with self.progress.task("rate limit", verb=waiting):
            self._pause(seconds)

    def _pause(self, seconds: float) -> None:
        self._sleep(seconds)
        self.waited_seconds += seconds


def rate_limit_of(
    response: requests.Response, known_reset: float | None, now: float
) -> RateLimit | None:
    """The rate limit a 403/429 reports, or None when it is a plain refusal.

    GitHub's advice, in order: obey Retry-After; with no points left wait for
    X-RateLimit-Reset; otherwise (a secondary limit) wait at least a minute.
    """
    retry_after = retry_after_header(response)
    if retry_after is not None:
        return RateLimit(retry_after=retry_after)
    text = response.text.lower()
    primary = response.headers.get("X-RateLimit-Remaining") == "0" or any(
        marker in text for marker in ("rate_limited", "api rate limit exceeded")
    )
    if primary:
        return RateLimit(reset=reset_header(response, now) or known_reset)
    if response.status_code == 429 or "secondary rate limit" in text:
        return RateLimit()
    return None


def retry_after_header(response: requests.Response) -> float | None:
    """Retry-After in seconds (a number, or an HTTP date), 0 to MOST_WAIT: a value past
    that (`inf`, `1e400`, a date in year 9999) is clamped with a warning, one that is no
    number (`nan`) is ignored with one."""
    value = (response.headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    if math.isnan(seconds):
        log.warning("GitHub sent Retry-After: %s, which is no wait: ignored", value[:40])
        return None
    if seconds > MOST_WAIT:
        log.warning("GitHub sent Retry-After: %s, more than a day: taken as a day", value[:40])
        return MOST_WAIT
    return max(0.0, seconds)


def reset_header(response: requests.Response, now: float) -> float | None:
    """X-RateLimit-Reset (epoch seconds), kept in range (`reset_time`)."""
    reset = _int_or_none(response.headers.get("X-RateLimit-Reset"))
    return reset_time(reset, "X-RateLimit-Reset", now)


def reset_time(epoch: float | None, source: str, now: float) -> float | None:
    """A reset time (epoch seconds) GitHub sent, clamped to between the epoch and a day
    after `now`, with a warning when it was further."""
    if epoch is None:
        return None
    latest = now + MOST_WAIT
    if not 0 <= epoch <= latest:
        log.warning("GitHub sent a %s of %s, out of range: clamped", source, _shown(epoch))
        return float(min(max(epoch, 0), latest))
    return float(epoch)


def _count(value: int, most: int, source: str) -> int:
    """A count GitHub sent (points, a cost), clamped to 0..`most` with a warning."""
    kept = min(max(value, 0), most)
    if kept != value:
        log.warning(
            "GitHub sent a %s of %s, out of range: taken as %d", source, _shown(value), kept
        )
    return kept


def _shown(number: float) -> str:
    """A number for a message, however long."""
    text = str(number)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    except (ValueError, OverflowError):
        return None


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
