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
    "handle",
    "parent_handle",
    "review_handle",
    "answer_handle",
    "commit_handle",
    "reply_to",
    "src",
    "dst",
    "source_handle",
)


def previous_name(con: duckdb.DuckDBPyConnection, node_id: str | None, repo: str) -> str | None:
    """The name the state knows this repository (GitHub node id) by, when not `repo`."""
    if not node_id:
        return None
    rows = con.execute(
        "SELECT repo FROM repos WHERE node_id = ? AND repo <> ?", [node_id, repo]
    ).fetchall()
    return rows[0][0] if rows else None


def rename_repo(con: duckdb.DuckDBPyConnection, old: str, new: str) -> int:
    """Rewrite every row of `old` to `new`; the number of rows changed.

    Rows already stored under `new` belong to a repository that had that name before
    (GitHub now gives the name to this one), so they are removed first. A rewritten
    row that would duplicate one already there (a link to both names) is dropped."""
    tables = _tables(con)
    for table, columns in tables.items():
        if "repo" in columns:
            con.execute(f'DELETE FROM "{table}" WHERE repo = ?', [new])
    changed = 0
    for table, columns in tables.items():
        rewritten = [c for c in HANDLE_COLUMNS if c in columns]
        if "repo" in columns:
            rewritten.append("repo")
        if not rewritten:
            continue
        ours = " OR ".join(_mentions(c) for c in rewritten)
        params = [p for _c in rewritten for p in (old, old, len(old) + 1)]
        con.execute(f'CREATE TEMP TABLE _renamed AS SELECT * FROM "{table}" WHERE {ours}', params)
        try:
            count = con.execute("SELECT count(*) FROM _renamed").fetchone()[0]
            if not count:
                continue
            con.execute(f'DELETE FROM "{table}" WHERE {ours}', params)
            for column in rewritten:
                con.execute(
                    f'UPDATE _renamed SET "{column}" = ? || substr("{column}", ?) '
                    f"WHERE {_mentions(column)}",
                    [new, len(old) + 1, old, old, len(old) + 1],
                )
            con.execute(f'INSERT OR IGNORE INTO "{table}" SELECT * FROM _renamed')
            changed += count
        finally:
            con.execute("DROP TABLE _renamed")
    if "repos" in tables:
        owner, name = new.split("/", 1)
        con.execute("UPDATE repos SET owner = ?, name = ? WHERE repo = ?", [owner, name, new])
    return changed


def _mentions(column: str) -> str:
    """SQL: `column` is the old name, or starts with it and a handle separator (never
    'octo/hello-world' for 'octo/hello'); takes the parameters (old, old, len(old) + 1)."""
    return (
        f'("{column}" = ? OR (starts_with("{column}", ?) '
        f"AND substr(\"{column}\", ?, 1) IN ('#', '@', ':', '/')))"
    )


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for table, column in con.execute(
        "SELECT c.table_name, c.column_name FROM information_schema.columns c "
        "JOIN information_schema.tables t USING (table_schema, table_name) "
        "WHERE c.table_schema = 'main' AND t.table_type = 'BASE TABLE'"
    ).fetchall():
        found.setdefault(table, set()).add(column)
    return found
