"""Expected failures. Each message says what was wrong and what to do about it.

The CLI prints these as one line and exits 1; anything else is a bug and gets a
traceback only with --debug.
"""

from __future__ import annotations

import errno
import re


class GhindexError(Exception):
    """A failure the user can act on."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (at most `limit` characters), or its
    type's name when it has none: the cause, for a one-line error of our own."""
    text = str(exc).strip()
    return text.splitlines()[0].strip()[:limit] if text else type(exc).__name__


class ConfigError(GhindexError):
    """Bad configuration: a flag, an environment variable or ghindex.toml."""


class GitHubError(GhindexError):
    """GitHub (or the configured GraphQL endpoint) refused or failed a request."""


class AnswerError(GitHubError):
    """GitHub ran a query and answered it with errors: a failure of what the query asked
    for (one repository's surface, one item), not of the token or the connection."""


class RepoNotFound(GitHubError):
    """The repository does not exist or the token cannot see it."""


class StateError(GhindexError):
    """The local state database is missing, locked or from a newer ghindex."""


class IndexUnusable(GhindexError):
    """The index is missing or was built in a way this command cannot use."""


class RateLimited(GitHubError):
    """GitHub's rate limit would need a longer wait than allowed; committed progress is kept."""


class GitSourceError(GhindexError):
    """git failed or a local repository cannot be indexed as it is."""


class RerankUnavailable(GhindexError):
    """The cross-encoder model for reranking cannot be loaded (offline, not cached, bad path)."""


class SnapshotError(GhindexError):
    """A snapshot or store is missing, incomplete, corrupt, or was changed concurrently."""


class ExportError(GhindexError):
    """An export's destination holds something an export would replace but did not write."""


# What the operating system says when a disk cannot take a write, in the words each
# library passes it on (Python's OSError, DuckDB's IOException, Lance's and obstore's
# Rust errors carry the same strerror text).
_DISK = (
    (errno.ENOSPC, "no space left on device", "no space left on the device"),
    (errno.EDQUOT, "disk quota exceeded", "the disk quota is used up"),
    (errno.EROFS, "read-only file system", "the file system is read-only"),
    (errno.EACCES, "permission denied", "permission denied"),
)
_PATH_IN_TEXT = re.compile(r"""["'`](/[^"'`\s]{1,300})["'`]|\s(/[^\s:"',)]{2,300})""")


def disk_problem(exc: BaseException, path: object = None) -> str | None:
    """One line for a write the disk refused (full, over quota, read-only, not
    permitted), naming where, or None for any other failure."""
    text = str(exc).lower()
    code = getattr(exc, "errno", None)
    for number, words, said in _DISK:
        if code == number or words in text:
            where = path or getattr(exc, "filename", None) or _path_in(str(exc))
            place = f" while writing {where}" if where else ""
            fix = "free some space (or point GHINDEX_WORKDIR elsewhere)"
            if number == errno.EACCES:
                fix = "give ghindex write access there"
            return f"{said}{place}: {fix} and run again; what was stored before is kept"
    return None


def _path_in(text: str) -> str | None:
    found = _PATH_IN_TEXT.search(text)
    return (found.group(1) or found.group(2)) if found else None
