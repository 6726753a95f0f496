"""How a long step says how far it got: `Progress`, handed down as `progress=`.

A library call that can take minutes (fetch, build, merge, publish, pull) opens a
`Task` for each long step and counts what it has done, of a total when one is known:
rows embedded, bytes uploaded, issues stored. Passing remarks ("loading model …") are
`note`s. This base class keeps the counts and shows nothing (a `say` function given to
it receives the notes), so library callers and tests pay nothing. The CLI shows them
on stderr (`cli/progress.py`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

BYTES = "bytes"  # the unit whose amounts read as kB, MB, GB
RATE_AFTER = 1.0  # seconds a task runs before its rate (and time left) is shown


class Task:
    """One long step: `done` of `total` (None while unknown) `unit`s, e.g. rows
    `verb` "embedded"; `detail` says more ("3 pages"); a step without a unit counts
    nothing (a wait). Open it with `Progress.task`, as a context manager, so that it
    closes however the step ends."""

    def __init__(
        self, owner: Progress, name: str, total: float | None, unit: str | None, verb: str
    ):
        self.name = name
        self.total = total
        self.unit = unit
        self.verb = verb
        self.done: float = 0
        self.detail = ""
        self.started = owner.clock()
        self.closed = False
        self._owner = owner

    def advance(self, n: float = 1, *, detail: str | None = None) -> None:
        self.done += n
        if detail is not None:
            self.detail = detail
        self._owner.changed(self)

    def set_total(self, total: float | None) -> None:
        """What the step turned out to hold (known late, or less to do than thought)."""
        self.total = total
        self._owner.changed(self)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._owner.closed(self)

    def __enter__(self) -> Task:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def line(self, now: float | None = None) -> str:
        """`build: 1,200 / 5,686 rows embedded, 41 rows/s, about 1m 50s left`, or, for a
        step that counts nothing, `rate limit: waiting until 14:05:00 UTC, 2m 10s so far`."""
        elapsed = max((self._owner.clock() if now is None else now) - self.started, 0.0)
        detail = f" ({self.detail})" if self.detail else ""
        if self.unit is None:
            return f"{self.name}: {self.verb or 'working'}{detail}, {duration(elapsed)} so far"
        counted = _amount(self.done, self.unit)
        if self.total is not None:
            counted += f" / {_amount(self.total, self.unit)}"
        if self.unit != BYTES:
            one = self.done == 1 and self.total is None and self.unit.endswith("s")
            counted += f" {self.unit[:-1] if one else self.unit}"
        parts = [f"{self.name}: {counted}{f' {self.verb}' if self.verb else ''}{detail}"]
        rate = self.done / elapsed if elapsed >= RATE_AFTER and self.done > 0 else 0.0
        if rate:
            per = f"{size_text(rate)}/s" if self.unit == BYTES else f"{_count(rate)} {self.unit}/s"
            parts.append(per)
            if self.total is not None and self.total > self.done:
                parts.append(f"about {duration((self.total - self.done) / rate)} left")
        return ", ".join(parts)


class Progress:
    """Counts every task and shows nothing; `say`, when given, receives the notes.
    A display subclasses it and overrides `opened`, `changed`, `closed` and `note`."""

    def __init__(
        self, say: Callable[[str], None] | None = None, *, clock: Callable[[], float] | None = None
    ) -> None:
        self._say = say
        self.clock = clock or time.monotonic

    def task(
        self, name: str, total: float | None = None, *, unit: str | None = None, verb: str = ""
    ) -> Task:
        """A step named `name` ("build", a repository) of `total` `unit`s ("rows",
        BYTES) to be `verb` ("embedded"); `total` None while unknown, `unit` None for
        a step that counts nothing."""
        task = Task(self, name, total, unit, verb)
        self.opened(task)
        return task

    def note(self, text: str) -> None:
        """A passing remark on what happens now; a display may leave it out."""
        if self._say is not None:
            self._say(text)

    def opened(self, task: Task) -> None:
        """A task began."""

    def changed(self, task: Task) -> None:
        """A task advanced, or learnt its total."""

    def closed(self, task: Task) -> None:
        """A task ended (finished or not)."""


def duration(seconds: float) -> str:
    """12m 30s, 1h 5m, 2s: whole seconds, rounded up."""
    total = math.ceil(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return " ".join(parts) or "0s"


def _amount(n: float, unit: str) -> str:
    return size_text(n) if unit == BYTES else _count(n)


def _count(n: float) -> str:
    """1,200; a rate under ten keeps one decimal (2.5)."""
    return f"{n:,.1f}" if n != int(n) and n < 10 else f"{round(n):,}"


def size_text(n: float) -> str:
    """512 bytes, 1.2 kB, 45.6 MB (powers of 1000, as disks and networks count)."""
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
