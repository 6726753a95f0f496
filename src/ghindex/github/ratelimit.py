"""GitHub's rate limits: what its answers say about them (headers, `rateLimit`,
Retry-After), and the client's waits for a reset or a secondary limit's pause, each
bounded by `max_wait`.
"""

from __future__ import annotations

import logging
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
        reset = _int_or_none(headers.get("X-RateLimit-Reset"))
        if remaining is not None:
            self.remaining = remaining
        if reset is not None:
            self._reset = float(reset)

    def _note_rate_limit(self, name: str, rate_limit: Any) -> None:
        if not isinstance(rate_limit, dict):
            return  # GitHub Enterprise Server without rate limiting answers null
        self.last_rate_limit = rate_limit
        cost = rate_limit.get("cost")
        if isinstance(cost, int):
            self.cost += cost
            self._costs[name] = cost
        if isinstance(rate_limit.get("remaining"), int):
            self.remaining = rate_limit["remaining"]
        reset = _parse_time(rate_limit.get("resetAt"))
        if reset is not None:
            self._reset = reset

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


def rate_limit_of(response: requests.Response, known_reset: float | None) -> RateLimit | None:
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
        return RateLimit(reset=reset_header(response) or known_reset)
    if response.status_code == 429 or "secondary rate limit" in text:
        return RateLimit()
    return None


def retry_after_header(response: requests.Response) -> float | None:
    value = (response.headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def reset_header(response: requests.Response) -> float | None:
    reset = _int_or_none(response.headers.get("X-RateLimit-Reset"))
    return float(reset) if reset is not None else None


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
