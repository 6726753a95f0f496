"""Builds killed mid-embedding (issue #30), for real: `ghindex build` runs in a child
process whose encoder is slowed down and which writes small cache slices, and is
SIGKILLed once some slices are committed. A rerun embeds only what is missing; a
killed `--full` leaves the previous index serving, with its manifest."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from ghindex.config import DEFAULT_MODEL, FP32
from ghindex.index import staging
from ghindex.index import table as index
from ghindex.index.build import build
from ghindex.vocabulary.layout import local_manifest as read_manifest
from testkit.github_server import issue_node
from testkit.state import settings_for, store_issues

pytestmark = pytest.mark.slow  # the real model, in this process and in the child

# The child: the real encoder, paced so that the parent sees slices land; slices of 8.
CHILD = """
import sys, time
from ghindex.index import build, onnx_encoder

build.EMBED_STEP, build.SLICE_ROWS = 4, 8
real = onnx_encoder.build_encoder


def paced_encoder(*args, **kwargs):
    encoder = real(*args, **kwargs)
    encode = encoder.encode

    def paced(texts, progress=None):
        time.sleep(0.3)
        return encode(texts, progress=progress)

    encoder.encode = paced
    return encoder


onnx_encoder.build_encoder = paced_encoder
from ghindex.cli import cli

cli(sys.argv[1:])
"""


def issues(numbers):
    return [
        issue_node(n, title=f"Issue {n} about topic {n % 5}", body=f"Details of issue {n}. " * 8)
        for n in numbers
    ]


def cached_rows(settings, table):
    db = index.connect(settings.lance_path)
    try:
        return db.open_table(table).count_rows()
    except ValueError:  # not there yet, or its first commit not yet written
        return 0


def kill_while_embedding(settings, args, table, at_least):
    """Run `ghindex ARGS` in a child and SIGKILL it once `table` holds `at_least` rows;
    returns how many it holds then."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    try:
        while cached_rows(settings, table) < at_least:
            assert child.poll() is None, f"the build ended before it was killed: {child.stderr}"
            assert time.monotonic() < deadline, "no cache slice was written in 60 s"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    assert child.returncode == -signal.SIGKILL
    return cached_rows(settings, table)


def built(status):
    """What `status` says of the build (not the folder's size and age, which the
    embedding caches and the clock change)."""
    return {k: v for k, v in status.items() if k not in ("total_bytes", "age_seconds")}


def cli_json(run, *args):
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def found(run, query):
    return [hit["handle"] for hit in cli_json(run, "search", query, "-k", "50")["results"]]


def test_a_rerun_after_a_killed_build_embeds_only_what_the_kill_left(tmp_path, run):
    settings = settings_for(tmp_path / "work")
    store_issues(settings, issues(range(1, 25)))
    precision = FP32
    table = index.cache_table(DEFAULT_MODEL, precision)

    cached = kill_while_embedding(settings, ["build", "--precision", precision], table, 16)
    assert cached % 8 == 0  # whole slices, each one commit
    assert read_manifest(settings.manifest_path) is None  # no index yet

    report = build(settings, precision=precision)

    assert 0 < cached < report.chunks
    assert (report.from_cache, report.embedded) == (cached, report.chunks - cached)
    assert cached_rows(settings, table) == report.chunks
    assert "octo/hello#7" in found(run, "Issue 7 about topic 2")


def test_a_killed_full_build_leaves_the_previous_index_serving(tmp_path, run):
    settings = settings_for(tmp_path / "work")
    store_issues(settings, issues(range(1, 25)))
    before = build(settings, precision="int8")
    manifest = read_manifest(settings.manifest_path)
    status = cli_json(run, "status")
    store_issues(settings, [issue_node(99, title="Zebra stampede", body="Zebras everywhere. " * 8)])
    table = index.cache_table(DEFAULT_MODEL, FP32)

    args = ["build", "--full", "--precision", FP32]
    cached = kill_while_embedding(settings, args, table, 8)

    assert read_manifest(settings.manifest_path) == manifest
    assert built(cli_json(run, "status")) == built(status)
    assert index.index_precision(index.connect(settings.lance_path)) == "int8"
    assert "octo/hello#99" not in found(run, "zebra stampede")
    assert "octo/hello#7" in found(run, "Issue 7 about topic 2")
    assert cli_json(run, "show", "octo/hello#7")["handle"] == "octo/hello#7"

    report = build(settings, full=True, precision=FP32)

    assert (report.from_cache, report.embedded) == (cached, report.chunks - cached)
    assert report.chunks == before.chunks + 1
    now = read_manifest(settings.manifest_path)
    assert now["build_id"] != manifest["build_id"]
    assert now["model"]["precision"] == FP32
    status = cli_json(run, "status")
    assert (status["model"], status["counts"]) == (now["model"], now["counts"])
    assert status["counts"]["chunks"] == report.chunks
    assert index.index_precision(index.connect(settings.lance_path)) == FP32
    assert found(run, "zebra stampede")[0] == "octo/hello#99"
    assert not staging.path_in(settings.lance_path).exists()


def test_a_build_removes_what_a_killed_full_build_staged(tmp_path):
    settings = settings_for(tmp_path / "work")
    store_issues(settings, issues(range(1, 4)))
    build(settings, precision=FP32)
    staged = staging.begin(settings.lance_path)
    (staged / "half-written").write_text("x")

    report = build(settings, precision=FP32)

    assert not staged.exists()
    assert report.embedded == 0
