"""Turning what a person types into the handle of an item in the state.

`resolve_handle` accepts every handle of the contract, and also:

- a comment, review or review comment (`owner/repo#12/comment/5`): its item, `owner/repo#12`,
  when the item has that comment (else an error says how many it has);
- an item by its number alone (`#12` or `12`), as search takes it, when one item of the
  snapshot has that number (else an error lists those that do);
- a commit by a prefix of its sha of at least 7 hex digits (`owner/repo@1a2b3c4`), when
  exactly one commit of the state or of the reference graph starts with it;
- one file's diff in a commit (`owner/repo@<sha>:path`): the commit;
- a handle spelt in another case than GitHub spells it (`Octo/Hello#1`), when only one
  item matches.

A handle is known when an entity table has it, or when the reference graph has a link
to or from it (an item of a repository that is not indexed, but linked from one that is).
"""

from __future__ import annotations

import re

import duckdb

from ghindex.errors import GhindexError
from ghindex.vocabulary.handles import (
    COMMIT_REF,
    FULL_COMMIT,
    ISSUE_REF,
    SUB_ITEM,
    commit_handle,
    parent_item,
)
from ghindex.vocabulary.limits import is_number, number_or_none

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
# The items numbered `?` (each table once).
_NUMBERED_SQL = """
SELECT handle FROM issues WHERE number = ?
UNION ALL SELECT handle FROM pull_requests WHERE number = ?
UNION ALL SELECT handle FROM discussions WHERE number = ?
"""
_ITEM_TABLES = ("issues", "pull_requests", "discussions")
# a sub-item handle's form -> the table of such parts, and what one is called
_PARTS = {
    "comment": ("comments", "comment"),
    "review": ("reviews", "review"),
    "review-comment": ("review_comments", "review comment"),
}
# a part's handle: its item (group 1, as in SUB_ITEM), its form and its key
_SUB_PART = re.compile(SUB_ITEM.split(")/", 1)[0] + r")/(" + "|".join(_PARTS) + r")/(.+)$")
_SHOWN = 5  # candidates an error lists
# Where a handle holds an item's number: after `#` (`#12`, `owner/repo#12/comment/5`),
# or the whole of a bare one (`12`).
_ITEM_NUMBER = re.compile(r"^(?:[^/#\s]+/[^/#\s]+)?#([^/#\s]+)(?:/.*)?$|^([^/#:@\s]+)$")


class UnknownHandle(GhindexError):
    """The handle names nothing in the snapshot, or several commits at once."""


def resolve_handle(con: duckdb.DuckDBPyConnection, handle: str) -> str:
    """The handle of the item `handle` names, as the state spells it.

    Raises UnknownHandle when nothing matches, or when a sha prefix matches several commits.
    """
    text = handle.strip()
    number = _bare_number(text)
    if number is not None:
        return _numbered(con, text, number)
    wanted = parent_item(text)
    commit = COMMIT_REF.match(wanted)
    if commit:
        wanted = commit_handle(commit.group(1), commit.group(2).lower())
    found = _found(con, text, wanted, commit)
    if wanted != text and not commit:  # a comment, review or review comment of `found`
        _check_part(con, text, found)
    return found


def _found(
    con: duckdb.DuckDBPyConnection, text: str, wanted: str, commit: re.Match[str] | None
) -> str:
    """The handle the state spells `wanted` as: exactly, the one commit a sha prefix
    (`commit`) names, or the one handle spelt in another case."""
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
        raise UnknownHandle(f"{_shown(text)} matches {len(found)} {what} ({shown}): {hint}")
    raise UnknownHandle(
        f"no item {_shown(text)} in the snapshot: check the handle ({HANDLE_FORMS})"
    )


def _shown(text: str) -> str:
    """What the user typed, as an error line may quote it: control characters (a newline
    among them) escaped, so the error stays one line."""
    return text if text.isprintable() else repr(text)


def _bare_number(text: str) -> int | None:
    """The number of `#12` or `12` (an item named without its repository), else None. A
    number written in other digits than ASCII's (`²`, `①`, `١٢`) is refused."""
    match = ISSUE_REF.match(text)
    if match and match.group(1) is None:
        return number_or_none(match.group(2))
    place = _ITEM_NUMBER.match(text)
    written = place and (place.group(1) or place.group(2))
    if written and all(c.isnumeric() for c in written) and not is_number(written):
        raise UnknownHandle(
            f"{_shown(text)}: an item's number is written in ASCII digits (0-9), as in "
            "owner/repo#12"
        )
    return number_or_none(text)


def _numbered(con: duckdb.DuckDBPyConnection, text: str, number: int) -> str:
    """The one item numbered `number`; an error when none or several are."""
    found = _column(con, f"SELECT DISTINCT handle FROM ({_NUMBERED_SQL})", [number] * 3)
    if len(found) == 1:
        return found[0]
    if not found:
        raise UnknownHandle(
            f"no item {_shown(text)} in the snapshot: check the number, or give the handle "
            f"({HANDLE_FORMS})"
        )
    shown = ", ".join(found[:_SHOWN]) + (", ..." if len(found) > _SHOWN else "")
    raise UnknownHandle(
        f"{_shown(text)} names {len(found)} items ({shown}): give the repository, as in {found[0]}"
    )


def _check_part(con: duckdb.DuckDBPyConnection, text: str, item: str) -> None:
    """Refuse a comment, review or review comment `text` its item (`item`, as the state
    spells it) does not have. An item known only from links has no parts to check."""
    match = _SUB_PART.match(text)
    if match is None or not _is_item(con, item):
        return
    form, key = match.group(2), match.group(3)
    table, name = _PARTS[form]
    wanted = f"{item}/{form}/{key}"
    rows = con.execute(
        f"SELECT count(*) FILTER (WHERE handle = ? OR lower(handle) = lower(?)), count(*) "
        f"FROM {table} WHERE parent_handle = ?",
        [wanted, wanted, item],
    ).fetchone()
    if rows[0]:
        return
    plural = "" if rows[1] == 1 else "s"
    raise UnknownHandle(f"no {name} {key} on {item}: it has {rows[1]:,} {name}{plural}")


def _is_item(con: duckdb.DuckDBPyConnection, handle: str) -> bool:
    union = " UNION ALL ".join(f"SELECT handle FROM {t}" for t in _ITEM_TABLES)
    sql = f"SELECT count(*) FROM ({union}) WHERE handle = ?"
    return con.execute(sql, [handle]).fetchone()[0] > 0


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
