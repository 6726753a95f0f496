"""Reading the state database and the test server's log in assertions."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb


def rows(workdir, sql, params=()):
    """All rows of `sql` over WORKDIR/state.duckdb, opened read-only, times in UTC."""
    con = duckdb.connect(str(workdir / "state.duckdb"), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def utc(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def operations(server):
    """The GraphQL operation of every request the server received, in order."""
    return [r["operation"] for r in server.requests]
