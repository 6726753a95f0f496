"""A repository renamed or transferred on GitHub: its rows take the new name.

GitHub answers the old name with the repository under its new name (it follows
renames and transfers), and the node id stays the same. ghindex keeps one name per
repository, the one GitHub reports now, so every stored row, handle and cursor of
the old name is rewritten to the new one in one transaction: links, cursors and
the index stay whole, and handles match the URLs GitHub serves.
"""

from __future__ import annotations

import duckdb

# Columns that hold handles ('owner/name#12', 'owner/name@sha', 'owner/name:path', ...).
HANDLE_COLUMNS = (
    "handle", "parent_handle", "review_handle", "answer_handle", "commit_handle",
    "src", "dst", "source_handle",
)  # fmt: skip


def previous_name(con: duckdb.DuckDBPyConnection, node_id: str | None, repo: str) -> str | None:
    """The name the state knows this repository (GitHub node id) by, when not `repo`."""
    if not node_id:
        return None
    rows = con.execute(
        "SELECT repo FROM repos WHERE node_id = ? AND repo <> ?", [node_id, repo]
    ).fetchall()
    return rows[0][0] if rows else None


def rename_repo(con: duckdb.DuckDBPyConnection, old: str, new: str) -> int:
    """Rewrite every row of `old` to `new`; the number of rows changed."""
    changed = 0
    tables = [
        name
        for (name,) in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'main' AND table_type = 'BASE TABLE'"
        ).fetchall()
    ]
    for table in tables:
        columns = {
            name
            for (name,) in con.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'main' AND table_name = ?",
                [table],
            ).fetchall()
        }
        for column in [c for c in HANDLE_COLUMNS if c in columns]:
            # old, or old followed by a handle separator: never 'octo/hello-world' for 'octo/hello'
            changed += _count(
                con.execute(
                    f'UPDATE "{table}" SET "{column}" = ? || substr("{column}", ?) '
                    f'WHERE "{column}" = ? OR (starts_with("{column}", ?) '
                    f"AND substr(\"{column}\", ?, 1) IN ('#', '@', ':', '/'))",
                    [new, len(old) + 1, old, old, len(old) + 1],
                )
            )
        if "repo" in columns:
            changed += _count(
                con.execute(f'UPDATE "{table}" SET repo = ? WHERE repo = ?', [new, old])
            )
    if "repos" in tables:
        owner, name = new.split("/", 1)
        con.execute("UPDATE repos SET owner = ?, name = ? WHERE repo = ?", [owner, name, new])
    return changed


def _count(cursor: duckdb.DuckDBPyConnection) -> int:
    row = cursor.fetchone()
    return int(row[0]) if row else 0
