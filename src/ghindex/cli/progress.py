"""Progress for people, on stderr only: stdout carries the command's data.

In a terminal, each open task is a live bar (rich, imported only then) and notes are
dim lines above it (made `visible`: a task or note may name a repository or an item).
Elsewhere (CI logs, a pipe), and with `--json`, no bar: one plain
status line every GHINDEX_PROGRESS_SECONDS (default 10), so that a log shows the run
is alive, e.g. `build: 1,200 / 5,686 rows embedded, 41 rows/s, about 1m 50s left`.
A command that ends sooner prints none. GHINDEX_PROGRESS_SECONDS=0 prints a line at
every step; `off` shows no progress at all.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import click

from ghindex.cli.terminal import visible
from ghindex.config import env
from ghindex.progress import RATE_AFTER, Progress, Task, duration

ENV = "GHINDEX_PROGRESS_SECONDS"


def on_stderr(live: bool = True) -> Progress:
    """The command's progress: live bars when `live` and stderr is a terminal, else
    status lines; closed with the command."""
    every = seconds_between_lines()
    if every is None:
        return Progress()
    shown: Bars | StatusLines = Bars() if live and sys.stderr.isatty() else StatusLines(every)
    context = click.get_current_context(silent=True)
    if context is not None:
        context.call_on_close(shown.close)
    return shown


def seconds_between_lines() -> float | None:
    """GHINDEX_PROGRESS_SECONDS: seconds (10 by default), or None for `off`."""
    return env(ENV)


class StatusLines(Progress):
    """A plain line on stderr every `every` seconds while the command runs: the open
    tasks (outermost first), else the last note. With `every` 0, a line at every step
    and every note instead. A task shown while open gets a last line when it closes."""

    def __init__(
        self,
        every: float,
        *,
        write: Callable[[str], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(clock=clock)
        self.every = every
        self._write = write or _to_stderr
        self._open: list[Task] = []
        self._shown: set[int] = set()  # ids of open tasks some line has shown
        self._note: tuple[str, float] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = None
        if every > 0:
            self._ticker = threading.Thread(target=self._tick, name="ghindex-progress", daemon=True)
            self._ticker.start()

    def opened(self, task: Task) -> None:
        with self._lock:
            self._open.append(task)
        self._step()

    def changed(self, task: Task) -> None:
        self._step()

    def closed(self, task: Task) -> None:
        with self._lock:
            if task in self._open:
                self._open.remove(task)
            if id(task) in self._shown and self.every > 0:
                self._write(task.line())
            self._shown.discard(id(task))

    def note(self, text: str) -> None:
        with self._lock:
            self._note = (text, self.clock())
            if self.every == 0:
                self._write(text)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()

    def status(self) -> str | None:
        """What runs now: the open tasks, else the last note (with its time, once long)."""
        now = self.clock()
        if self._open:
            return "; ".join(task.line(now) for task in self._open)
        if self._note is None:
            return None
        text, since = self._note
        return f"{text}, {duration(now - since)} so far" if now - since >= RATE_AFTER else text

    def _step(self) -> None:
        if self.every == 0:
            self._print()

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            self._print()

    def _print(self) -> None:
        with self._lock:
            line = self.status()
            if line is not None:
                self._shown.update(id(task) for task in self._open)
                self._write(line)


class Bars(Progress):
    """A live rich bar per open task, on stderr, while any is open; notes print above."""

    def __init__(self, console: Any = None) -> None:
        super().__init__()
        self._console = console
        self._bars: Any = None  # rich.progress.Progress while a task is open
        self._rows: dict[int, Any] = {}  # id of a task -> its row
        self._lock = threading.Lock()

    def opened(self, task: Task) -> None:
        with self._lock:
            if self._bars is None:
                self._bars = _live_bars(self.console())
                self._bars.start()
            self._rows[id(task)] = self._bars.add_task(task.name, total=task.total, task=task)

    def changed(self, task: Task) -> None:
        with self._lock:
            if id(task) in self._rows:
                self._bars.update(self._rows[id(task)], completed=task.done, total=task.total)

    def closed(self, task: Task) -> None:
        with self._lock:
            row = self._rows.pop(id(task), None)
            if row is not None:
                self._bars.remove_task(row)
            if not self._rows:
                self._stop()

    def note(self, text: str) -> None:
        with self._lock:
            if self._bars is not None:
                self._bars.refresh()  # the bars drawn again under the note are current
        self.console().print(f"… {visible(text)}", style="dim", highlight=False, markup=False)

    def close(self) -> None:
        with self._lock:
            self._rows.clear()
            self._stop()

    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True)
        return self._console

    def _stop(self) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None


def _live_bars(console: Any) -> Any:
    """A rich Progress whose rows read as the status lines do (`Task.line`)."""
    from rich.progress import BarColumn, ProgressColumn, SpinnerColumn
    from rich.progress import Progress as RichProgress
    from rich.table import Column
    from rich.text import Text

    class Line(ProgressColumn):
        def render(self, row: Any) -> Text:
            return Text(visible(row.fields["task"].line()))

    return RichProgress(
        SpinnerColumn(),
        BarColumn(bar_width=20),
        Line(table_column=Column(no_wrap=True, overflow="ellipsis")),  # one row per task
        console=console,
        transient=True,
        redirect_stdout=False,  # stdout is data: never routed through the bar's console
    )


def _to_stderr(line: str) -> None:
    print(visible(line), file=sys.stderr, flush=True)
