"""A disk that cannot take a write (full, read-only, not permitted) is said so, in one
line naming where, and what was stored before is kept."""

from __future__ import annotations

import errno
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ghindex.errors import disk_problem


def test_a_real_full_device_is_named():
    with pytest.raises(OSError) as full, open("/dev/full", "wb") as device:
        device.write(b"x" * 10)
        device.flush()

    said = disk_problem(full.value, "/dev/full")

    assert said == (
        "no space left on the device while writing /dev/full: free some space (or point "
        "GHINDEX_WORKDIR elsewhere) and run again; what was stored before is kept"
    )


@given(
    words=st.sampled_from(
        ["No space left on device", "Disk quota exceeded", "Read-only file system"]
    ),
    library=st.sampled_from(
        [
            'IO Error: Could not write file "/w/.ghindex/state.duckdb.wal": {} (os error 28)',
            "LanceError(IO): Generic LocalFileSystem error: Unable to write '/w/lance/x.lance' "
            "({}), /root/.cargo/registry/src/lance-io-0.1/src/local.rs:120:31",
            "Generic error: {}",
        ]
    ),
)
def test_a_library_passing_the_disk_on_in_its_words_is_named_in_one_line(words, library):
    said = disk_problem(RuntimeError(library.format(words)))

    assert said is not None and "\n" not in said and ".rs:" not in said
    assert said.endswith("and run again; what was stored before is kept")


def test_other_failures_are_not_disk_problems():
    assert disk_problem(ValueError("bad value")) is None
    assert disk_problem(OSError(errno.ECONNRESET, "Connection reset by peer")) is None


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB file system of its own (tmpfs), where mounting is allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip("this machine cannot mount a small file system for the test")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_fetch_onto_a_full_disk_says_so_and_keeps_the_state(
    github, run, isolated, small_disk, monkeypatch
):
    from testkit.github_server import issue_node

    github.add_repo("octo/hello", issues=[issue_node(n, body="x" * 50_000) for n in range(1, 200)])
    monkeypatch.setenv("GHINDEX_WORKDIR", str(small_disk / "work"))

    result = run("fetch", "--repo", "octo/hello")

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("Error: ")]
    assert "no space left on the device" in line, line
