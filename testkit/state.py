"""Writing and reading the state database, and the test server's log, in tests."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb

from ghindex.config import DEFAULT_MODEL, Settings
from ghindex.state import items
from ghindex.state.database import open_state, transaction
from testkit.github_server import as_response, repository_node


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


def settings_for(path, model=DEFAULT_MODEL):
    """Settings with `path` as the workdir (no GitHub endpoint needed)."""
    return Settings(workdir=path, graphql_url="", model=model)


def built_workdir(path, count, *, topics=7, repeat=20):
    """A workdir at `path` holding `count` issues, fetched and built (embedded for real)."""
    from ghindex.index.build import build
    from testkit.github_server import issue_node

    settings = settings_for(path)
    store_issues(
        settings,
        [
            issue_node(
                n,
                title=f"Issue {n} about topic {n % topics}",
                body=f"Details of issue {n}. " + "More words here. " * repeat,
            )
            for n in range(1, count + 1)
        ],
    )
    build(settings)
    return path


def store_issues(settings, nodes, repo="octo/hello"):
    """Save fixture issue nodes as a fetch would (nested connections complete)."""
    con = open_state(settings.state_path)
    try:
        with transaction(con):
            items.save_repository(con, repository_node(repo))
            items.save_issues(con, repo, as_response(nodes))
    finally:
        con.close()
