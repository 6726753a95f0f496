"""Progress: what the library counts (rows embedded, bytes moved, items fetched, waits),
how the CLI shows it on stderr (a status line every GHINDEX_PROGRESS_SECONDS when stderr
is not a terminal, a live bar when it is), and that stdout keeps only the data."""

from __future__ import annotations

import io
import json
import re
import shutil
import time
import types

import pytest
from rich.console import Console

from ghindex.cli.progress import Bars, StatusLines
from ghindex.config import DEFAULT_MODEL
from ghindex.github.client import GraphQLClient
from ghindex.index.build import build
from ghindex.index.merge import merge
from ghindex.progress import BYTES, Progress
from ghindex.snapshot import Store, publish, pull
from testkit.embedders import HashEmbedder, hash_factory
from testkit.github_server import issue_node, parse_time, pull_request_node
from testkit.state import built_workdir, settings_for, store_issues


class Recorder(Progress):
    """Keeps every task and note, on a clock that stands still."""

    def __init__(self) -> None:
        super().__init__(clock=lambda: 0.0)
        self.tasks = []
        self.notes = []

    def opened(self, task) -> None:
        self.tasks.append(task)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def named(self, name: str):
        return [task for task in self.tasks if task.name == name]


@pytest.fixture
def still_clock(monkeypatch):
    """Time stands still for every Progress the commands make: no rates, exact lines."""
    monkeypatch.setattr("ghindex.progress.time", types.SimpleNamespace(monotonic=lambda: 0.0))


def expected_line(name, n, *, unit, verb):
    """`name`'s line with `n` of `n` done, as the library words it."""
    task = Progress(clock=lambda: 0.0).task(name, n, unit=unit, verb=verb)
    task.advance(n)
    return task.line()


# ------------------------------------------------------------------- the lines


WAIT = "waiting 12m 31s until the reset at 14:05:00 UTC"


@pytest.mark.parametrize(
    ("name", "total", "unit", "verb", "done", "seconds", "expected"),
    [
        (
            "build",
            5686,
            "rows",
            "embedded",
            1200,
            30,
            "build: 1,200 / 5,686 rows embedded, 40 rows/s, about 1m 53s left",
        ),
        (
            "publish",
            45_600_000,
            BYTES,
            "uploaded",
            12_000_000,
            4,
            "publish: 12.0 MB / 45.6 MB uploaded, 3.0 MB/s, about 12s left",
        ),
        ("octo/hello", None, "issues", "", 100, 4, "octo/hello: 100 issues, 25 issues/s"),
        ("octo/hello", None, "issues", "", 1, 0.5, "octo/hello: 1 issue"),  # no rate yet
        ("rate limit", None, None, WAIT, 0, 130, f"rate limit: {WAIT}, 2m 10s so far"),
        (
            "pull",
            999,
            BYTES,
            "downloaded",
            999,
            3,
            "pull: 999 bytes / 999 bytes downloaded, 333 bytes/s",
        ),  # done: no time left
    ],
)
def test_a_task_line_says_counts_rate_and_time_left(
    name, total, unit, verb, done, seconds, expected
):
    now = [0.0]
    task = Progress(clock=lambda: now[0]).task(name, total, unit=unit, verb=verb)
    if done:
        task.advance(done)
    now[0] = seconds

    assert task.line() == expected


def test_the_default_progress_counts_and_hands_notes_to_say():
    said = []
    progress = Progress(said.append)

    with progress.task("merge", 3, unit="shards", verb="copied") as task:
        task.advance(detail="10 rows")
        progress.note("copying shard 2")
        task.advance(2, detail="30 rows")

    assert (task.done, task.total, task.detail, task.closed) == (3, 3, "30 rows", True)
    assert said == ["copying shard 2"]


# -------------------------------------------------------- status lines (no terminal)


def test_status_lines_at_every_step_join_the_open_tasks_and_print_notes():
    lines = []
    shown = StatusLines(0, write=lines.append, clock=lambda: 0.0)

    shown.note("loading")
    with shown.task("fetch", 2, unit="repositories", verb="done") as repos:
        with shown.task("octo/a", unit="issues") as issues:
            issues.advance(100, detail="1 page")
        repos.advance()

    assert lines == [
        "loading",
        "fetch: 0 / 2 repositories done",
        "fetch: 0 / 2 repositories done; octo/a: 0 issues",
        "fetch: 0 / 2 repositories done; octo/a: 100 issues (1 page)",
        "fetch: 1 / 2 repositories done",
    ]


def test_a_command_shorter_than_the_interval_prints_nothing():
    lines = []
    shown = StatusLines(60, write=lines.append)

    shown.note("loading")
    with shown.task("build", 10, unit="rows", verb="embedded") as task:
        task.advance(10)
    shown.close()

    assert lines == []


@pytest.mark.slow  # waits real time for the ticker
def test_status_lines_tick_while_a_step_runs_and_a_shown_task_gets_its_last_line():
    lines = []
    shown = StatusLines(0.05, write=lines.append, clock=lambda: 0.0)
    task = shown.task("build", 10, unit="rows", verb="embedded")
    deadline = time.monotonic() + 10
    while not lines and time.monotonic() < deadline:
        time.sleep(0.01)
    shown.note("a note while a task runs")
    time.sleep(0.1)
    task.advance(10)
    task.close()
    shown.close()
    count = len(lines)
    time.sleep(0.2)

    done = "build: 10 / 10 rows embedded"  # the task's last line, on close
    assert lines[0] == "build: 0 / 10 rows embedded"  # a tick, with nothing done yet
    assert done in lines
    last = lines.index(done)
    # while the task ran, the lines showed it, not the note; once it closed, a tick
    # before the ticker stopped may show the note (nothing else runs then)
    assert set(lines[: last + 1]) == {lines[0], done}
    assert set(lines[last:]) <= {done, "a note while a task runs"}
    assert len(lines) == count  # nothing after close


def test_a_live_bar_draws_the_same_line_and_notes_above_it():
    out = io.StringIO()
    bars = Bars(Console(file=out, force_terminal=True, width=120))

    bars.note("loading model")
    with bars.task("build", 10, unit="rows", verb="embedded") as task:
        task.advance(3)
        bars.note("halfway")
    bars.close()

    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert text.startswith("… loading model\n")
    assert "build: 3 / 10 rows embedded" in text
    assert "… halfway\n" in text
    assert bars._bars is None  # the live display stopped with its last task


# --------------------------------------------------------------------- fetch


@pytest.fixture
def three_issues(github):
    github.add_repo(
        "octo/hello",
        issues=[issue_node(n) for n in (1, 2, 3)],
        pull_requests=[pull_request_node(n) for n in (4, 5)],
    )
    return github


def test_fetch_json_keeps_stdout_one_document_and_counts_on_stderr(
    three_issues, run, monkeypatch, still_clock
):
    monkeypatch.setenv("GHINDEX_PROGRESS_SECONDS", "0")

    result = run("fetch", "--repo", "octo/hello", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["repos"][0]["issues"] == 3  # the whole of stdout
    repos = "fetch: 0 / 1 repositories done"
    assert result.stderr.splitlines() == [
        "octo/hello: looking up",
        repos,
        f"{repos}; octo/hello: 0 issues",
        f"{repos}; octo/hello: 3 issues (1 page)",
        f"{repos}; octo/hello: 0 pull requests",
        f"{repos}; octo/hello: 2 pull requests (1 page)",
        f"{repos}; octo/hello: 0 discussions",
        f"{repos}; octo/hello: 0 discussions (1 page)",
        f"{repos}; octo/hello: 0 releases",
        f"{repos}; octo/hello: 0 releases (1 page)",
        "octo/hello: done",
        "fetch: 1 / 1 repositories done",
    ]


def test_a_quick_fetch_prints_no_progress_and_off_prints_none(three_issues, run, monkeypatch):
    quick = run("fetch", "--repo", "octo/hello")  # default: a line every 10 s
    monkeypatch.setenv("GHINDEX_PROGRESS_SECONDS", "off")
    off = run("fetch", "--repo", "octo/hello", "--full")

    assert (quick.exit_code, off.exit_code) == (0, 0)
    assert (quick.stderr, off.stderr) == ("", "")


def test_a_bad_progress_interval_is_one_line(three_issues, run, monkeypatch):
    monkeypatch.setenv("GHINDEX_PROGRESS_SECONDS", "soon")

    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 1
    assert result.stderr == (
        "Error: GHINDEX_PROGRESS_SECONDS must be a number of seconds (0 or more) or off, "
        "not 'soon'\n"
    )


def test_a_rate_limit_wait_is_a_task_naming_the_reset(three_issues, monkeypatch):
    monkeypatch.setenv("GHINDEX_HTTP_RETRIES", "0")
    three_issues.spend_rate_limit = True
    three_issues.rate_limit.update(remaining=1, resetAt="2030-01-01T14:05:00Z")
    reset = parse_time("2030-01-01T14:05:00Z").timestamp()
    recorder = Recorder()
    during = []

    def sleep(seconds):
        during.append([task.line() for task in recorder.tasks if not task.closed])
        three_issues.rate_limit["resetAt"] = "2000-01-01T00:00:00Z"

    variables = {"owner": "octo", "name": "hello"}
    with GraphQLClient(
        three_issues.url,
        three_issues.token,
        sleep=sleep,
        clock=lambda: reset - 750,
        progress=recorder,
    ) as github:
        github.execute("repository", variables)
        github.execute("repository", variables)

    assert during == [["rate limit: waiting 12m 31s until the reset at 14:05:00 UTC, 0s so far"]]
    assert [task.closed for task in recorder.tasks] == [True]


# ------------------------------------------------------------- build, publish, pull


def test_build_counts_every_row_it_embeds_and_none_it_finds_cached(isolated):
    settings = settings_for(isolated / "w")
    store_issues(settings, [issue_node(n, body=f"Body of issue {n}.") for n in (1, 2, 3)])
    first, second = Recorder(), Recorder()
    embedder = HashEmbedder()  # counting needs no meaning: no model is loaded

    report = build(settings, progress=first, embedder_factory=hash_factory(embedder))
    again = build(settings, progress=second, embedder_factory=hash_factory(embedder))

    [embedding] = first.named("build")
    assert (embedding.unit, embedding.total, embedding.done) == ("rows", 3, 3)
    assert report.embedded == 3 and embedding.closed
    assert (again.embedded, second.named("build")) == (0, [])
    assert sum(embedder.calls) == 3  # the second build embedded nothing


@pytest.mark.slow  # embeds for real
def test_build_json_keeps_stdout_one_document_and_says_rows_embedded(
    isolated, run, monkeypatch, still_clock
):
    store_issues(settings_for(isolated / "work"), [issue_node(n) for n in (1, 2)])
    monkeypatch.setenv("GHINDEX_PROGRESS_SECONDS", "0")

    result = run("build", "--json")

    assert result.exit_code == 0, result.output
    embedded = json.loads(result.stdout)["embedded"]
    lines = [line for line in result.stderr.splitlines() if line.startswith("build:")]
    assert embedded == 2
    # int8 encodes a text at a time (#49), so each row can be a step of its own
    assert lines[0] == "build: 0 / 2 rows embedded"
    assert lines[-1] == "build: 2 / 2 rows embedded"
    assert set(lines) <= {f"build: {n} / 2 rows embedded" for n in (0, 1, 2)}


@pytest.fixture(scope="module")
def small_build(tmp_path_factory):
    return built_workdir(tmp_path_factory.mktemp("progress") / "work", 5)


@pytest.mark.slow  # a built workdir
def test_publish_and_pull_count_the_bytes_they_move(small_build, isolated):
    store = Store(str(isolated / "store"))
    sent, got, sent_again = Recorder(), Recorder(), Recorder()

    published = publish(small_build, store, progress=sent)
    pulled = pull(store, isolated / "pulled", progress=got)
    unchanged = publish(small_build, store, progress=sent_again)

    [upload] = sent.named("publish")
    assert (upload.unit, upload.total, upload.done) == (
        BYTES,
        published.bytes_uploaded,
        published.bytes_uploaded,
    )
    assert published.bytes_uploaded > 0 and upload.closed
    [download] = got.named("pull")
    assert (download.total, download.done) == (pulled.bytes_downloaded, pulled.bytes)
    [nothing] = sent_again.named("publish")
    assert (unchanged.bytes_uploaded, nothing.total, nothing.done) == (0, 0, 0)


@pytest.mark.slow  # builds again
def test_a_pull_counts_only_the_bytes_it_downloads(small_build, isolated):
    work = isolated / "work"
    shutil.copytree(small_build, work)
    store = Store(str(isolated / "store"))
    publish(work, store)
    pull(store, isolated / "pulled")
    store_issues(settings_for(work), [issue_node(2, title="Issue 2, edited", body="New words.")])
    build(settings_for(work))
    publish(work, store)
    got = Recorder()

    pulled = pull(store, isolated / "pulled", progress=got)

    [download] = got.named("pull")
    assert 0 < pulled.bytes_downloaded < pulled.bytes
    assert (download.total, download.done) == (pulled.bytes_downloaded, pulled.bytes_downloaded)


@pytest.mark.slow  # builds two shards
def test_merge_counts_the_shards_and_their_rows_and_vectors(isolated):
    shards = [built_workdir(isolated / name, count) for name, count in (("a", 2), ("b", 3))]
    counted = Recorder()

    merged = merge(isolated / "work", shards, DEFAULT_MODEL, progress=counted)

    copied, joined = counted.named("merge")
    assert (copied.done, copied.total, copied.unit) == (2, 2, "shards")
    assert copied.detail == f"{sum(merged.rows.values()):,} rows"
    assert (joined.done, joined.total, joined.detail) == (2, 2, f"{merged.vectors:,} vectors")
    assert merged.vectors == 5 and copied.closed and joined.closed


@pytest.mark.slow  # a built workdir
def test_pull_json_keeps_stdout_one_document_and_says_bytes_downloaded(
    small_build, isolated, run, monkeypatch, still_clock
):
    store = isolated / "store"
    publish(small_build, Store(str(store)))
    monkeypatch.setenv("GHINDEX_PROGRESS_SECONDS", "0")

    result = run("pull", "--store", str(store), "--dest", str(isolated / "pulled"), "--json")

    assert result.exit_code == 0, result.output
    moved = json.loads(result.stdout)["bytes_downloaded"]
    lines = result.stderr.splitlines()
    assert lines[0] == "pull: 0 bytes downloaded"
    assert lines[-1] == expected_line("pull", moved, unit=BYTES, verb="downloaded")
    assert all(line.startswith("pull: ") for line in lines)
