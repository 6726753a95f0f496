"""A cold search: LanceDB's REST client is not imported, and the query encoder loads
while the index's libraries import (`index/deferred.py`, `query/encoder_ahead.py`)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from ghindex.config import DEFAULT_MODEL, FP32, INT8
from ghindex.errors import IndexUnusable
from ghindex.index import deferred
from ghindex.index.carried_encoder import query_encoder
from ghindex.index.onnx_encoder import INT8_FILE, export_dir
from ghindex.query import encoder_ahead
from ghindex.query.snapshot import Snapshot
from testkit.process import cli_in_fresh_python, fresh_python
from testkit.state import built_workdir

PACKAGE_INIT = """
import pathlib
RAN = pathlib.Path(__file__).with_name("ran")
RAN.write_text(RAN.read_text() + "x" if RAN.exists() else "x")
GREETING = "hello"
"""


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package on disk whose `__init__` counts its runs in the file `ran`."""
    root = tmp_path / "site" / "slowpkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text(PACKAGE_INIT)
    (root / "models.py").write_text("MODEL = 'light'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield root
    for name in [n for n in sys.modules if n == "slowpkg" or n.startswith("slowpkg.")]:
        del sys.modules[name]


def test_a_deferred_package_runs_its_init_only_when_one_of_its_names_is_asked(package):
    assert deferred.defer_package_init("slowpkg") is True
    from slowpkg.models import MODEL

    assert MODEL == "light" and not (package / "ran").exists()

    import slowpkg

    assert slowpkg.GREETING == "hello"  # the first name asked runs the package's __init__
    assert slowpkg.models.MODEL == "light"
    assert (package / "ran").read_text() == "x"
    with pytest.raises(AttributeError):
        slowpkg.no_such_name  # noqa: B018 (after __init__, a missing name is missing)
    assert (package / "ran").read_text() == "x"


def test_only_a_package_not_yet_imported_is_deferred(package):
    import slowpkg  # noqa: F401

    assert deferred.defer_package_init("slowpkg") is False  # imported already
    assert deferred.defer_package_init("no_such_package_anywhere") is False
    assert deferred.defer_package_init("ghindex.index.deferred") is False  # imported already
    assert deferred.defer_package_init("slowpkg.models") is False  # a module, not a package


@pytest.mark.slow
def test_lancedb_imports_without_the_rest_client_which_still_answers():
    script = (
        "import sys, ghindex.cli, lancedb\n"
        "print('lance_namespace_urllib3_client.api' in sys.modules)\n"
        "from lance_namespace_urllib3_client import ApiClient, __version__\n"
        "print(ApiClient.__name__, 'lance_namespace_urllib3_client.api' in sys.modules)\n"
    )
    assert fresh_python(script).split() == ["False", "ApiClient", "True"]


@pytest.mark.slow
def test_the_workaround_is_still_needed_and_only_the_cli_applies_it():
    """`import ghindex` leaves the process as it is; and LanceDB still imports its REST
    client eagerly without the CLI's deferral. When this fails because LanceDB made that
    import lazy, remove `DEFERRED` from index/deferred.py."""
    script = (
        "import os, sys, ghindex, lancedb\n"
        "print('lance_namespace_urllib3_client.api' in sys.modules, 'LANCEDB_LOG' in os.environ)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LANCEDB_LOG"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    eager, log_set = done.stdout.split()
    assert log_set == "False"  # a library user's environment is theirs
    assert eager == "True", "LanceDB no longer imports its REST client eagerly: drop DEFERRED"


def ahead_of(factory):
    return getattr(factory, "__self__", None)


@pytest.mark.slow
def test_a_query_search_uses_the_encoder_loaded_ahead(quantised, isolated):
    workdir = built_workdir(isolated / "work", 6)
    precision = json.loads((workdir / "manifest.json").read_text())["model"]["precision"]
    snapshot = Snapshot(workdir)
    try:
        found = snapshot.search("issue about topic 3", k=2)
        searcher = snapshot.searcher
        ahead = ahead_of(searcher._embedder_factory)
        assert isinstance(ahead, encoder_ahead.EncoderAhead)
        assert ahead.key == (DEFAULT_MODEL, precision)
        assert searcher._embedder is ahead._encoder  # handed over, not loaded again
        assert found.results[0].handle == "octo/hello#3"
    finally:
        snapshot.close()


@pytest.mark.slow
def test_a_sparse_search_and_related_load_no_encoder(quantised, isolated):
    workdir = built_workdir(isolated / "work", 4)
    for use in (lambda s: s.search("topic 2", mode="sparse"), lambda s: s.related("octo/hello#1")):
        snapshot = Snapshot(workdir)
        try:
            use(snapshot)
            assert snapshot.searcher._embedder_factory.func is query_encoder
            assert snapshot.searcher._embedder is None
        finally:
            snapshot.close()


def test_the_encoder_asked_for_wins_over_the_manifests_hint(quantised, tmp_path):
    ahead = encoder_ahead.EncoderAhead(tmp_path / "lance", DEFAULT_MODEL, FP32)
    encoder = ahead.factory(DEFAULT_MODEL, INT8)  # the index says int8: the hint was wrong

    assert encoder.precision == INT8
    assert ahead.factory(DEFAULT_MODEL, FP32).precision == FP32


@pytest.mark.parametrize(
    "manifest",
    [
        {},
        {"model": "all-MiniLM"},
        {"model": {"name": 7, "precision": "int8"}},
        {"model": {"name": DEFAULT_MODEL, "precision": "fp64"}},
        {"model": {"name": DEFAULT_MODEL}},  # written before precisions: fp32, loads on use
        {"model": {"name": "someone/never-exported", "precision": "fp32"}},
        {"model": {"name": "../../../etc", "precision": "fp32"}},
        ["not", "a", "mapping"],
    ],
)
def test_a_hint_that_is_not_an_exported_model_loads_nothing_ahead(manifest, quantised, tmp_path):
    assert encoder_ahead.start(manifest, tmp_path / "lance").func is query_encoder


def test_nothing_loads_ahead_when_torch_is_chosen(quantised, monkeypatch, tmp_path):
    monkeypatch.setenv("GHINDEX_ENCODER", "torch")
    hint = {"model": {"name": DEFAULT_MODEL, "precision": FP32}}

    assert encoder_ahead.start(hint, tmp_path / "lance").func is query_encoder


def test_a_load_that_fails_ahead_fails_the_query_as_it_would_have(quantised, monkeypatch, tmp_path):
    """A damaged int8 file: the ahead load's error reaches the query, not a thread's log."""
    monkeypatch.setenv("GHINDEX_CACHE_DIR", str(tmp_path / "cache"))
    folder = export_dir(DEFAULT_MODEL)
    folder.mkdir(parents=True)
    for name in ("meta.json", "tokenizer.json", "model.onnx"):
        (folder / name).write_bytes((quantised / name).read_bytes())
    (folder / INT8_FILE).write_bytes(b"not a model")

    hint = {"model": {"name": DEFAULT_MODEL, "precision": INT8}}
    factory = encoder_ahead.start(hint, tmp_path / "lance")  # an index carrying no encoder

    assert isinstance(ahead_of(factory), encoder_ahead.EncoderAhead)
    with pytest.raises(IndexUnusable, match="holds int8 vectors"):
        factory(DEFAULT_MODEL, INT8)


@pytest.mark.slow
def test_lancedb_imports_as_on_newer_python_and_overrides_stays_whole():
    """lancedb's methods get the marker-only `override` while it imports; code imported
    after it gets the real decorator, which still refuses a method overriding nothing."""
    script = (
        "import ghindex.cli, lancedb, overrides\n"
        "print(lancedb.db.LanceDBConnection.open_table.__override__)\n"
        "try:\n"
        "    class Base:\n"
        "        pass\n"
        "    class Child(Base):\n"
        "        @overrides.override\n"
        "        def nothing_to_override(self): ...\n"
        "    print('accepted')\n"
        "except TypeError:\n"
        "    print('refused')\n"
    )
    assert fresh_python(script).split() == ["True", "refused"]


def test_a_module_can_be_imported_inside_a_context_once(package):
    seen = []

    @contextlib.contextmanager
    def around():
        seen.append("enter")
        yield
        seen.append("exit")

    assert deferred.around_import("slowpkg", around) is True
    import slowpkg  # noqa: F401

    assert seen == ["enter", "exit"] and (package / "ran").read_text() == "x"
    assert not any(isinstance(f, deferred.AroundImport) for f in sys.meta_path)
    assert deferred.around_import("slowpkg", around) is False  # imported already


@pytest.mark.slow
def test_the_cli_process_searches_without_pandas_which_still_loads_when_asked(quantised, isolated):
    workdir = built_workdir(isolated / "work", 4)
    printed = cli_in_fresh_python(
        ["search", "topic 2", "--snapshot", str(workdir), "-k", "1"],
        before="from ghindex.index import deferred\ndeferred.no_pandas_probe()",
        after="import pyarrow as pa\nprint('pandas' in sys.modules)\n"
        "print(type(pa.table({'a': [1]}).to_pandas()).__name__)",
    )
    assert printed[-2:] == ["False", "DataFrame"]
    # a program using ghindex as a library keeps pyarrow's own behaviour
    library = "import sys, ghindex, pyarrow.dataset\nprint('pandas' in sys.modules)\n"
    assert fresh_python(library).split() == ["True"]
