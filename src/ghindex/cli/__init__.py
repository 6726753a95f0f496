"""The `ghindex` command line: parse, call one library function, print.

stdout carries results (a JSON document with --json); talk goes to stderr.
Exit codes: 0 success, 1 failure (one line, no traceback unless --debug),
2 usage error, 3 a build stopped by --stop-after with work left (run it again).
One module per group of commands; importing them registers them.
"""

import contextlib
import logging
import os
import signal
import sys
import traceback

from ghindex.index import deferred

# Before anything imports LanceDB: the command line's (and its MCP server's) process
# starts fast and quiet; a program importing ghindex as a library is left as it is.
deferred.cli_process()

from ghindex.cli import analysis, ingest, query, serving, snapshots  # noqa: E402, F401  (registers)
from ghindex.cli.base import INTERRUPTED, TERMINATED, cli, terminated  # noqa: E402
from ghindex.cli.terminal import visible  # noqa: E402

__all__ = ["cli", "main"]

#: Commands that write nothing but their output. Once it is flushed, their process ends
#: without the interpreter's teardown: freeing LanceDB's and pydantic's many objects
#: one by one takes ~0.3 s of a cold `search` here, for memory the OS takes back at once.
QUICK_EXIT = frozenset({"search", "context", "related", "show", "sql", "status"})


def main() -> None:
    deferred.no_pandas_probe()  # the CLI never hands pandas objects to pyarrow
    sys.excepthook = _shown_traceback  # --debug: a traceback quotes data too
    signal.signal(signal.SIGTERM, terminated)  # ends a command as Ctrl-C does
    try:
        cli(prog_name="ghindex")
    except SystemExit as done:
        # A stopped command has cleaned up on its way out; its process ends now, not
        # after the interpreter joins threads still blocked in a read or a native call.
        if getattr(cli, "invoked", None) in QUICK_EXIT or done.code in (INTERRUPTED, TERMINATED):
            leave(done.code)
        raise
    except KeyboardInterrupt:  # a second Ctrl-C while the first was being handled
        leave(INTERRUPTED)


def leave(code: object) -> None:
    """End now with `code` (as `sys.exit` takes it), after flushing what was written."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): the message to stderr, status 1
        print(visible(str(code)), file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`| head`)
            stream.flush()
    logging.shutdown()
    os._exit(status)


def _shown_traceback(kind: type[BaseException], exc: BaseException, tb) -> None:
    """An uncaught exception's traceback (with --debug), made terminal-safe: its message
    may quote a title, a body or what was typed."""
    sys.stderr.write(visible("".join(traceback.format_exception(kind, exc, tb))))
    sys.stderr.flush()
