"""After `ghindex demo` (issue #31): a build that fails before storing anything leaves
the demo's commands working, its error names the option to use, and the demo can be
published as typed while a refused publish creates no store. WORKDIR/demo here is a
small built workdir standing in for the demo's (commands find it the same way)."""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings

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
def test_a_clone_whose_origin_is_a_local_path_is_told_to_pass_repo(after_demo, run, isolated):
    upstream = isolated / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", str(upstream)], check=True)
    clone = a_clone_without_origin(isolated / "project")
    subprocess.run(["git", "-C", str(clone), "remote", "add", "origin", str(upstream)], check=True)

    failed = run("build", "--git", str(clone))

    assert failed.exit_code == 1
    assert failed.stderr == (
        f"Error: cannot tell which repository {clone} belongs to from its remote URL "
        f"{upstream}, which is no GitHub address: give the repository with --repo owner/name\n"
    )
    found = run("sql", "SELECT count(*) AS n FROM issues", "--json")
    assert found.exit_code == 0, found.output
    assert READING_DEMO in found.stderr
    assert json.loads(found.stdout)["rows"] == [{"n": 4}]


@pytest.mark.slow
def test_a_failed_first_fetch_creates_nothing_and_leaves_the_demo_answering(
    after_demo, run, github
):
    failed = run("fetch", "--repo", "octo/nope")

    assert failed.exit_code == 1
    assert "octo/nope not found" in failed.stderr
    assert sorted(p.name for p in after_demo.iterdir()) == ["demo"]
    found = run("search", "topic", "--mode", "sparse", "--json")
    assert found.exit_code == 0, found.output
    assert READING_DEMO in found.stderr


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
    assert refused.stderr == (
        f"Error: nothing to publish in {isolated / 'work'}: run `ghindex build` first\n"
    )
    assert sorted(p.name for p in isolated.iterdir()) == []


@pytest.mark.parametrize("body", [b"[]", b"{not json", b"\xff\xfe"])
def test_a_publish_of_a_damaged_manifest_is_one_line_and_creates_no_store(run, isolated, body):
    (isolated / "work").mkdir()
    (isolated / "work" / "manifest.json").write_bytes(body)  # the one local manifest reader
    store = isolated / "store"

    refused = run("publish", "--store", str(store))

    assert refused.exit_code == 1
    assert len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "manifest.json is not" in refused.stderr and "ghindex build" in refused.stderr
    assert not store.exists()


@pytest.mark.slow
@pytest.mark.parametrize("form", ["path", "file-url"])
def test_the_python_api_opens_a_directory_store_and_the_demo(after_demo, run, isolated, form):
    import ghindex.api as gh

    store = isolated / "my store"  # a file:// URL spells the space %20
    assert run("publish", "--store", str(store)).exit_code == 0
    location = str(store) if form == "path" else store.as_uri()

    from_store = gh.open(location)
    with pytest.warns(gh.DemoFallback):
        from_demo = gh.open(after_demo)  # `.ghindex` right after the demo

    assert [h.entity for h in from_store.scan(k=10)] == [h.entity for h in from_demo.scan(k=10)]
    assert len(from_demo.scan(k=10)) == 4
    assert not (isolated / ".ghindex").exists()  # the store's copy is in the user's cache


@pytest.mark.slow
@pytest.mark.parametrize("form", ["work", "work/demo", "absolute"])
def test_the_python_api_opens_the_demo_by_its_workdir_or_its_own_directory(
    after_demo, isolated, form
):
    import ghindex.api as gh

    location = after_demo if form == "absolute" else form  # relative to the working directory

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        opened = gh.open(location)

    assert len(opened.scan(k=10)) == 4
    assert opened.root.resolve() == after_demo / "demo"
    # the workdir's own data was meant: reading the demo instead is said, once, as the CLI
    # says it; opening the demo's own directory is what was asked and says nothing
    fallbacks = [w for w in said if issubclass(w.category, gh.DemoFallback)]
    assert len(fallbacks) == (0 if form == "work/demo" else 1)
    if fallbacks:
        text = str(fallbacks[0].message)
        assert text.startswith(READING_DEMO) and "\n" not in text
        assert "ghindex build" in text
        assert fallbacks[0].filename == __file__  # points at the caller's line


@pytest.mark.slow
def test_the_python_api_opens_a_bucket_store_as_the_cli_does(after_demo, run, s3_store_url):
    import ghindex.api as gh

    assert run("publish", "--store", s3_store_url).exit_code == 0

    assert len(gh.open(s3_store_url).scan(k=10)) == 4


def test_the_python_api_advises_on_a_directory_holding_nothing(isolated):
    import ghindex.api as gh
    from ghindex.errors import GhindexError

    (isolated / "empty").mkdir()
    with pytest.raises(GhindexError) as refused:
        gh.open("empty")
    assert str(refused.value) == (
        "no snapshot in empty: run `ghindex demo` for the sample, `ghindex fetch` and "
        "`ghindex build` for your repositories, or `ghindex pull --store URL`"
    )


def test_the_python_api_names_a_missing_store_as_typed(isolated):
    import ghindex.api as gh
    from ghindex.errors import GhindexError

    missing = (isolated / "no-such-store").as_uri()
    with pytest.raises(GhindexError) as refused:
        gh.open(missing)
    assert str(refused.value) == (
        f"nothing at {missing}: check the path (a snapshot, a workdir or a store directory)"
    )
