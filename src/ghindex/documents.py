"""Documents: what the index holds for each item in the state database.

One document per issue and per pull request: its title, body and the metadata
that search results show and filters test. Later surfaces (comments, reviews,
docs, diffs) add their own document types here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import duckdb


@dataclass(frozen=True)
class Document:
    handle: str
    repo: str
    type: str  # issue | pull_request
    number: int | None
    title: str
    body: str
    state: str | None  # open | closed | merged
    labels: tuple[str, ...]
    author: str | None
    assignees: tuple[str, ...]
    milestone: str | None
    path: str | None
    created_at: datetime
    updated_at: datetime
    url: str


_THREADS_SQL = """
SELECT t.handle, t.repo, '{type}' AS type, t.number, t.title, coalesce(t.body, '') AS body,
       lower(t.state) AS state,
       coalesce((SELECT list(l.label ORDER BY l.label) FROM issue_labels l
                 WHERE l.handle = t.handle), []) AS labels,
       t.author,
       coalesce((SELECT list(a.login ORDER BY a.login) FROM assignees a
                 WHERE a.handle = t.handle), []) AS assignees,
       t.milestone, NULL AS path, t.created_at, t.updated_at, t.url
FROM {table} t
"""


def iter_documents(con: duckdb.DuckDBPyConnection) -> Iterator[Document]:
    """Every document, ordered by repo, then type, then number."""
    sql = " UNION ALL ".join(
        [
            _THREADS_SQL.format(type="issue", table="issues"),
            _THREADS_SQL.format(type="pull_request", table="pull_requests"),
        ]
    )
    cursor = con.execute(f"{sql} ORDER BY repo, type, number")
    while batch := cursor.fetchmany(1000):
        for row in batch:
            values = list(row)
            values[7] = tuple(values[7])
            values[9] = tuple(values[9])
            yield Document(*values)
