"""`ghindex report`: one self-contained HTML page about a snapshot, for people.

Charts are inline SVG drawn here from the state database's views (no scripts, no
fonts or styles fetched from anywhere), so the file opens offline in any browser
and can be attached to an email or published as a CI artifact.
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from ghindex.state.database import no_state

# Duration buckets for latency histograms, in hours.
BUCKETS = [
    ("< 1 h", 1), ("< 1 day", 24), ("< 1 week", 168), ("< 1 month", 720),
    ("< 3 months", 2160), ("< 1 year", 8760), ("≥ 1 year", float("inf")),
]  # fmt: skip
COLOURS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c"]
WIDTH, HEIGHT, PAD = 720, 240, 40
STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 800px;
       color: #111; padding: 0 1rem }
h1 { font-size: 1.5rem } h2 { font-size: 1.1rem; margin-top: 2rem }
.facts { display: flex; flex-wrap: wrap; gap: 1rem }
.fact { background: #f3f4f6; padding: .6rem 1rem; border-radius: 6px }
.fact b { display: block; font-size: 1.3rem } .fact span { color: #555 }
table { border-collapse: collapse; width: 100%; font-size: 13px }
td, th { border-bottom: 1px solid #ddd; padding: 4px; text-align: left }
svg text { font: 11px system-ui, sans-serif; fill: #333 } .note { color: #555 }
"""


def render(state: Path) -> str:
    if not state.exists():
        raise no_state(state)
    con = duckdb.connect(str(state), read_only=True)
    try:
        return _page(con)
    finally:
        con.close()


def _page(con) -> str:
    repos = [r for (r,) in con.execute("SELECT repo FROM repos ORDER BY 1").fetchall()]
    counts = dict(
        con.execute(
            "SELECT 'issues', count(*) FROM issues UNION ALL "
            "SELECT 'open issues', count(*) FROM issues WHERE state = 'OPEN' UNION ALL "
            "SELECT 'pull requests', count(*) FROM pull_requests UNION ALL "
            "SELECT 'open pull requests', count(*) FROM pull_requests WHERE state = 'OPEN' "
            "UNION ALL SELECT 'comments', count(*) FROM comments UNION ALL "
            "SELECT 'reviews', count(*) FROM reviews"
        ).fetchall()
    )
    monthly = con.execute(
        "SELECT strftime(date_trunc('month', week), '%Y-%m') AS month, sum(issues_opened), "
        "sum(issues_closed), sum(prs_opened), sum(prs_merged) "
        "FROM weekly_activity GROUP BY 1 ORDER BY 1"
    ).fetchall()
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
            ),
        ),
        _section(
            "Time to close an issue",
            *_distribution(_hours(con, "SELECT hours_to_close FROM issue_response_times")),
        ),
        _section(
            "Time to the first response on an issue",
            *_distribution(_hours(con, "SELECT hours_to_first_response FROM issue_response_times")),
        ),
        _section(
            "Pull request review latency (time to the first review)",
            *_distribution(_hours(con, "SELECT hours_to_first_review FROM pr_review_times")),
        ),
        _section(
            "Open pull requests awaiting review (oldest first)",
            _table(
                con,
                "SELECT handle, title, author, CAST(created_at AS DATE) AS opened "
                "FROM open_prs_awaiting_review LIMIT 15",
            ),
        ),
        _section(
            "Top reviewers",
            _table(
                con,
                "SELECT repo, author, reviews, approvals, changes_requested "
                "FROM top_reviewers ORDER BY reviews DESC LIMIT 10",
            ),
        ),
        _section(
            "Top commenters",
            _table(
                con,
                "SELECT repo, author, comments, threads FROM top_commenters "
                "ORDER BY comments DESC LIMIT 10",
            ),
        ),
    ]
    facts = "".join(
        f"<div class=fact><b>{n:,}</b><span>{html.escape(k)}</span></div>"
        for k, n in counts.items()
    )
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = ", ".join(repos[:3]) + (f" and {len(repos) - 3} more" if len(repos) > 3 else "")
    return f"""<!doctype html>
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


def _section(title: str, body: str, note: str = "") -> str:
    extra = f"<p class=note>{html.escape(note)}</p>" if note else ""
    return f"<h2>{html.escape(title)}</h2>{extra}{body}"


def _hours(con, sql: str) -> list[float]:
    return [v for (v,) in con.execute(sql).fetchall() if v is not None]


def _distribution(values: Sequence[float]) -> tuple[str, str]:
    """A histogram of durations in hours, and their median in words."""
    return _histogram(values), _median(values)


def _median(values: Sequence[float]) -> str:
    if not values:
        return "no data yet"
    value = statistics.median(values)
    if value < 48:
        return f"median {value:.1f} hours"
    return f"median {value / 24:.1f} days"


def _histogram(values: Sequence[float]) -> str:
    counts = [0] * len(BUCKETS)
    for value in values:
        counts[next(i for i, (_, limit) in enumerate(BUCKETS) if value < limit)] += 1
    if not values:
        return "<p class=note>No data yet.</p>"
    top = max(counts) or 1
    step = (WIDTH - 2 * PAD) / len(BUCKETS)
    bars = []
    for i, ((label, _), count) in enumerate(zip(BUCKETS, counts, strict=True)):
        h = (HEIGHT - 2 * PAD) * count / top
        x = PAD + i * step
        y = HEIGHT - PAD - h
        bars.append(
            f'<rect x="{x + 6:.1f}" y="{y:.1f}" width="{step - 12:.1f}" height="{h:.1f}" '
            f'fill="{COLOURS[0]}"><title>{label}: {count}</title></rect>'
            f'<text x="{x + step / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">{count}</text>'
            f'<text x="{x + step / 2:.1f}" y="{HEIGHT - PAD + 16}" text-anchor="middle">'
            f"{html.escape(label)}</text>"
        )
    return _svg("".join(bars), f"histogram of {len(values)} durations")


def _lines(labels: Sequence[str], series: dict[str, Sequence[int]]) -> str:
    if not labels:
        return "<p class=note>No data yet.</p>"
    top = max([max(v) for v in series.values() if v] + [1])
    span = max(len(labels) - 1, 1)

    def point(i: int, v: float) -> str:
        x = PAD + (WIDTH - 2 * PAD) * i / span
        y = HEIGHT - PAD - (HEIGHT - 2 * PAD) * v / top
        return f"{x:.1f},{y:.1f}"

    parts = [f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
             'stroke="#999"/>']  # fmt: skip
    for n, (name, values) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        points = " ".join(point(i, v) for i, v in enumerate(values))
        name = html.escape(name)
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
            f"<title>{name}</title></polyline>"
        )
        left = PAD + n * 140
        parts.append(
            f'<rect x="{left}" y="8" width="10" height="10" fill="{colour}"/>'
            f'<text x="{left + 14}" y="17">{name}</text>'
        )
    for i in sorted({0, span // 2, span}):
        parts.append(f'<text x="{point(i, 0).split(",")[0]}" y="{HEIGHT - PAD + 16}" '
                     f'text-anchor="middle">{html.escape(labels[i])}</text>')  # fmt: skip
    parts.append(f'<text x="4" y="{PAD}">{top}</text>')
    return _svg("".join(parts), "monthly counts")


def _svg(body: str, label: str) -> str:
    return (f'<svg role="img" aria-label="{html.escape(label)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'width="100%">{body}</svg>')  # fmt: skip


def _table(con, sql: str) -> str:
    cursor = con.execute(sql)
    rows = cursor.fetchall()
    if not rows:
        return "<p class=note>Nothing here.</p>"
    head = "".join(f"<th>{html.escape(d[0])}</th>" for d in cursor.description)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
