"""The `ghindex` command line: parse, call one library function, print.

stdout carries results (a JSON document with --json); talk goes to stderr.
Exit codes: 0 success, 1 failure (one line, no traceback unless --debug),
2 usage error. One module per group of commands; importing them registers them.
"""

from ghindex.cli import analysis, ingest, query, snapshots  # noqa: F401  (registers the commands)
from ghindex.cli.base import cli

__all__ = ["cli", "main"]


def main() -> None:
    cli(prog_name="ghindex")
