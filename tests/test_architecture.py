"""The house keeps its shape: folders named after data at the top, doors that hold no SQL or
ranking, and every folder in docs/architecture.md. A module's length is not checked: a module
is split when it holds two ideas (docs/architecture.md, "When to split a module")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ghindex"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
DOORS = ["cli", "serve/tools.py", "serve/server.py", "api.py"]


def modules(under: str = "") -> list[Path]:
    base = PACKAGE / under
    return [base] if base.is_file() else sorted(base.rglob("*.py"))


def test_the_top_level_is_folders_and_entry_points():
    files = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert files == [
        "__init__.py",
        "__main__.py",
        "api.py",
        "config.py",
        "errors.py",
        "pipeline.py",
        "progress.py",
    ]


@pytest.mark.parametrize("door", DOORS)
def test_doors_hold_no_sql_and_no_ranking(door):
    for path in modules(door):
        text = path.read_text(encoding="utf-8")
        found = re.findall(
            r"\.execute\(|duckdb\.connect\(|^(?:from|import) lancedb|Searcher\("
            r"|\bRRF_K\b|\.sort\(key=",
            text,
            flags=re.M,
        )
        assert not found, f"{path.relative_to(PACKAGE)} holds {found[0]!r}"


def test_every_folder_is_in_the_architecture_page():
    page = DOCS.read_text(encoding="utf-8")
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    missing = [name for name in folders if f"`{name}/`" not in page]
    assert not missing


# The stages from the bottom up: a folder (or top-level module) imports only from the
# floors below its own, so each can be read, tested and replaced with what is under it.
FLOORS = [
    {"errors"},
    {"vocabulary"},
    {"config", "progress"},
    {"state"},
    {"github", "gitsource"},
    {"index"},
    {"snapshot"},
    {"analysis"},
    {"query"},
    {"sample", "serve", "api"},
    {"pipeline"},
    {"cli"},
    {"__init__", "__main__"},
]
FLOOR = {name: n for n, names in enumerate(FLOORS) for name in names}


def stage(path: Path) -> str:
    """The folder (or top-level module) `path` belongs to."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every ghindex module `path` imports, at the top, inside functions or for type
    checking alike: a lazy import is still a dependency."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "ghindex":
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "ghindex"}
    return found


def test_every_stage_has_a_floor():
    stages = {stage(path) for path in modules()}
    assert stages == set(FLOOR), "add the new folder to FLOORS (and docs/architecture.md)"


def test_folders_import_one_way_down_the_floors():
    upward = []
    for path in modules():
        here = stage(path)
        for name in imports(path):
            parts = name.split(".")
            if len(parts) < 2 or parts[1] == "__version__":  # every floor may say its version
                continue
            there = parts[1]
            if there != here and there in FLOOR and FLOOR[there] >= FLOOR[here]:
                upward.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not upward, upward


def test_no_two_modules_import_each_other():
    known = {module_name(path): path for path in modules()}
    edges = {
        name: {n for n in imports(path) if n in known and n != name} for name, path in known.items()
    }
    # packages re-export their modules: a module importing its own package is not a circle
    circles = sorted(
        f"{a} <-> {b}"
        for a, targets in edges.items()
        for b in targets
        if a < b and a in edges.get(b, ()) and not (a.startswith(b + ".") or b.startswith(a + "."))
    )
    assert not circles, circles


def test_the_mcp_sdk_is_used_through_its_public_names():
    # a private attribute of the SDK's server (`server._tool_manager`, ...) breaks in any
    # release; the one exception is the stdio session over our own stdin reader
    used = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in (
                "_tool_manager",
                "_lowlevel_server",
                "_resource_manager",
                "_prompt_manager",
                "_mcp_server",
            ):
                used.add((path.relative_to(PACKAGE).as_posix(), node.attr))

    assert used == {("serve/server.py", "_lowlevel_server")}
