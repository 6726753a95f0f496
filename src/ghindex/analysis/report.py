"""`ghindex report`: one self-contained HTML page about a snapshot, for people.

Charts are inline SVG drawn here from the state database's views (no scripts, no
fonts or styles fetched from anywhere), so the file opens offline in any browser
and can be attached to an email or published as a CI artifact. The issues and pull
requests it lists link to their pages: only http(s) links to github.com or to the
host of the item's own repository (GitHub Enterprise Server) are written.
"""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb

from ghindex.state.database import no_state
from ghindex.vocabulary import hidden

# Duration buckets for latency histograms, in hours.
BUCKETS = [
    ("< 1 h", 1),
    ("< 1 day", 24),
    ("< 1 week", 168),
    ("< 1 month", 720),
    ("< 3 months", 2160),
    ("< 1 year", 8760),
    ("≥ 1 year", float("inf")),
]
COLOURS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c"]
# The drawing's size, the margin above, right of and below the plot, and the wider one
# left of it (the y-axis' labels and its title).
WIDTH, HEIGHT, PAD, LEFT = 720, 250, 40, 62
# Below this many durations a median is said to be from too few to go by.
FEW = 5
# Each list shows at most this many rows; its note says of how many.
ITEMS_LISTED, PEOPLE_LISTED = 15, 10
STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 800px;
       color: #111; padding: 0 1rem }
h1 { font-size: 1.5rem } h2 { font-size: 1.1rem; margin-top: 2rem }
.facts { display: flex; flex-wrap: wrap; gap: 1rem }
.fact { background: #f3f4f6; padding: .6rem 1rem; border-radius: 6px }
.fact b { display: block; font-size: 1.3rem } .fact span { color: #555 }
table { border-collapse: collapse; width: 100%; font-size: 13px }
td, th { border-bottom: 1px solid #ddd; padding: 4px; text-align: left }
.items td:not(:nth-child(2)) { white-space: nowrap }
svg text { font: 11px system-ui, sans-serif; fill: #333 } .note { color: #555 }
svg text.axis-title { font-weight: 600; fill: #555 }
"""
# Where an item's link may point: GitHub, or its own repository's host (Enterprise Server).
LINK_SCHEMES = ("https", "http")
GITHUB_HOST = "github.com"


@dataclass
class Report:
    """The page, and what it shows (counted for `ghindex report --json`)."""

    html: str
    repositories: int = 0
    facts: dict[str, int] = field(default_factory=dict)
    # months drawn, or durations in a histogram: the n beside its median
    charts: dict[str, int] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)  # rows listed
    totals: dict[str, int] = field(default_factory=dict)  # rows each list was cut from
    links: int = 0  # listed items that link to their page

    def shows(self) -> dict[str, Any]:
        return {
            "repositories": self.repositories,
            "facts": self.facts,
            "charts": self.charts,
            "tables": self.tables,
            "totals": self.totals,
            "links": self.links,
        }


def render(state: Path) -> Report:
    if not state.exists():
        raise no_state(state)
    con = duckdb.connect(str(state), read_only=True)
    try:
        return _page(con)
    finally:
        con.close()


def _page(con) -> Report:
    repos = [r for (r,) in con.execute("SELECT repo FROM repos ORDER BY 1").fetchall()]
    report = Report(html="", repositories=len(repos))
    report.facts = dict(
        con.execute(
            "SELECT 'issues', count(*) FROM issues UNION ALL "
            "SELECT 'open_issues', count(*) FROM issues WHERE state = 'OPEN' UNION ALL "
            "SELECT 'pull_requests', count(*) FROM pull_requests UNION ALL "
            "SELECT 'open_pull_requests', count(*) FROM pull_requests WHERE state = 'OPEN' "
            "UNION ALL SELECT 'comments', count(*) FROM comments UNION ALL "
            "SELECT 'reviews', count(*) FROM reviews"
        ).fetchall()
    )
    # every month from the first to the last, quiet ones as zeros, so time runs evenly
    monthly = con.execute(
        "WITH months AS (SELECT date_trunc('month', week) AS month, sum(issues_opened) AS a, "
        "sum(issues_closed) AS b, sum(prs_opened) AS c, sum(prs_merged) AS d "
        "FROM weekly_activity GROUP BY 1), "
        "span AS (SELECT unnest(generate_series(min(month), max(month), INTERVAL 1 MONTH)) "
        "AS month FROM months) "
        "SELECT strftime(span.month, '%Y-%m'), coalesce(a, 0), coalesce(b, 0), "
        "coalesce(c, 0), coalesce(d, 0) FROM span LEFT JOIN months USING (month) ORDER BY 1"
    ).fetchall()
    report.charts["flow_months"] = len(monthly)
    durations = {
        "time_to_close": "SELECT hours_to_close FROM issue_response_times",
        "time_to_first_response": "SELECT hours_to_first_response FROM issue_response_times",
        "time_to_first_review": "SELECT hours_to_first_review FROM pr_review_times",
    }
    hours = {name: _hours(con, sql) for name, sql in durations.items()}
    report.charts.update({name: len(values) for name, values in hours.items()})
    repo_urls = con.execute("SELECT repo, url FROM repos").fetchall()
    hosts = {repo: _host(url) for repo, url in repo_urls}
    sections = [
        _section(
            "Issue and pull request flow, per month",
            _lines(
                [m[0] for m in monthly],
                {
                    "issues opened": [m[1] for m in monthly],
                    "issues closed": [m[2] for m in monthly],
                    "PRs opened": [m[3] for m in monthly],
                    "PRs merged": [m[4] for m in monthly],
                },
                y_title="issues / PRs (count per month)",
            ),
            _span(monthly),
        ),
        _section(
            "Time to close an issue",
            *_distribution(
                hours["time_to_close"],
                "time from opening to close",
                ("closed issue", "closed issues"),
            ),
        ),
        _section(
            "Time to the first response on an issue",
            *_distribution(
                hours["time_to_first_response"],
                "time from opening to the first response",
                ("answered issue", "answered issues"),
            ),
        ),
        _section(
            "Pull request review latency (time to the first review)",
            *_distribution(
                hours["time_to_first_review"],
                "time from opening to the first review",
                ("reviewed pull request", "reviewed pull requests"),
            ),
        ),
        _section(
            "Open pull requests awaiting review (oldest first)",
            *_items(
                report,
                "open_prs_awaiting_review",
                ("open pull request awaiting review", "open pull requests awaiting review"),
                con,
                hosts,
                "SELECT repo, url, handle, title, author, CAST(created_at AS DATE) AS opened, "
                'days_waiting AS "days waiting" FROM open_prs_awaiting_review '
                f"LIMIT {ITEMS_LISTED}",
            ),
        ),
        _section(
            "Open issues idle for 90 days or more (longest first)",
            *_items(
                report,
                "stale_issues",
                ("open issue idle for 90 days or more", "open issues idle for 90 days or more"),
                con,
                hosts,
                "SELECT repo, url, handle, title, author, CAST(updated_at AS DATE) AS "
                '"last activity", days_idle AS "days idle" FROM stale_issues '
                f"LIMIT {ITEMS_LISTED}",
            ),
        ),
        _section(
            "Top reviewers",
            *_table(
                report,
                "top_reviewers",
                ("reviewer, counted per repository", "reviewers, counted per repository"),
                con,
                "SELECT repo, author, reviews, approvals, "
                'changes_requested AS "changes requested" '
                f"FROM top_reviewers ORDER BY reviews DESC, repo, author LIMIT {PEOPLE_LISTED}",
            ),
        ),
        _section(
            "Top commenters",
            *_table(
                report,
                "top_commenters",
                ("commenter, counted per repository", "commenters, counted per repository"),
                con,
                "SELECT repo, author, comments, threads FROM top_commenters "
                f"ORDER BY comments DESC, repo, author LIMIT {PEOPLE_LISTED}",
            ),
        ),
    ]
    facts = "".join(
        f"<div class=fact><b>{n:,}</b><span>{html.escape(k.replace('_', ' '))}</span></div>"
        for k, n in report.facts.items()
    )
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = ", ".join(repos[:3]) + (f" and {len(repos) - 3} more" if len(repos) > 3 else "")
    report.html = f"""<!doctype html>
<html lang=en><head><meta charset=utf-8>
<meta name=viewport content="width=device-width, initial-scale=1">
<title>ghindex report: {html.escape(title)}</title>
<style>{STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<p class=note>{len(repos)} repositories · made {made} by ghindex from the snapshot</p>
<div class=facts>{facts}</div>
{"".join(sections)}
</body></html>
"""
    return report


def _section(title: str, body: str, note: str = "") -> str:
    extra = f"<p class=note>{html.escape(note)}</p>" if note else ""
    return f"<h2>{html.escape(title)}</h2>{extra}{body}"


def _hours(con, sql: str) -> list[float]:
    return [v for (v,) in con.execute(sql).fetchall() if v is not None]


def _distribution(values: Sequence[float], what: str, noun: tuple[str, str]) -> tuple[str, str]:
    """A histogram of durations in hours, and their median in words with its n.
    `what` names the duration (the x-axis), `noun` what was timed, singular and plural."""
    return _histogram(values, what, noun[1]), median_note(values, noun)


def median_note(values: Sequence[float], noun: tuple[str, str]) -> str:
    """'median 3.2 days (n = 149)'; below FEW durations it also says they are few."""
    if not values:
        return f"no median yet (n = 0): no {noun[1]}"
    value = statistics.median(values)
    said = f"{value:.1f} hours" if value < 48 else f"{value / 24:.1f} days"
    note = f"median {said} (n = {len(values):,})"
    if len(values) < FEW:
        note += f": from only {_count(len(values), noun)}, too few to go by"
    return note


def _count(n: int, noun: tuple[str, str]) -> str:
    return f"{n:,} {noun[0] if n == 1 else noun[1]}"


def _span(monthly: Sequence[Sequence[Any]]) -> str:
    if not monthly:
        return ""
    months = _count(len(monthly), ("month", "months"))
    return f"{months}, {monthly[0][0]} to {monthly[-1][0]}, quiet ones at zero"


def _histogram(values: Sequence[float], what: str, nouns: str) -> str:
    counts = [0] * len(BUCKETS)
    for value in values:
        counts[next(i for i, (_, limit) in enumerate(BUCKETS) if value < limit)] += 1
    if not values:
        return "<p class=note>No data yet.</p>"
    top = max(counts) or 1
    step = (WIDTH - LEFT - PAD) / len(BUCKETS)
    base = HEIGHT - PAD
    bars = [f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - PAD}" y2="{base}" stroke="#999"/>']
    for i, ((label, _), count) in enumerate(zip(BUCKETS, counts, strict=True)):
        h = (HEIGHT - 2 * PAD) * count / top
        x = LEFT + i * step
        y = HEIGHT - PAD - h
        bars.append(
            f'<rect x="{x + 6:.1f}" y="{y:.1f}" width="{step - 12:.1f}" height="{h:.1f}" '
            f'fill="{COLOURS[0]}"><title>{label}: {count}</title></rect>'
            f'<text x="{x + step / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">{count}</text>'
            f'<text x="{x + step / 2:.1f}" y="{HEIGHT - PAD + 16}" text-anchor="middle">'
            f"{html.escape(label)}</text>"
        )
    bars.append(_axis_titles(f"{what} (duration, hours to years)", f"{nouns} (count)"))
    return _svg("".join(bars), f"histogram of {len(values)} durations")


def ticks(top: float) -> list[int]:
    """Four to six round values from 0 up to at least `top`, for a count axis: steps
    of 1, 2 or 5 times a power of ten."""
    power = 1
    while True:
        for factor in (1, 2, 5):
            step = power * factor
            above = math.ceil(top / step)
            if above <= 5:
                return [step * i for i in range(max(above, 3) + 1)]
        power *= 10


def month_ticks(labels: Sequence[str]) -> list[int]:
    """Which of the months (`YYYY-MM`, consecutive) get a label on the x-axis: those on
    a round step (every 1, 2, 3 or 6 months, or 1, 2 or 5 times 12 times a power of
    ten), the smallest step that labels at most ten. So at least four are labelled once
    the span is four months or more."""
    first = int(labels[0][:4]) * 12 + int(labels[0][5:7]) - 1 if labels else 0
    steps = [1, 2, 3, 6]
    power = 1
    while True:
        for step in steps:
            chosen = [i for i in range(len(labels)) if (first + i) % step == 0]
            if len(chosen) <= 10:
                return chosen
        steps, power = [12 * power * f for f in (1, 2, 5)], power * 10


def _lines(labels: Sequence[str], series: dict[str, Sequence[int]], y_title: str) -> str:
    """Counts per month as lines, on a y-axis of round ticks and an x-axis of months
    labelled on a round step."""
    if not labels:
        return "<p class=note>No data yet.</p>"
    axis = ticks(max([max(v) for v in series.values() if v] + [0]))
    last = len(labels) - 1

    def x(i: int) -> float:  # a single period sits at the left edge
        return LEFT + (WIDTH - LEFT - PAD) * i / (last or 1)

    def y(value: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / axis[-1]

    parts = []
    for value in axis:
        parts.append(
            f'<line x1="{LEFT}" y1="{y(value):.1f}" x2="{WIDTH - PAD}" y2="{y(value):.1f}" '
            f'stroke="{"#999" if value == 0 else "#e5e7eb"}"/>'
            f'<text class="y-tick" x="{LEFT - 6}" y="{y(value) + 4:.1f}" '
            f'text-anchor="end">{value:,}</text>'
        )
    for n, (name, values) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        name = html.escape(name)
        if last:
            points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
                f"<title>{name}</title></polyline>"
            )
        else:  # one period: a dot, as a line needs two
            parts.append(
                f'<circle cx="{x(0):.1f}" cy="{y(values[0]):.1f}" r="4" '
                f'fill="{colour}"><title>{name}</title></circle>'
            )
        left = LEFT + n * 140
        parts.append(
            f'<rect x="{left}" y="8" width="10" height="10" fill="{colour}"/>'
            f'<text x="{left + 14}" y="17">{name}</text>'
        )
    for i in month_ticks(labels):
        parts.append(
            f'<line x1="{x(i):.1f}" y1="{HEIGHT - PAD}" x2="{x(i):.1f}" '
            f'y2="{HEIGHT - PAD + 4}" stroke="#999"/>'
            f'<text class="x-tick" x="{x(i):.1f}" y="{HEIGHT - PAD + 16}" '
            f'text-anchor="middle">{html.escape(labels[i])}</text>'
        )
    parts.append(_axis_titles("month (YYYY-MM)", y_title))
    return _svg("".join(parts), "monthly counts")


def _axis_titles(x_title: str, y_title: str) -> str:
    """The x-axis' title under its labels, the y-axis' turned up along its left edge."""
    middle = (HEIGHT - PAD + PAD) / 2
    return (
        f'<text class="axis-title x-title" x="{(LEFT + WIDTH - PAD) / 2:.1f}" '
        f'y="{HEIGHT - 6}" text-anchor="middle">{html.escape(x_title)}</text>'
        f'<text class="axis-title y-title" x="14" y="{middle:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {middle:.1f})">{html.escape(y_title)}</text>'
    )


def _svg(body: str, label: str) -> str:
    return (
        f'<svg role="img" aria-label="{html.escape(label)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="100%">{body}</svg>'
    )


def _table(report: Report, name: str, noun: tuple[str, str], con, sql: str) -> tuple[str, str]:
    """A table of the first rows of view `name` that `sql` selects, and a note of how
    many of the view's rows it lists (`noun`: what a row is, singular and plural)."""
    cursor = con.execute(sql)
    columns = [d[0] for d in cursor.description]
    rows = [[cell(v) for v in row] for row in cursor.fetchall()]
    report.tables[name] = len(rows)
    return _grid(columns, rows), _listed(report, name, noun, con)


def _listed(report: Report, name: str, noun: tuple[str, str], con) -> str:
    """'15 of 47 …' when the list of view `name` was cut, 'all 3 …' when it was not."""
    (total,) = con.execute(f"SELECT count(*) FROM {name}").fetchone()
    report.totals[name] = total
    shown = report.tables[name]
    if shown < total:
        return f"{shown:,} of {_count(total, noun)}"
    return f"all {_count(total, noun)}" if total > 1 else _count(total, noun)


def _items(
    report: Report, name: str, noun: tuple[str, str], con, hosts: dict[str, str | None], sql: str
) -> tuple[str, str]:
    """A table of issues or pull requests whose handles link to their pages, and a note
    of how many of view `name`'s rows it lists. `sql` selects repo and url first (used
    for the link, not shown), then the handle."""
    cursor = con.execute(sql)
    columns = [d[0] for d in cursor.description][2:]
    rows = []
    for repo, url, handle, *rest in cursor.fetchall():
        target = _link(url, hosts.get(repo))
        shown = cell(handle)
        if target:
            shown = f'<a href="{html.escape(target)}">{shown}</a>'
            report.links += 1
        rows.append([shown, *(cell(v) for v in rest)])
    report.tables[name] = len(rows)
    return _grid(columns, rows, kind="items"), _listed(report, name, noun, con)


def _link(url: str | None, own_host: str | None) -> str | None:
    """`url` when it is safe to link: http(s) to github.com or the host of the item's own
    repository (GitHub Enterprise Server); None for anything else (javascript:, data:,
    another site)."""
    host = _host(url)
    if not host or urlsplit(url).scheme.lower() not in LINK_SCHEMES:
        return None
    return url if host in (GITHUB_HOST, own_host) else None


def _host(url: str | None) -> str | None:
    """The host name of a URL (lower case); None when it has none or does not parse."""
    try:
        return urlsplit(url).hostname if url else None
    except ValueError:
        return None


def cell(value: object) -> str:
    """A value from the state as the text of a table cell: HTML-escaped (a title's
    `<img>` is text, not an image) and with what renders as nothing shown as escapes
    (`vocabulary/hidden.py`)."""
    return html.escape(hidden.shown(str(value)))


def _grid(columns: Sequence[str], rows: Sequence[Sequence[str]], kind: str = "people") -> str:
    """A table of cells already escaped; `kind` is its class (items or people)."""
    if not rows:
        return "<p class=note>Nothing here.</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{v}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table class={kind}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
