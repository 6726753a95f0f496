"""Documents: what the index holds for each thing in the state database.

One document type per surface:

| type | from | entity (what results collapse to) |
|---|---|---|
| `issue`, `pull_request`, `discussion` | the item's title and body | the item |
| `issue_comment` | a comment on an issue, pull request or discussion | the item |
| `pr_review` | a review's body and verdict | the pull request |
| `pr_review_comment` | a comment on a diff line, with its path and hunk | the pull request |
| `release` | release notes | the release |
| `doc`, `wiki_doc` | a Markdown/RST file, a wiki page | the file or page |
| `diff` | one file's change in a commit: message, path, patch (words only) | the commit |

A commit with no file diff to index (binary or generated files only, an empty
commit) gets one `diff` document of its message alone, so it stays findable.

Comments, reviews and review comments carry their item's state, labels,
assignees and milestone, so filters apply to a conversation as a whole; their
author and author association are their own. Bot comments and very short
comments stay in the state but are not indexed (see `DocumentSettings`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime

import duckdb


@dataclass(frozen=True)
class DocumentSettings:
    """What is left out of the index (it stays in the state)."""

    min_comment_chars: int = 20  # comments, reviews and review comments shorter than this
    index_bots: bool = False  # comments and reviews by bot accounts
    skip_types: tuple[str, ...] = ()  # whole document types (e.g. "diff")
    commit_summary: bool = True  # every commit also gets a row of its message and files
    skip_paths: tuple[str, ...] = (  # generated files whose diffs drown real changes
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "Cargo.lock",
        "uv.lock",
        "Pipfile.lock",
        "composer.lock",
        "go.sum",
        "Gemfile.lock",
    )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Document:
    handle: str
    entity: str  # handle of the item results collapse to
    entity_type: str
    repo: str
    type: str
    number: int | None
    title: str
    body: str
    preamble: str  # text placed before the first chunk's body (a verdict, a commit message)
    state: str | None  # open | closed | merged, of the entity
    labels: tuple[str, ...]
    author: str | None
    author_association: str | None
    assignees: tuple[str, ...]
    milestone: str | None
    path: str | None
    created_at: datetime | None
    updated_at: datetime | None
    url: str


# Issues, pull requests and discussions with what their documents and their
# comments' documents share.
_ITEMS = """
WITH items AS (
    SELECT handle, repo, 'issue' AS type, number, title, body, lower(state) AS state,
           author, author_association, milestone, created_at, updated_at, url
    FROM issues
    UNION ALL
    SELECT handle, repo, 'pull_request', number, title, body, lower(state), author,
           author_association, milestone, created_at, updated_at, url
    FROM pull_requests
    UNION ALL
    SELECT handle, repo, 'discussion', number, title, body, lower(state), author,
           author_association, NULL, created_at, updated_at, url
    FROM discussions
),
item_labels AS (
    SELECT handle, list(label ORDER BY label) AS labels FROM issue_labels GROUP BY handle
),
item_assignees AS (
    SELECT handle, list(login ORDER BY login) AS assignees FROM assignees GROUP BY handle
),
meta AS (
    SELECT i.*, coalesce(l.labels, []) AS labels, coalesce(a.assignees, []) AS assignees
    FROM items i
    LEFT JOIN item_labels l USING (handle)
    LEFT JOIN item_assignees a USING (handle)
)
"""

# Every query selects, in this order: handle, entity, entity_type, repo, type, number,
# title, body, preamble, state, labels, author, author_association, assignees,
# milestone, path, created_at, updated_at, url (the fields of `Document`).
_QUERIES = {
    "items": """
        SELECT handle, handle, type, repo, type, number, title, coalesce(body, ''), '',
               state, labels, author, author_association, assignees, milestone, NULL,
               created_at, updated_at, url
        FROM meta
    """,
    "issue_comment": """
        SELECT c.handle, m.handle, m.type, c.repo, 'issue_comment', m.number, m.title,
               coalesce(c.body, ''), '', m.state, m.labels, c.author, c.author_association,
               m.assignees, m.milestone, NULL, c.created_at, c.updated_at, c.url
        FROM comments c JOIN meta m ON m.handle = c.parent_handle
        WHERE {conversation}
    """,
    "pr_review": """
        SELECT r.handle, m.handle, m.type, r.repo, 'pr_review', m.number, m.title,
               coalesce(r.body, ''),
               'Review (' || lower(replace(r.state, '_', ' ')) || ') by '
                   || coalesce(r.author, 'a deleted account'),
               m.state, m.labels, r.author, r.author_association, m.assignees, m.milestone,
               NULL, r.created_at, r.updated_at, r.url
        FROM reviews r JOIN meta m ON m.handle = r.parent_handle
        WHERE {conversation}
    """,
    "pr_review_comment": """
        SELECT rc.handle, m.handle, m.type, rc.repo, 'pr_review_comment', m.number, m.title,
               coalesce(rc.body, ''),
               'On ' || coalesce(rc.path, 'the diff')
                   || coalesce(' line ' || CAST(rc.line AS VARCHAR), '')
                   || CASE WHEN rc.diff_hunk IS NULL THEN '' ELSE ':' || chr(10)
                      || array_to_string(list_slice(string_split(rc.diff_hunk, chr(10)), -6, -1),
                                         chr(10)) END,
               m.state, m.labels, rc.author, rc.author_association, m.assignees, m.milestone,
               rc.path, rc.created_at, rc.updated_at, rc.url
        FROM review_comments rc JOIN meta m ON m.handle = rc.parent_handle
        WHERE {conversation}
    """,
    "release": """
        SELECT handle, handle, 'release', repo, 'release', NULL, coalesce(name, tag),
               coalesce(body, ''), 'Release ' || tag, NULL, [], author, NULL, [], NULL, NULL,
               coalesce(published_at, created_at), updated_at, url
        FROM releases WHERE NOT coalesce(is_draft, false)
    """,
    "doc": """
        SELECT handle, handle, CASE kind WHEN 'wiki' THEN 'wiki_doc' ELSE 'doc' END, repo,
               CASE kind WHEN 'wiki' THEN 'wiki_doc' ELSE 'doc' END, NULL, title, body, '',
               NULL, [], NULL, NULL, [], NULL, path, last_changed_at,
               coalesce(last_changed_at, fetched_at), url
        FROM docs
    """,
    "diff": """
        SELECT f.handle, c.handle, 'commit', f.repo, 'diff', NULL, c.subject,
               coalesce(f.patch, ''),
               trim(substr(c.message, length(c.subject) + 1), {blank}),
               NULL, [], coalesce(c.author_login, c.author_name), NULL, [], NULL, f.path,
               c.authored_at, c.committed_at, c.url
        FROM commit_files f JOIN commits c ON c.handle = f.commit_handle
        WHERE NOT f.is_binary AND f.patch IS NOT NULL
          AND NOT list_contains(?, regexp_extract(f.path, '[^/]+$'))
    """,
    # Every commit's message and the files it changed, beside its file diffs.
    "commit_summary": """
        SELECT c.handle, c.handle, 'commit', c.repo, 'diff', NULL, c.subject,
               coalesce('Files: ' || (SELECT string_agg(f.path, ', ' ORDER BY f.path)
                                      FROM commit_files f WHERE f.commit_handle = c.handle), ''),
               trim(substr(c.message, length(c.subject) + 1), {blank}), NULL, [],
               coalesce(c.author_login, c.author_name), NULL, [], NULL, NULL,
               c.authored_at, c.committed_at, c.url
        FROM commits c
    """,
    # A commit none of whose files has a diff document (binary or generated files
    # only, an empty commit) is still findable by its message.
    "commit": """
        SELECT c.handle, c.handle, 'commit', c.repo, 'diff', NULL, c.subject, '',
               trim(substr(c.message, length(c.subject) + 1), {blank}), NULL, [],
               coalesce(c.author_login, c.author_name), NULL, [], NULL, NULL,
               c.authored_at, c.committed_at, c.url
        FROM commits c
        WHERE NOT EXISTS (
            SELECT 1 FROM commit_files f
            WHERE f.commit_handle = c.handle AND NOT f.is_binary AND f.patch IS NOT NULL
              AND NOT list_contains(?, regexp_extract(f.path, '[^/]+$'))
        )
    """,
}


def embedded(doc: Document, settings: DocumentSettings) -> bool:
    """Whether search reads `doc` by meaning (its chunks get vectors). A commit is read by
    its summary row (message and files), not by each file's diff: those rows repeat the
    commit, gave a commit one more near-copy of its vector per file to crowd the dense
    list with, and found nothing the summary does not (bench/README.md, #34); full-text
    search reads them still. Without summary rows, the diffs are a commit's only rows."""
    return doc.type != "diff" or doc.handle == doc.entity or not settings.commit_summary


def iter_documents(
    con: duckdb.DuckDBPyConnection, settings: DocumentSettings | None = None
) -> Iterator[Document]:
    """Every document, ordered by type, then handle."""
    settings = settings or DocumentSettings()
    conversation = f"length(trim(coalesce(body, ''))) >= {int(settings.min_comment_chars)}" + (
        "" if settings.index_bots else " AND NOT _is_bot"
    )
    skipped = set(settings.skip_types)
    for name, sql in _QUERIES.items():
        if name in ("diff", "commit", "commit_summary") and "diff" in skipped:
            continue  # not even read: patches are most of the state's text
        if name == ("commit" if settings.commit_summary else "commit_summary"):
            continue  # a summary of every commit covers those without file diffs
        params = [list(settings.skip_paths)] if name in ("diff", "commit") else []
        query = _ITEMS + sql.format(conversation=_bot_aware(name, conversation), blank=_BLANK)
        cursor = con.execute(f"{query} ORDER BY 5, 1", params)
        while batch := cursor.fetchmany(1000):
            for row in batch:
                values = list(row)
                if values[4] in skipped:
                    continue
                values[10] = tuple(values[10] or ())
                values[13] = tuple(values[13] or ())
                yield Document(*values)


_BLANK = "' ' || chr(9) || chr(10) || chr(13)"  # what trim() takes off a commit message body


def _bot_aware(name: str, condition: str) -> str:
    """The conversation filter, with `_is_bot` spelled for the table of `name`."""
    alias = {"issue_comment": "c", "pr_review": "r", "pr_review_comment": "rc"}.get(name)
    if alias is None:
        return condition
    bot = (
        f"(coalesce({alias}.author_type, '') = 'Bot' "
        f"OR ends_with(coalesce({alias}.author, ''), '[bot]'))"
    )
    return condition.replace("body", f"{alias}.body").replace("_is_bot", bot)
