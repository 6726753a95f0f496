"""Turning what a person types into the handle of an item in the state.

`resolve_handle` accepts every handle of the contract, and also:

- a comment, review or review comment (`owner/repo#12/comment/5`): its item, `owner/repo#12`;
- a commit by a prefix of its sha of at least 7 hex digits (`owner/repo@1a2b3c4`), when
  exactly one commit of the state or of the reference graph starts with it;
- one file's diff in a commit (`owner/repo@<sha>:path`): the commit;
- a handle spelt in another case than GitHub spells it (`Octo/Hello#1`), when only one
  item matches.

A handle is known when an entity table has it, or when the reference graph has a link
to or from it (an item of a repository that is not indexed, but linked from one that is).
"""

from __future__ import annotations

import duckdb

from ghindex.errors import GhindexError
from ghindex.vocabulary.handles import COMMIT_REF, FULL_COMMIT, commit_handle, parent_item

# Every handle an entity table or the graph holds (comments resolve to their item first).
KNOWN_SQL = """
SELECT handle FROM issues
UNION ALL SELECT handle FROM pull_requests
UNION ALL SELECT handle FROM discussions
UNION ALL SELECT handle FROM releases
UNION ALL SELECT handle FROM docs
UNION ALL SELECT handle FROM commits
UNION ALL SELECT src FROM edges
UNION ALL SELECT dst FROM edges
"""

HANDLE_FORMS = "owner/repo#123, owner/repo@sha, owner/repo:path"


class UnknownHandle(GhindexError):
    """The handle names nothing in the snapshot, or several commits at once."""


def resolve_handle(con: duckdb.DuckDBPyConnection, handle: str) -> str:
    """The handle of the item `handle` names, as the state spells it.

    Raises UnknownHandle when nothing matches, or when a sha prefix matches several commits.
    """
    text = handle.strip()
    wanted = parent_item(text)
    commit = COMMIT_REF.match(wanted)
    if commit:
        wanted = commit_handle(commit.group(1), commit.group(2).lower())
    if _exists(con, wanted):
        return wanted
    if commit and len(commit.group(2)) < 40:
        found, what = _commits_starting_with(con, wanted), "commits"
    else:
        sql = f"SELECT DISTINCT handle FROM ({KNOWN_SQL}) WHERE lower(handle) = ?"
        found, what = _column(con, sql, [wanted.lower()]), "handles"
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
        hint = "give more of the sha" if what == "commits" else "spell it as one of them"
        raise UnknownHandle(f"{text} matches {len(found)} {what} ({shown}): {hint}")
    raise UnknownHandle(f"no item {text} in the snapshot: check the handle ({HANDLE_FORMS})")


def _exists(con: duckdb.DuckDBPyConnection, handle: str) -> bool:
    sql = f"SELECT count(*) FROM ({KNOWN_SQL}) WHERE handle = ?"
    return con.execute(sql, [handle]).fetchall()[0][0] > 0


def _commits_starting_with(con: duckdb.DuckDBPyConnection, prefix: str) -> list[str]:
    sql = (
        f"SELECT DISTINCT handle FROM ({KNOWN_SQL}) "
        "WHERE starts_with(lower(handle), ?) AND regexp_full_match(handle, ?)"
    )
    return _column(con, sql, [prefix.lower(), FULL_COMMIT])


def _column(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> list[str]:
    return [row[0] for row in con.execute(f"{sql} ORDER BY 1", params).fetchall()]
