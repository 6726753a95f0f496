"""Offline analysis: views with known answers, SQL from the CLI, Parquet export,
the HTML report (rendered in headless Chromium), the Python API, and the docs'
own queries and schema reference."""

from __future__ import annotations

import ast
import html
import itertools
import json
import re
import shutil
import struct
import subprocess
import zlib
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from ghindex.analysis import schema_doc
from ghindex.config import DEFAULT_MODEL, Settings
from ghindex.sample.demo import load_sample
from testkit.github_server import (
    as_response,
    comment_node,
    format_time,
    issue_node,
    parse_time,
    pull_request_node,
    ref,
    review_node,
)
from testkit.state import rows, settings_for, store_issues

ROOT = Path(__file__).resolve().parents[1]
T0 = parse_time("2024-03-04T10:00:00Z")  # a Monday


def at(hours: float) -> str:
    return format_time(T0 + timedelta(hours=hours))


@pytest.fixture
def known(github, run, isolated):
    """A repository whose answers are known, fetched through the real path."""
    ana = {"__typename": "User", "login": "ana"}
    bob = {"__typename": "User", "login": "bob"}
    bot = {"__typename": "Bot", "login": "ci-bot"}
    github.add_repo(
        "octo/metrics",
        issues=[
            issue_node(
                1,
                repo="octo/metrics",
                title="Crash",
                author=ana,
                state="CLOSED",
                createdAt=at(0),
                closedAt=at(10),
                updatedAt=at(10),
                labels={"nodes": [{"name": "bug", "color": "f00", "description": None}]},
                comments=[
                    comment_node(11, author=ana, createdAt=at(1), updatedAt=at(1)),
                    comment_node(12, author=bot, createdAt=at(1.5), updatedAt=at(1.5)),
                    comment_node(13, author=bob, createdAt=at(2), updatedAt=at(2)),
                ],
            ),
            issue_node(
                2,
                repo="octo/metrics",
                title="Old idea",
                author=bob,
                createdAt=at(-5000),
                updatedAt=at(-5000),
            ),
            issue_node(
                3,
                repo="octo/metrics",
                title="Fresh",
                author=bob,
                createdAt=at(200),
                updatedAt=format_time(parse_time(at(0)) + timedelta(days=3650)),
                labels={"nodes": [{"name": "bug", "color": "f00", "description": None}]},
            ),
        ],
        pull_requests=[
            pull_request_node(
                4,
                repo="octo/metrics",
                title="Fix the crash",
                author=bob,
                state="MERGED",
                merged=True,
                createdAt=at(3),
                mergedAt=at(27),
                closedAt=at(27),
                updatedAt=at(27),
                closingIssuesReferences=[ref("octo/metrics", 1)],
                reviews=[
                    review_node(
                        41,
                        "COMMENTED",
                        author=bob,
                        submittedAt=at(4),
                        createdAt=at(4),
                        updatedAt=at(4),
                    ),
                    review_node(
                        42,
                        "APPROVED",
                        author=ana,
                        submittedAt=at(8),
                        createdAt=at(8),
                        updatedAt=at(8),
                    ),
                ],
            ),
            pull_request_node(
                5,
                repo="octo/metrics",
                title="Waiting",
                author=ana,
                createdAt=at(30),
                updatedAt=at(30),
            ),
            pull_request_node(
                6,
                repo="octo/metrics",
                title="Draft",
                author=ana,
                isDraft=True,
                createdAt=at(31),
                updatedAt=at(31),
            ),
        ],
    )
    assert run("fetch", "--repo", "octo/metrics").exit_code == 0
    return isolated / "work"


@pytest.mark.slow
def test_views_give_the_known_answers(known):
    assert rows(
        known,
        "SELECT number, hours_to_first_response, hours_to_close "
        "FROM issue_response_times ORDER BY number",
    ) == [
        (1, 2.0, 10.0),
        (2, None, None),
        (3, None, None),
    ]
    assert rows(
        known,
        "SELECT number, hours_to_first_review, hours_to_merge FROM pr_review_times ORDER BY number",
    ) == [
        (4, 5.0, 24.0),
        (5, None, None),
        (6, None, None),
    ]
    assert rows(known, "SELECT number, url FROM open_prs_awaiting_review") == [
        (5, "https://github.com/octo/metrics/pull/5"),
    ]
    assert rows(known, "SELECT number, url FROM stale_issues") == [
        (2, "https://github.com/octo/metrics/issues/2"),
    ]
    # how long an item has waited is counted to now(): the same moment the row was read at
    for view, since, days in (
        ("open_prs_awaiting_review", "created_at", "days_waiting"),
        ("stale_issues", "updated_at", "days_idle"),
    ):
        [(now, moment, value)] = rows(known, f"SELECT now(), {since}, {days} FROM {view}")
        assert value == round((now - moment).total_seconds() / 86400, 1), view
    assert rows(
        known,
        "SELECT label, open_issues, closed_issues, open_prs, closed_prs, total "
        "FROM label_distribution",
    ) == [("bug", 1, 1, 0, 0, 2)]
    assert rows(known, "SELECT author, comments, threads FROM top_commenters ORDER BY 1") == [
        ("ana", 1, 1),
        ("bob", 1, 1),
    ]
    assert rows(known, "SELECT author, reviews, approvals FROM top_reviewers ORDER BY 1") == [
        ("ana", 1, 1),
        ("bob", 1, 0),
    ]
    assert rows(known, "SELECT issue, closed_by, closer_type FROM issues_closed_by") == [
        ("octo/metrics#1", "octo/metrics#4", "pull_request"),
    ]
    week = rows(
        known,
        "SELECT issues_opened, issues_closed, prs_opened, prs_merged, comments "
        "FROM weekly_activity WHERE week = DATE '2024-03-04'",
    )
    assert week == [(1, 1, 3, 1, 3)]


def test_sql_command_formats_and_stays_read_only(known, run):
    query = "SELECT number, title FROM issues WHERE number < 3 ORDER BY number"

    table = run("sql", query)
    assert table.stdout == "number  title\n------  --------\n1       Crash\n2       Old idea\n"
    markdown = run("sql", query, "--format", "markdown")
    assert markdown.stdout.splitlines()[:2] == ["| number | title    |", "|--------|----------|"]
    assert run("sql", query, "--format", "csv").stdout == "number,title\n1,Crash\n2,Old idea\n"
    as_json = json.loads(run("sql", query, "--json").stdout)
    assert as_json["rows"] == [{"number": 1, "title": "Crash"}, {"number": 2, "title": "Old idea"}]

    for statement in (
        "DELETE FROM issues",
        "SELECT * FROM read_csv('/etc/passwd')",
        "COPY issues TO 'stolen.csv'",
    ):
        refused = run("sql", statement)
        assert refused.exit_code == 1
        assert refused.stderr.startswith("Error: query: ")
    assert not Path("stolen.csv").exists()
    assert rows(known, "SELECT count(*) FROM issues") == [(3,)]
    hint = run("sql")
    assert hint.stdout == f"duckdb -readonly {known / 'state.duckdb'}\n"


def test_export_round_trips_rows_and_types(known, run, isolated):
    result = run("export", "--format", "parquet", str(isolated / "parquet"), "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["partitioned"] is False  # one repository: one file per table
    con = duckdb.connect(str(known / "state.duckdb"), read_only=True)
    try:
        for table, count in report["tables"].items():
            path = isolated / "parquet" / f"{table}.parquet"
            back = duckdb.sql(f"SELECT * FROM read_parquet('{path}')")
            original = con.sql(f"SELECT * FROM {table}")
            assert back.count("*").fetchall()[0][0] == count
            assert [str(t) for t in back.types] == [str(t) for t in original.types], table
    finally:
        con.close()
    assert {"issues", "edges", "weekly_activity", "issues_closed_by"} <= set(report["tables"])


@pytest.mark.slow
def test_export_partitions_by_repo_when_there_are_several(isolated):
    from ghindex.analysis.export import export

    settings = Settings(workdir=isolated / "sample", graphql_url="", model=DEFAULT_MODEL)
    load_sample(settings)

    report = export(settings.state_path, isolated / "parquet")

    assert report.partitioned
    back = duckdb.sql(
        f"SELECT repo, count(*) FROM read_parquet('{isolated}/parquet/issues/*/*.parquet', "
        "hive_partitioning = true) GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert back == rows(
        settings.workdir, "SELECT repo, count(*) FROM issues GROUP BY ALL ORDER BY ALL"
    )
    assert (isolated / "parquet" / "issues" / "repo=betamaxpy%2Fbetamax").is_dir()


@pytest.mark.slow
def test_exporting_again_replaces_each_table_whole_and_only_its_own_files(isolated, run):
    from ghindex.analysis.export import export
    from ghindex.errors import ExportError

    settings = Settings(workdir=isolated / "sample", graphql_url="", model=DEFAULT_MODEL)
    load_sample(settings)
    dest = isolated / "parquet"
    export(settings.state_path, dest)
    kept = dest / "issues" / "repo=betamaxpy%2Fbetamax"
    gone = dest / "issues" / "repo=gone%2Frepo"  # a repository an earlier snapshot held
    gone.mkdir()
    shutil.copy(next(kept.glob("*.parquet")), gone / "data_0.parquet")

    export(settings.state_path, dest)
    assert not gone.exists() and kept.is_dir()
    export(settings.state_path, dest, partition=False)
    assert (dest / "issues.parquet").is_file() and not (dest / "issues").exists()
    export(settings.state_path, dest, partition=True)
    assert not (dest / "issues.parquet").exists() and kept.is_dir()
    read = duckdb.sql(f"SELECT count(*) FROM read_parquet('{dest}/issues/**/*.parquet')")
    assert read.fetchall() == rows(settings.workdir, "SELECT count(*) FROM issues")

    mine = dest / "issues" / "notes.txt"
    mine.write_text("someone's own file")
    with pytest.raises(ExportError, match=r"notes.txt was not written by an export"):
        export(settings.state_path, dest)
    assert mine.read_text() == "someone's own file" and kept.is_dir()
    assert (dest / "comments").is_dir()  # refused before anything was removed
    refused = run("export", str(dest), "--snapshot", str(settings.workdir))
    assert refused.exit_code == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"Error: {mine} was not written by an export: export to a new folder, or move it away first"
    )


@pytest.fixture(scope="module")
def sample_state(tmp_path_factory):
    """The bundled sample's state (no index needed for SQL)."""
    settings = Settings(
        workdir=tmp_path_factory.mktemp("analysis"), graphql_url="", model=DEFAULT_MODEL
    )
    load_sample(settings)
    return settings.state_path


def test_the_views_give_durations_as_hours_and_days(sample_state, run):
    con = duckdb.connect(str(sample_state), read_only=True)
    try:
        columns = con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_name IN (SELECT view_name FROM duckdb_views() WHERE NOT internal) "
            "AND (data_type = 'INTERVAL' OR column_name LIKE 'hours_%' "
            "OR column_name LIKE 'days_%') ORDER BY 1, 2"
        ).fetchall()
    finally:
        con.close()
    assert columns == [
        ("issue_response_times", "hours_to_close", "DOUBLE"),
        ("issue_response_times", "hours_to_first_response", "DOUBLE"),
        ("open_prs_awaiting_review", "days_waiting", "DOUBLE"),
        ("pr_review_times", "hours_to_first_review", "DOUBLE"),
        ("pr_review_times", "hours_to_merge", "DOUBLE"),
        ("stale_issues", "days_idle", "DOUBLE"),
    ]

    snapshot = ("--snapshot", str(sample_state.parent))
    issues = run(
        "sql",
        "SELECT handle, hours_to_first_response, hours_to_close "
        "FROM issue_response_times WHERE handle IN ('PyCQA/pycodestyle#700', "
        "'betamaxpy/betamax#150') ORDER BY 1",
        *snapshot,
    )
    assert issues.exit_code == 0, issues.output
    assert issues.stdout == (  # answered 10 days 19:53:08 and closed 26:12:08 after opening
        "handle                 hours_to_first_response  hours_to_close\n"
        "---------------------  -----------------------  --------------\n"
        "PyCQA/pycodestyle#700  259.89                   26.2\n"
        "betamaxpy/betamax#150  12.34                    1.44\n"
    )
    merged = run(
        "sql",
        "SELECT handle, hours_to_merge FROM pr_review_times WHERE handle IN "
        "('PyCQA/pycodestyle#714', 'heroku/heroku-connect-quickstart#5') ORDER BY 1",
        *snapshot,
        "--json",
    )
    assert json.loads(merged.stdout)["rows"] == [
        {"handle": "PyCQA/pycodestyle#714", "hours_to_merge": 3.23},
        {"handle": "heroku/heroku-connect-quickstart#5", "hours_to_merge": 23352.38},
    ]


def test_every_exported_table_opens_with_its_columns_even_when_empty(sample_state, run, isolated):
    dest = isolated / "parquet"
    result = run(
        "export", "--format", "parquet", str(dest), "--snapshot", str(sample_state.parent), "--json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["partitioned"] is True  # sixteen repositories
    assert report["tables"]["commits"] == report["tables"]["docs"] == 0  # no git source

    con = duckdb.connect(str(sample_state), read_only=True)
    try:
        for table, count in report["tables"].items():
            source = con.sql(f"SELECT * FROM {table}")
            expected = list(zip(source.columns, map(str, source.types), strict=True))
            if (dest / table).is_dir():  # hive partitioning puts repo last
                glob = f"{dest}/{table}/**/*.parquet"
                expected.sort(key=lambda column: column[0] == "repo")
            else:
                glob = f"{dest}/{table}.parquet"
            back = duckdb.sql(f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true)")
            assert list(zip(back.columns, map(str, back.types), strict=True)) == expected, table
            assert back.count("*").fetchall() == [(count,)], table
    finally:
        con.close()
    assert sorted(p.name for p in (dest / "commits").iterdir()) == ["data_0.parquet"]


def sql_blocks(text: str) -> list[str]:
    return re.findall(r"```sql\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
def test_every_query_in_docs_analysis_runs_on_the_sample(sample_state):
    blocks = [
        b
        for b in sql_blocks((ROOT / "docs" / "analysis.md").read_text())
        if "read_parquet" not in b
    ]
    assert len(blocks) >= 11  # ten analyses and the graph walk
    con = duckdb.connect(str(sample_state), read_only=True)
    try:
        answered = [con.sql(block).fetchall() for block in blocks]
    finally:
        con.close()
    assert sum(1 for found in answered if found) >= 8


def test_schema_reference_is_generated_from_the_ddl():
    expected = schema_doc.render()
    assert (ROOT / "docs" / "schema.md").read_text() == expected, (
        "run `python -m ghindex.analysis.schema_doc > docs/schema.md`"
    )
    for line in expected.splitlines():
        if line.startswith("| `") and line.count("|") == 4:
            assert not line.endswith("|  |"), f"column without a meaning: {line}"
    # views list their columns too, as DuckDB describes them
    views = expected.split("## Views")[1]
    assert "| `hours_to_close` | DOUBLE | hours from opening to closing; NULL while open |" in views
    assert views.count("| column | type | meaning |") == len(schema_doc.view_columns())


def test_the_python_api(sample_state, tmp_path):
    import ghindex.api as gh

    root = sample_state.parent
    (root / "manifest.json").write_text('{"build_id": "test"}')
    snap = gh.open(root)
    try:
        assert snap.sql("SELECT count(*) FROM issues").fetchall() == [(223,)]
        item = snap.fetch("betamaxpy/betamax#52")
        assert (item["title"], item["type"]) == ("Make cassettes thread-safe", "issue")
        assert snap.related("sigmavirus24/github3.py#819")["resolved"] == (
            "sigmavirus24/github3.py#819"
        )
    finally:
        snap.close()
    with pytest.raises(Exception, match=r"nothing at .*: check the path"):
        gh.open(tmp_path / "nothing")


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def run_block(block: str) -> list:
    """Run a documented Python block as written; the value of each expression statement."""
    namespace: dict = {}
    values = []
    for statement in ast.parse(block).body:
        if isinstance(statement, ast.Expr):
            values.append(
                eval(compile(ast.Expression(statement.value), "<doc>", "eval"), namespace)
            )
        else:
            exec(compile(ast.Module([statement], []), "<doc>", "exec"), namespace)
    namespace["snap"].close()
    return values


@pytest.mark.slow
def test_the_documented_python_examples_run_as_written(s3_store_url, isolated):
    """The README's Python API example, whose store is s3://my-bucket/ghindex (here on a
    local S3 server), and docs/analysis.md's, which reads the snapshot pulled to ./snap."""
    import boto3
    import pandas

    import ghindex.api as gh
    from ghindex.index.build import build
    from ghindex.snapshot import Store, publish
    from ghindex.state import items
    from ghindex.state.database import open_state, transaction

    settings = settings_for(isolated / "built")
    store_issues(
        settings,
        [
            issue_node(n, title=f"Uploads time out, case {n}", createdAt=at(0), updatedAt=at(n))
            for n in (1, 2, 3)
        ],
    )
    merged = pull_request_node(
        4,
        repo="octo/hello",
        title="Longer upload timeout",
        state="MERGED",
        merged=True,
        createdAt=at(1),
        mergedAt=at(31),
        updatedAt=at(31),
    )
    con = open_state(settings.state_path)
    try:
        with transaction(con):
            items.save_pull_requests(con, "octo/hello", as_response([merged]))
    finally:
        con.close()
    build(settings)
    boto3.client("s3").create_bucket(Bucket="my-bucket")
    publish(settings.workdir, Store("s3://my-bucket/ghindex"))

    readme = (ROOT / "README.md").read_text().split("### Analysis", 1)[1]
    frame, hits, scanned, context = run_block(python_blocks(readme)[0])
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.columns) == ["repo", "median(hours_to_merge)"]
    assert frame.to_dict("records") == [{"repo": "octo/hello", "median(hours_to_merge)": 30.0}]
    assert sorted(hit.handle for hit in hits) == ["octo/hello#1", "octo/hello#2", "octo/hello#3"]
    assert scanned == []  # no item carries the label 'bug'
    assert {p["url"] for p in context["passages"]} <= {
        f"https://github.com/octo/hello/{kind}/{n}" for kind in ("issues", "pull") for n in range(5)
    }
    assert context["passages"]

    gh.open("s3://my-bucket/ghindex", dest="snap").close()  # the ./snap it reads
    analysis = python_blocks((ROOT / "docs" / "analysis.md").read_text())[0]
    [weekly] = run_block(analysis)
    assert isinstance(weekly, pandas.DataFrame)
    assert weekly[["week", "issues_opened", "prs_opened", "prs_merged"]].to_dict("records") == [
        {
            "week": pandas.Timestamp("2024-03-04"),
            "issues_opened": 3,
            "prs_opened": 1,
            "prs_merged": 1,
        },
    ]


def test_report_json_says_what_the_page_shows(sample_state, run, tmp_path):
    out = tmp_path / "report.html"
    snapshot = ("--snapshot", str(sample_state.parent))

    result = run("report", "--out", str(out), *snapshot, "--json")

    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    page = out.read_text(encoding="utf-8")
    assert shown == {
        "path": str(out),
        "bytes": out.stat().st_size,
        "repositories": 16,
        "facts": {
            "issues": 223,
            "open_issues": 74,
            "pull_requests": 169,
            "open_pull_requests": 48,
            "comments": 217,
            "reviews": 7,
        },
        "charts": {
            "flow_months": 113,
            "time_to_close": 149,
            "time_to_first_response": 79,
            "time_to_first_review": 2,
        },
        "tables": {
            "open_prs_awaiting_review": 15,
            "stale_issues": 15,
            "top_reviewers": 3,
            "top_commenters": 10,
        },
        "totals": {
            "open_prs_awaiting_review": 47,
            "stale_issues": 74,
            "top_reviewers": 3,
            "top_commenters": 44,
        },
        "links": 30,
    }
    assert page.count('<a href="https://github.com/') == shown["links"]
    documented = re.search(
        r"```json\n(.*?)```", (ROOT / "docs" / "analysis.md").read_text(), flags=re.S
    )[1]
    assert json.loads(documented) | {"path": shown["path"]} == shown | {"bytes": 24284}
    # every statistic with its n (and a warning where n is small), every cut list "of N"
    assert section_notes(page) == {
        "Issue and pull request flow, per month": (
            "113 months, 2012-06 to 2021-10, quiet ones at zero"
        ),
        "Time to close an issue": "median 6.8 days (n = 149)",
        "Time to the first response on an issue": "median 26.1 hours (n = 79)",
        "Pull request review latency (time to the first review)": (
            "median 655.9 days (n = 2): from only 2 reviewed pull requests, too few to go by"
        ),
        "Open pull requests awaiting review (oldest first)": (
            "15 of 47 open pull requests awaiting review"
        ),
        "Open issues idle for 90 days or more (longest first)": (
            "15 of 74 open issues idle for 90 days or more"
        ),
        "Top reviewers": "all 3 reviewers, counted per repository",
        "Top commenters": "10 of 44 commenters, counted per repository",
    }
    assert page.count("median") == page.count("(n = ") == 3
    assert axis_titles(page) == [
        ("month (YYYY-MM)", "issues / PRs (count per month)"),
        ("time from opening to close (duration, hours to years)", "closed issues (count)"),
        (
            "time from opening to the first response (duration, hours to years)",
            "answered issues (count)",
        ),
        (
            "time from opening to the first review (duration, hours to years)",
            "reviewed pull requests (count)",
        ),
    ]
    assert x_ticks(page) == [f"{year}-01" for year in range(2013, 2022)]
    assert page.count("<tr>") - page.count("<thead>") == sum(shown["tables"].values())
    # for people: the file written, and nothing else on stdout
    assert run("report", "--out", str(out), *snapshot).stdout == f"{out}\n"


def section_notes(page: str) -> dict[str, str]:
    """Each section's title and the note under it, as a reader sees them."""
    found = re.findall(r"<h2>(.*?)</h2><p class=note>(.*?)</p>", page)
    return {html.unescape(title): html.unescape(note) for title, note in found}


def axis_titles(page: str) -> list[tuple[str, str]]:
    """Each chart's x-axis and y-axis titles, in page order (one of each per chart)."""
    titles = []
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        x = re.findall(r'<text class="axis-title x-title"[^>]*>([^<]*)</text>', svg)
        y = re.findall(r'<text class="axis-title y-title"[^>]*>([^<]*)</text>', svg)
        assert len(x) == len(y) == 1, svg
        titles.append((html.unescape(x[0]), html.unescape(y[0])))
    return titles


def x_ticks(page: str) -> list[str]:
    return re.findall(r'<text class="x-tick"[^>]*>([^<]*)</text>', page)


def test_report_month_ticks_fall_on_round_steps_and_are_enough_to_read():
    from ghindex.analysis.report import month_ticks

    def months(first: str, count: int) -> list[str]:
        start = int(first[:4]) * 12 + int(first[5:]) - 1
        return [f"{(start + i) // 12}-{(start + i) % 12 + 1:02d}" for i in range(count)]

    assert month_ticks([]) == []
    assert month_ticks(months("2024-11", 1)) == [0]
    assert month_ticks(months("2024-11", 3)) == [0, 1, 2]
    assert month_ticks(months("2024-11", 10)) == list(range(10))
    assert month_ticks(months("2024-11", 11)) == [0, 2, 4, 6, 8, 10]  # Nov, Jan, Mar, …
    assert month_ticks(months("2024-05", 20)) == list(range(0, 20, 2))
    assert month_ticks(months("2024-05", 25)) == [2, 5, 8, 11, 14, 17, 20, 23]  # Jul, Oct, …
    assert [months("2012-06", 113)[i] for i in month_ticks(months("2012-06", 113))] == [
        f"{year}-01" for year in range(2013, 2022)
    ]
    for first in ("2020-01", "2020-07", "2019-12"):
        for count in range(1, 1500, 7):
            labels = months(first, count)
            chosen = month_ticks(labels)
            assert len(chosen) <= 10 and len(chosen) >= min(count, 4), (first, count)
            assert chosen == sorted(set(chosen)) and all(0 <= i < count for i in chosen)
            steps = {b - a for a, b in itertools.pairwise(chosen)}
            assert len(steps) <= 1, (first, count, chosen)  # evenly spaced


def test_report_says_n_beside_each_statistic_and_of_n_beside_each_cut_list(tmp_path):
    """More items than each list shows; one reviewed pull request; nothing closed."""
    from ghindex.analysis.report import render
    from ghindex.state import items
    from ghindex.state.database import open_state, transaction
    from testkit.github_server import repository_node

    def person(login):
        return {"__typename": "User", "login": login}

    start = parse_time("2023-01-10T09:00:00Z")

    def moment(days: float, hours: float = 0) -> str:
        return format_time(start + timedelta(days=days, hours=hours))

    issues = [  # one a month for 17 months, each answered five hours later
        issue_node(
            n,
            repo="octo/many",
            createdAt=moment(31 * n),
            updatedAt=moment(31 * n),
            comments=[
                comment_node(
                    100 + n,
                    author=person(f"commenter{n % 12}"),
                    createdAt=moment(31 * n, 5),
                    updatedAt=moment(31 * n, 5),
                )
            ],
        )
        for n in range(1, 18)
    ]
    waiting = [  # 16 open pull requests nobody has reviewed
        pull_request_node(n, repo="octo/many", createdAt=moment(n), updatedAt=moment(n))
        for n in range(101, 117)
    ]
    reviewed = pull_request_node(  # reviewed by 11 people, the first 3 hours after opening
        117,
        repo="octo/many",
        createdAt=moment(0),
        updatedAt=moment(1),
        reviews=[
            review_node(
                200 + r,
                "APPROVED",
                author=person(f"reviewer{r}"),
                submittedAt=moment(0, 3 + r),
                createdAt=moment(0, 3 + r),
                updatedAt=moment(0, 3 + r),
            )
            for r in range(11)
        ],
    )
    state = tmp_path / "state.duckdb"
    con = open_state(state)
    try:
        with transaction(con):
            items.save_repository(con, repository_node("octo/many"))
            items.save_issues(con, "octo/many", as_response(issues))
            items.save_pull_requests(con, "octo/many", as_response([*waiting, reviewed]))
    finally:
        con.close()

    report = render(state)

    assert report.tables == {
        "open_prs_awaiting_review": 15,
        "stale_issues": 15,
        "top_reviewers": 10,
        "top_commenters": 10,
    }
    assert report.totals == {
        "open_prs_awaiting_review": 16,
        "stale_issues": 17,
        "top_reviewers": 11,
        "top_commenters": 12,
    }
    assert report.charts == {
        "flow_months": 18,
        "time_to_close": 0,
        "time_to_first_response": 17,
        "time_to_first_review": 1,
    }
    assert section_notes(report.html) == {
        "Issue and pull request flow, per month": (
            "18 months, 2023-01 to 2024-06, quiet ones at zero"
        ),
        "Time to close an issue": "no median yet (n = 0): no closed issues",
        "Time to the first response on an issue": "median 5.0 hours (n = 17)",
        "Pull request review latency (time to the first review)": (
            "median 3.0 hours (n = 1): from only 1 reviewed pull request, too few to go by"
        ),
        "Open pull requests awaiting review (oldest first)": (
            "15 of 16 open pull requests awaiting review"
        ),
        "Open issues idle for 90 days or more (longest first)": (
            "15 of 17 open issues idle for 90 days or more"
        ),
        "Top reviewers": "10 of 11 reviewers, counted per repository",
        "Top commenters": "10 of 12 commenters, counted per repository",
    }
    # no histogram for no durations: three charts, each with both axis titles
    assert [y for _, y in axis_titles(report.html)] == [
        "issues / PRs (count per month)",
        "answered issues (count)",
        "reviewed pull requests (count)",
    ]
    assert x_ticks(report.html) == [f"2023-{m:02d}" for m in (1, 3, 5, 7, 9, 11)] + [
        f"2024-{m:02d}" for m in (1, 3, 5)
    ]


def test_report_axis_ticks_are_four_to_six_round_counts():
    from ghindex.analysis.report import ticks

    assert ticks(0) == [0, 1, 2, 3]
    assert ticks(5) == [0, 1, 2, 3, 4, 5]
    assert ticks(36) == [0, 10, 20, 30, 40]
    assert ticks(101) == [0, 50, 100, 150]
    assert ticks(2400) == [0, 500, 1000, 1500, 2000, 2500]
    for top in range(5000):
        axis = ticks(top)
        assert 4 <= len(axis) <= 6 and axis[-1] >= top and axis[0] == 0, top
        assert str(axis[1]).lstrip("125").strip("0") == "", top  # 1, 2 or 5 times 10^n


def test_report_links_items_only_to_github_or_their_own_host(tmp_path):
    from ghindex.analysis.report import render
    from ghindex.state import items
    from ghindex.state.database import open_state, transaction
    from testkit.github_server import repository_node

    def stale(number, repo, url, title="Old"):
        return issue_node(
            number, repo=repo, title=title, url=url, createdAt=at(-9000), updatedAt=at(-9000)
        )

    hub = [
        stale(1, "octo/hub", "https://github.com/octo/hub/issues/1"),
        stale(2, "octo/hub", "javascript:alert(document.cookie)"),
        stale(3, "octo/hub", "https://evil.example/octo/hub/issues/3"),
        stale(
            4,
            "octo/hub",
            'https://github.com/octo/hub/issues/4"><script>x</script>',
            title="<img src=x onerror=alert(1)>",
        ),
        stale(5, "octo/hub", "https://ghe.example.com/corp/tool/issues/5"),
        stale(6, "octo/hub", "data:text/html,<script>alert(1)</script>"),
    ]
    enterprise = [  # a GitHub Enterprise Server repository: its own host is fine
        stale(7, "corp/tool", "https://ghe.example.com/corp/tool/issues/7"),
        stale(8, "corp/tool", "ftp://ghe.example.com/corp/tool/issues/8"),
    ]
    state = tmp_path / "state.duckdb"
    con = open_state(state)
    try:
        with transaction(con):
            items.save_repository(con, repository_node("octo/hub"))
            items.save_issues(con, "octo/hub", as_response(hub))
            tool = repository_node("corp/tool", url="https://ghe.example.com/corp/tool")
            items.save_repository(con, tool)
            items.save_issues(con, "corp/tool", as_response(enterprise))
    finally:
        con.close()

    report = render(state)

    hrefs = re.findall(r'<a href="([^"]*)">([^<]*)</a>', report.html)
    assert hrefs == [  # equally idle: in handle order
        ("https://ghe.example.com/corp/tool/issues/7", "corp/tool#7"),
        ("https://github.com/octo/hub/issues/1", "octo/hub#1"),
        (
            "https://github.com/octo/hub/issues/4&quot;&gt;&lt;script&gt;x&lt;/script&gt;",
            "octo/hub#4",
        ),
    ]
    assert report.links == 3 and report.tables["stale_issues"] == 8
    for unsafe in ("javascript:", "evil.example", "<script>", "data:", "ftp:", "<img"):
        assert unsafe not in report.html, unsafe
    assert "&lt;img src=x onerror=alert(1)&gt;" in report.html


def png_rows(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB rows of an 8-bit, non-interlaced RGB or RGBA PNG (what
    Chromium writes), decoded with zlib alone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at_byte, packed, header = 8, b"", None
    while at_byte < len(data):
        length, kind = struct.unpack(">I4s", data[at_byte : at_byte + 8])
        body = data[at_byte + 8 : at_byte + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            packed += body
        at_byte += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and interlace == 0 and colour in (2, 6), header
    size = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(packed), width * size
    previous, rows = bytearray(stride), []
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - size] if x >= size else 0
            up, corner = previous[x], previous[x - size] if x >= size else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                guess = left + up - corner
                near = min(
                    (abs(guess - left), 0, left),
                    (abs(guess - up), 1, up),
                    (abs(guess - corner), 2, corner),
                )[2]
                line[x] = (line[x] + near) & 255
        rows.append(bytes(b for i, b in enumerate(line) if i % size < 3))
        previous = line
    return width, height, rows


# Run in a copy of the report (the report itself has no script): where things were drawn.
MEASURE = """<script>
const box = (e) => e.getBoundingClientRect();
const content = [...document.body.children].filter((e) => e.tagName !== "SCRIPT");
const measured = {
  height: document.documentElement.scrollHeight,
  bottom: box(content[content.length - 1]).bottom + window.scrollY,
  ticks: [...document.querySelectorAll("svg text.y-tick")].map(
    (e) => [e.textContent, box(e).top, box(e).bottom, box(e).width]),
  x_ticks: [...document.querySelectorAll("svg text.x-tick")].map(
    (e) => [e.textContent, box(e).left, box(e).right]),
  titles: [...document.querySelectorAll("svg")].map((s) =>
    [...s.querySelectorAll("text.axis-title")].map((e) => [
      e.textContent, box(e).width, box(e).height,
      box(e).left >= box(s).left && box(e).right <= box(s).right
        && box(e).top >= box(s).top && box(e).bottom <= box(s).bottom])),
  links: [...document.querySelectorAll("a")].map((a) => a.getAttribute("href")),
  items: document.querySelectorAll("table.items tbody tr").length,
  svgs: [...document.querySelectorAll("svg")].map((s) => [
    box(s).height, s.getBBox().height * box(s).width / s.viewBox.baseVal.width]),
};
const pre = document.createElement("pre");
pre.id = "measured";
pre.textContent = JSON.stringify(measured);
document.body.append(pre);
</script>"""


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium(sample_state, run, tmp_path):
    out = tmp_path / "report.html"
    result = run("report", "--out", str(out), "--snapshot", str(sample_state.parent), "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    page = out.read_text()
    assert page.count("<svg") == 4 and "<script" not in page
    assert len(axis_titles(page)) == 4  # an x and a y title on every chart
    assert "http://" not in page and "https://" not in page.replace("https://github.com/", "")
    for title in (
        "Issue and pull request flow",
        "Time to close an issue",
        "Pull request review latency",
    ):
        assert title in page

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium package is not installed (.ci/run installs it)")
    browse = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=900,1400",
    ]
    shot = tmp_path / "report.png"
    subprocess.run(
        [*browse, f"--screenshot={shot}", out.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    width, height, pixels = png_rows(shot)
    assert (width, height) == (900, 1400)
    background = {row[: 3 * (width - 20)] for row in pixels[2 * height // 3 :]}  # no scrollbar
    assert background != {b"\xff" * 3 * (width - 20)}, "the bottom third of the window is blank"

    measuring = tmp_path / "measure.html"
    measuring.write_text(page.replace("</body>", MEASURE + "</body>"))
    dom = subprocess.run(
        [*browse, "--dump-dom", measuring.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    drawn = json.loads(html.unescape(re.search(r'<pre id="measured">(.*?)</pre>', dom)[1]))
    # the monthly chart's y-axis: round counts up to above the busiest month's 36,
    # each label visible and clear of the next
    assert [label for label, *_ in drawn["ticks"]] == ["0", "10", "20", "30", "40"]
    for (_, top_below, _, width_below), (_, _, bottom_above, _) in itertools.pairwise(
        drawn["ticks"]
    ):
        assert width_below > 0 and bottom_above <= top_below, drawn["ticks"]
    # its x-axis: a label each January, at least four, each clear of the next
    assert [label for label, *_ in drawn["x_ticks"]] == [f"{y}-01" for y in range(2013, 2022)]
    for (_, _, right), (_, left, _) in itertools.pairwise(drawn["x_ticks"]):
        assert right < left, drawn["x_ticks"]
    # every chart titles both axes, drawn and whole inside the chart (not clipped)
    assert len(drawn["titles"]) == 4
    for titles in drawn["titles"]:
        assert len(titles) == 2, titles
        for text, width, height, inside in titles:
            assert text and width > 0 and height > 0 and inside, titles
    # every listed item links to its page on GitHub
    assert len(drawn["links"]) == drawn["items"] == shown["links"] == 30
    assert all(link.startswith("https://github.com/") for link in drawn["links"])
    # nothing blank: the page ends with its last table (plus the body's 2rem margin), and
    # every chart's drawing fills most of the box it takes
    assert drawn["height"] - drawn["bottom"] <= 40, drawn
    for box_height, drawn_height in drawn["svgs"]:
        assert drawn_height >= 0.7 * box_height, drawn["svgs"]
