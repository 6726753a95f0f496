"""Git sources: a local checkout's docs and commits, and a wiki clone's pages.

`sync_git` and `sync_wiki` read git objects (never the work tree) and bring the
`docs`, `commits` and `commit_files` tables of the state database up to date,
incrementally from the commit stored in `sync_state`. See docs/git-sources.md.
"""

from ghindex.gitsource.remote import RemoteRepo, parse_remote_url, repo_from_remote
from ghindex.gitsource.repo import GitSourceError
from ghindex.gitsource.sync import DEFAULT_WEB_URL, GitReport, sync_git, sync_wiki

__all__ = [
    "DEFAULT_WEB_URL",
    "GitReport",
    "GitSourceError",
    "RemoteRepo",
    "parse_remote_url",
    "repo_from_remote",
    "sync_git",
    "sync_wiki",
]
