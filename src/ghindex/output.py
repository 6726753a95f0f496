"""What commands print: JSON documents on stdout, readable text, progress on stderr."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from ghindex.search import SearchResponse


class _StderrHandler(logging.StreamHandler):
    """Log lines to whatever sys.stderr is when they are written (click's test
    runner swaps it), one line each."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def configure_logging(debug: bool) -> None:
    """ghindex's own messages (rate-limit waits, retries) go to stderr."""
    logger = logging.getLogger("ghindex")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    logger.propagate = False


def emit_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False, default=str))


def progress(enabled: bool = True) -> Callable[[str], None] | None:
    """A one-line status on stderr, only when stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        return None
    from rich.console import Console

    console = Console(stderr=True)

    def say(message: str) -> None:
        console.print(f"[dim]… {message}[/dim]", highlight=False)

    return say


def search_text(response: SearchResponse) -> str:
    lines = []
    for unmatched in response.filters_unmatched:
        lines.append(f"note: no indexed item has {unmatched}")
    if not response.results:
        lines.append(f"no results for {response.query!r}")
    for rank, hit in enumerate(response.results, 1):
        state = f", {hit.state}" if hit.state else ""
        labels = f"  [{', '.join(hit.labels)}]" if hit.labels else ""
        lines.append(f"{rank:2}. {hit.handle}  ({hit.type}{state})  {hit.title}{labels}")
        ranks = ", ".join(
            f"{name} #{value}"
            for name, value in (("dense", hit.dense_rank), ("sparse", hit.sparse_rank))
            if value is not None
        )
        lines.append(f"    {hit.url}  score {hit.score:.4f} ({ranks})")
        if hit.snippet:
            lines.append(f"    {hit.snippet}")
    return "\n".join(lines)
