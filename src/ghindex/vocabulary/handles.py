"""Handles: the durable, human-readable name of every item (the contract's Handles table).

| item | handle | made by |
|---|---|---|
| issue, pull request, discussion | `owner/repo#123` | `item_handle` |
| issue or PR comment | `owner/repo#123/comment/<databaseId>` | `comment_handle` |
| PR review | `owner/repo#123/review/<databaseId>` | `review_handle` |
| PR review comment | `owner/repo#123/review-comment/<databaseId>` | `review_comment_handle` |
| release | `owner/repo@release/<tag>` | `release_handle` |
| doc file | `owner/repo:path/to/file.md` | `doc_handle` |
| wiki page | `owner/repo:wiki/Page-Name` | `wiki_handle` |
| commit | `owner/repo@<full sha>` | `commit_handle` |
| one file's diff in a commit | `owner/repo@<full sha>:path/to/file` | `commit_file_handle` |

A comment's `<databaseId>` is GitHub's node id when GitHub gives no database id.

Reading handles back: `form_of` names the row of the table a handle is, `parent_item`
(and `SUB_ITEM`, for SQL) gives the item a comment or review belongs to, `COMMIT_REF`
reads a commit named by a sha prefix, `wiki_page_name` a wiki page's name. `ISSUE_REF`,
`SHA` and `PATHLIKE` recognise what a person types for an item, a commit or a file.

A doc file at `wiki/<name>` without an extension (`wiki/README`) has the handle of the
wiki page `<name>`: the contract's two forms overlap there, and `form_of` says `wiki`.
"""

from __future__ import annotations

import re

# An 'owner/name' as GitHub spells it in text, links and queries.
REPO = r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+"


def item_handle(repo: str, number: int | str) -> str:
    """An issue, pull request or discussion: 'owner/repo#123'."""
    return f"{repo}#{number}"


def comment_handle(item: str, database_id: int | str) -> str:
    """A comment (or a discussion reply) on the item with handle `item`."""
    return f"{item}/comment/{database_id}"


def review_handle(item: str, database_id: int | str) -> str:
    """A review of the pull request with handle `item`."""
    return f"{item}/review/{database_id}"


def review_comment_handle(item: str, database_id: int | str) -> str:
    """A comment on a diff line of the pull request with handle `item`."""
    return f"{item}/review-comment/{database_id}"


def release_handle(repo: str, tag: str) -> str:
    return f"{repo}@release/{tag}"


def doc_handle(repo: str, path: str) -> str:
    return f"{repo}:{path}"


def wiki_handle(repo: str, page: str) -> str:
    """A wiki page, by its name ('Page-Name' for the file 'Page-Name.md')."""
    return f"{repo}:wiki/{page}"


def commit_handle(repo: str, sha: str) -> str:
    return f"{repo}@{sha}"


def commit_file_handle(repo: str, sha: str, path: str) -> str:
    """One file's diff in a commit."""
    return f"{repo}@{sha}:{path}"


def wiki_page_name(handle: str) -> str:
    """The page name of a wiki page's handle: 'Page-Name' of 'owner/repo:wiki/Page-Name'."""
    return handle.split(":wiki/", 1)[-1]


# A comment, review or review comment: its handle starts with its item's (group 1).
# A pattern string, for Python and for SQL: `regexp_replace(h, SUB_ITEM, '\1')`.
SUB_ITEM = r"^([^/#\s]+/[^/#\s]+#[0-9]+)/(?:comment|review|review-comment)/.*$"
_SUB_ITEM = re.compile(SUB_ITEM)


def parent_item(handle: str) -> str:
    """The item a comment, review or review comment belongs to; other handles unchanged."""
    match = _SUB_ITEM.match(handle)
    return match.group(1) if match else handle


# A commit, or one file of it, named by its sha or a prefix of at least 7 hex digits,
# in any case: groups (repo, sha).
COMMIT_REF = re.compile(r"^([^/@\s]+/[^/@\s]+)@([0-9a-fA-F]{7,40})(?::.*)?$")
# A commit's own handle, with its full sha in lower case: a pattern string for SQL.
FULL_COMMIT = r"^[^/@]+/[^/@]+@[0-9a-f]{40}$"

# What a person types for an item: '#12' or 'owner/repo#12'; groups (repo or None, number).
ISSUE_REF = re.compile(rf"^(?:({REPO}))?#([0-9]+)$")
# A sha or a prefix of one, in lower case.
SHA = re.compile(r"^[0-9a-f]{7,40}$")
# Text that looks like a file path: 'README.md', 'src/app.py', 'docs/guide'.
PATHLIKE = re.compile(r"^[\w.@-]+(?:/[\w.@-]+)*\.\w+$|^[\w.@-]+(?:/[\w.@-]+)+$")

_OWNER_NAME = r"[^/#@:\s]+/[^/#@:\s]+"
_ITEM = rf"{_OWNER_NAME}#[0-9]+"
_FULL_SHA = r"[0-9a-f]{40}(?:[0-9a-f]{24})?"  # SHA-1, or SHA-256 in a repository using it
# form -> its pattern, in the order they are tried (a wiki page before a doc file)
_FORMS = {
    "item": re.compile(rf"^{_ITEM}$"),
    "comment": re.compile(rf"^{_ITEM}/comment/[^/\s]+$"),
    "review": re.compile(rf"^{_ITEM}/review/[^/\s]+$"),
    "review_comment": re.compile(rf"^{_ITEM}/review-comment/[^/\s]+$"),
    "release": re.compile(rf"^{_OWNER_NAME}@release/.+$"),
    "commit": re.compile(rf"^{_OWNER_NAME}@{_FULL_SHA}$"),
    "commit_file": re.compile(rf"^{_OWNER_NAME}@{_FULL_SHA}:.+$"),
    "wiki": re.compile(rf"^{_OWNER_NAME}:wiki/[^/]+$"),
    "doc": re.compile(rf"^{_OWNER_NAME}:.+$"),
}
FORMS = tuple(_FORMS)


def form_of(handle: str) -> str | None:
    """Which form of FORMS `handle` has ('item', 'comment', ... 'doc'), or None."""
    return next((form for form, pattern in _FORMS.items() if pattern.match(handle)), None)
