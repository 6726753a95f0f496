"""Expected failures. Each message says what was wrong and what to do about it.

The CLI prints these as one line and exits 1; anything else is a bug and gets a
traceback only with --debug.
"""


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
