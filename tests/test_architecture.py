"""The house keeps its shape: folders named after data at the top, doors that hold no SQL or
ranking, and every folder in docs/architecture.md. A module's length is not checked: a module
is split when it holds two ideas (docs/architecture.md, "When to split a module")."""

from __future__ import annotations

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
