"""After `ghindex demo` (issue #31): a build that fails before storing anything leaves
the demo's commands working, its error names the option to use, and the demo can be
published as typed while a refused publish creates no store. WORKDIR/demo here is a
small built workdir standing in for the demo's (commands find it the same way)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from testkit.state import built_workdir

READING_DEMO = "reading the demo snapshot in"


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory):
    return built_workdir(tmp_path_factory.mktemp("demo") / "demo", 4)


@pytest.fixture
def after_demo(isolated, demo_template):
    """WORKDIR (`isolated/work`) holding only the demo's snapshot."""
    work = isolated / "work"
    shutil.copytree(demo_template, work / "demo")
    return work


def a_clone_without_origin(path):
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "README.md").write_text("# project\n")
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    return path


@pytest.mark.slow
def test_a_failed_first_build_names_repo_and_leaves_the_demo_answering(after_demo, run, isolated):
    clone = a_clone_without_origin(isolated / "project")

    failed = run("build", "--git", str(clone))

    assert failed.exit_code == 1
    assert (after_demo / "state.duckdb").exists()  # what used to hide the demo
    assert len(failed.stderr.splitlines()) == 1, failed.stderr
    assert "--repo owner/name" in failed.stderr
    found = run("search", "topic", "--mode", "sparse", "--json")
    assert found.exit_code == 0, found.output
    assert READING_DEMO in found.stderr
    assert json.loads(found.stdout)["results"]
    counted = run("sql", "SELECT count(*) AS n FROM issues", "--json")
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["rows"] == [{"n": 4}]
    status = run("status")
    assert status.exit_code == 0, status.output
    assert "ghindex demo" not in status.stdout


@pytest.mark.slow
def test_the_demo_publishes_as_typed_and_pulls_back(after_demo, run, isolated):
    store = isolated / "store"

    published = run("publish", "--store", str(store))

    assert published.exit_code == 0, published.output
    assert READING_DEMO in published.stderr
    pulled = run("pull", "--store", str(store), "--dest", str(isolated / "copy"))
    assert pulled.exit_code == 0, pulled.output
    found = run("search", "topic", "--mode", "sparse", "--snapshot", str(isolated / "copy"))
    assert found.exit_code == 0 and "octo/hello#" in found.stdout, found.output


def test_a_refused_publish_creates_no_store(run, isolated):
    store = isolated / "nothing-yet"

    refused = run("publish", "--store", str(store))

    assert refused.exit_code == 1
    assert "nothing to publish" in refused.stderr
    assert not store.exists()


@pytest.mark.slow
@pytest.mark.parametrize("form", ["path", "file-url"])
def test_the_python_api_opens_a_directory_store_and_the_demo(after_demo, run, isolated, form):
    import ghindex.api as gh

    store = isolated / "store"
    assert run("publish", "--store", str(store)).exit_code == 0
    location = str(store) if form == "path" else store.as_uri()

    from_store = gh.open(location)
    from_demo = gh.open(after_demo)  # `.ghindex` right after the demo

    assert [h.entity for h in from_store.scan(k=10)] == [h.entity for h in from_demo.scan(k=10)]
    assert len(from_demo.scan(k=10)) == 4
    assert not (isolated / ".ghindex").exists()  # the store's copy is in the user's cache


def test_the_python_api_names_a_missing_store_as_typed(isolated):
    import ghindex.api as gh
    from ghindex.errors import GhindexError

    missing = (isolated / "no-such-store").as_uri()
    with pytest.raises(GhindexError) as refused:
        gh.open(missing)
    assert str(refused.value) == (
        f"nothing at {missing}: check the path (a snapshot, a workdir or a store directory)"
    )
