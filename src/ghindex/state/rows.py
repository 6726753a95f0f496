"""Small helpers every saver shares: batch upserts and GitHub's time format.

Every row written through `upsert` and `insert` has its text redacted first
(`ghindex.state.redact.scrub_rows`): this is the one place text enters the state database.
Redaction can make two keys one (two labels whose names were secrets): the last row for
a key is kept, as for any duplicate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import duckdb
import pyarrow as pa

from ghindex.state.redact import scrub_rows
from ghindex.vocabulary.times import readable_time

Node = dict[str, Any]
Row = dict[str, Any]


@contextlib.contextmanager
def registered(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> Iterator[None]:
    """`table` readable as `name` inside the block. A statement that failed there aborts
    the transaction, and unregistering would then fail too: the first failure is the one
    raised, never DuckDB's "transaction is aborted" in its place."""
    con.register(name, table)
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.unregister(name)
        raise
    con.unregister(name)


def upsert(
    con: duckdb.DuckDBPyConnection, table: str, key: str | tuple[str, ...], rows: Sequence[Row]
) -> None:
    """Insert rows, replacing any existing row with the same key."""
    if not rows:
        return
    keys = (key,) if isinstance(key, str) else key
    batch = unique(scrub_rows(table, rows), keys)
    with registered(con, "_batch", pa.Table.from_pylist(batch)):
        replace_from(con, table, "_batch", keys)


FETCHED_AT = "fetched_at"  # when a row was last stored: moved alone when nothing else did


def replace_from(
    con: duckdb.DuckDBPyConnection, table: str, source: str, keys: Sequence[str]
) -> None:
    """Copy every row of the relation `source` into `table`, replacing rows whose key
    (`keys`) matches one of them. A stored row that differs is updated in place; one
    that differs only in `fetched_at` has only that column moved; new keys are inserted.
    Never a delete and an insert: DuckDB's checkpoint then rewrites the blocks of the
    columns that changed, not the whole row group, so a snapshot published after a
    small change uploads little of the database (docs/snapshots.md)."""
    types = {row[0]: row[1] for row in con.execute(f"DESCRIBE {table}").fetchall()}
    given = [row[0] for row in con.execute(f"DESCRIBE {source}").fetchall()]
    columns = [c for c in given if c in types]
    match = " AND ".join(f"{table}.{k} = s.{k}" for k in keys)

    def new(column: str) -> str:
        return f"CAST(s.{column} AS {types[column]})"

    content = [c for c in columns if c not in keys and c != FETCHED_AT]
    differs = " OR ".join(f"{table}.{c} IS DISTINCT FROM {new(c)}" for c in content) or "false"
    if content:
        moved = ", ".join(f"{c} = {new(c)}" for c in [*content, FETCHED_AT] if c in columns)
        con.execute(f"UPDATE {table} SET {moved} FROM {source} s WHERE {match} AND ({differs})")
    if FETCHED_AT in columns:
        con.execute(
            f"UPDATE {table} SET {FETCHED_AT} = {new(FETCHED_AT)} FROM {source} s "
            f"WHERE {match} AND NOT ({differs}) AND {table}.{FETCHED_AT} IS DISTINCT FROM "
            f"{new(FETCHED_AT)}"
        )
    stored = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    con.execute(
        f"INSERT INTO {table} BY NAME SELECT * FROM {source} s "
        f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {stored})"
    )


def replace_where(
    con: duckdb.DuckDBPyConnection,
    table: str,
    key: tuple[str, ...],
    rows: Sequence[Row],
    scope: str,
    params: Sequence[Any],
) -> None:
    """Make the rows of `table` that the SQL condition `scope` (with `params`) selects
    exactly `rows` (the children of some items: their comments, labels, links): rows no
    longer there are deleted, the others written as `upsert` writes them, so an item
    read again unchanged leaves its children's blocks as they were."""
    batch = unique(scrub_rows(table, rows), key) if rows else []
    if not batch:
        con.execute(f"DELETE FROM {table} WHERE {scope}", list(params))
        return
    with registered(con, "_batch", pa.Table.from_pylist(batch)):
        match = " AND ".join(f"s.{k} = {table}.{k}" for k in key)
        con.execute(
            f"DELETE FROM {table} WHERE ({scope}) AND NOT EXISTS "
            f"(SELECT 1 FROM _batch s WHERE {match})",
            list(params),
        )
        replace_from(con, table, "_batch", key)


def insert(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[Row],
    key: tuple[str, ...] | None = None,
) -> None:
    """Insert rows; with `key`, only the last row for each key (after redaction)."""
    if not rows:
        return
    batch = list(scrub_rows(table, rows))
    with registered(con, "_batch", pa.Table.from_pylist(unique(batch, key) if key else batch)):
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _batch")


def delete_where_in(
    con: duckdb.DuckDBPyConnection, table: str, column: str, values: Sequence[str]
) -> None:
    if values:
        con.execute(f"DELETE FROM {table} WHERE list_contains(?, {column})", [list(values)])


def unique(rows: Sequence[Row], key: tuple[str, ...]) -> list[Row]:
    """The last row for each key, in first-seen order."""
    return list({tuple(row[k] for k in key): row for row in rows}.values())


def newest_update(nodes: Sequence[Node]) -> datetime | None:
    """The latest `updatedAt` among nodes (of those whose time reads), or None."""
    return max(filter(None, (readable_time(n.get("updatedAt")) for n in nodes)), default=None)


def now() -> datetime:
    return datetime.now(UTC)


def login(actor: Node | None) -> str | None:
    return (actor or {}).get("login")


# GitHub's stand-in for a deleted account: GraphQL answers `author: null`, the web and
# the REST API show the user "ghost". Stored the same way, so the author is never blank.
GHOST = {"__typename": "User", "login": "ghost"}


def author_of(node: Node) -> Node:
    """The author of a comment, item or release, with "ghost" for a deleted account."""
    return node.get("author") or GHOST


def count(connection: Node | None) -> int | None:
    return (connection or {}).get("totalCount")


def nodes_of(connection: Node | None) -> list[Node]:
    """The nodes of a connection that was read to its end.

    Replacing children from a partial listing would delete real rows, so a
    connection with more pages is a bug in the caller, not something to store.
    """
    if connection is None:
        return []
    if (connection.get("pageInfo") or {}).get("hasNextPage"):
        raise ValueError("refusing to store a connection that was not read to its end")
    return [n for n in connection.get("nodes") or [] if n]
