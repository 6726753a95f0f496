"""Commands for people analysing a snapshot: sql, export, report."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import click

from ghindex.analysis.cells import csv_cell, markdown_cell
from ghindex.cli.base import Context, cli, json_option, open_for_query, snapshot_options
from ghindex.cli.output import emit_json, say, visible


@cli.command()
@click.argument("query", required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown"]),
    default="table",
    show_default=True,
)
@click.option("--max-rows", type=click.IntRange(min=1), default=10_000, show_default=True)
@snapshot_options
@json_option
@click.pass_obj
def sql(
    obj: Context,
    query: str | None,
    fmt: str,
    max_rows: int,
    snapshot: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Run one read-only SQL statement (DuckDB) over the snapshot's state database.

    Without a query, prints how to open the database in the duckdb shell. Files,
    network and extensions are off; tables and views are listed in docs/schema.md.

    \b
    Examples:
      ghindex sql "SELECT repo, count(*) FROM issues GROUP BY ALL"
      ghindex sql "SELECT * FROM open_prs_awaiting_review" --format markdown
    """
    snap = open_for_query(obj, snapshot, store)
    if not query:
        say(f"duckdb -readonly {snap.state_path}")
        say(
            "(the duckdb shell, 1.4 or newer: `pip install duckdb-cli`; "
            "tables and views: docs/schema.md)",
            err=True,
        )
        return
    result = snap.sql(query, max_rows=max_rows)
    if as_json or fmt == "json":
        rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        emit_json(
            {
                "columns": result.columns,
                "rows": rows,
                "truncated": result.truncated,
                "truncated_reason": result.reason,
                **({"hint": result.hint} if result.hint else {}),
            }
        )
    elif fmt == "csv":
        say(csv_text(result.columns, result.rows), nl=False)
    else:
        say(grid_text(result.columns, result.rows, markdown=fmt == "markdown"))
    if result.truncated:
        say(f"({result.reason})", err=True)
    if result.hint:
        say(f"note: {result.hint}", err=True)


@cli.command()
@click.argument("dest", type=click.Path(file_okay=False))
@click.option(
    "--format", "fmt", type=click.Choice(["parquet"]), default="parquet", show_default=True
)
@snapshot_options
@json_option
@click.pass_obj
def export(
    obj: Context, dest: str, fmt: str, snapshot: str | None, store: str | None, as_json: bool
) -> None:
    """Write every table and view as Parquet, one per table (partitioned by repo when
    the snapshot holds several repositories), for pandas, Polars, Spark or DuckDB.
    Nothing is written but DEST (with --store, the copy pulled into the user's cache).

    \b
    Example:
      ghindex export --format parquet ./parquet
    """
    report = open_for_query(obj, snapshot, store).export(Path(dest))
    if as_json:
        emit_json(report.as_dict())
        return
    layout = "partitioned by repo" if report.partitioned else "one file each"
    say(f"wrote {len(report.tables)} tables and views to {dest} ({layout})")


@cli.command()
@click.option("--out", type=click.Path(dir_okay=False), default="report.html", show_default=True)
@snapshot_options
@json_option
@click.pass_obj
def report(obj: Context, out: str, snapshot: str | None, store: str | None, as_json: bool) -> None:
    """Write a self-contained HTML page with charts: issue and pull request flow,
    time to close, time to first response, review latency, the pull requests and
    issues waiting longest (linked to GitHub), who reviews and who comments. Prints
    the file written, the one --out names and nothing else; with --json, also its size
    and counts of what the page shows.

    \b
    Example:
      ghindex report --out report.html
    """
    page = open_for_query(obj, snapshot, store).report()
    data = page.html.encode("utf-8")
    Path(out).write_bytes(data)
    if as_json:
        emit_json({"path": out, "bytes": len(data), **page.shows()})
        return
    say(out)


def csv_text(columns: list[str], rows: list[list]) -> str:
    """Rows as CSV, each text that begins like a formula written after a `'`
    (`analysis/cells.py`). Printed through `say`, so a value's terminal controls are
    escaped (`\\u001b`); `--json` (or `ghindex export`) gives the values exactly."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in columns])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return visible(out.getvalue())


def grid_text(columns: list[str], rows: list[list], *, markdown: bool = False) -> str:
    """Rows as an aligned table (or a Markdown one, its cells made inert:
    `analysis/cells.py`), each cell on one line and made `visible` before the columns
    are measured."""
    columns = [_cell(c, markdown) for c in columns]
    cells = [[_cell(v, markdown) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values):
        padded = [v.ljust(w) for v, w in zip(values, widths, strict=True)]
        return ("| " + " | ".join(padded) + " |") if markdown else "  ".join(padded).rstrip()

    rule = (
        ("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        if markdown
        else "  ".join("-" * w for w in widths)
    )
    return "\n".join([line(columns), rule, *(line(r) for r in cells)])


def _cell(value, markdown: bool = False) -> str:
    if value is None:
        return ""
    text = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
    if markdown:
        return visible(markdown_cell(text))
    return visible(text.replace("\r\n", " ").replace("\n", " ").replace("\t", " "))
