"""One version everywhere (issue #47): src/ghindex/__init__.py, the tag the release
workflow runs on, and every `@vX.Y.Z` by which workflows, examples and docs name this
project (its action, its chain action, its reusable workflow, its repository for pip)
agree; the reusable workflow calls the action of its own release. A release moves them
all together, and this test says which one was forgotten."""

from __future__ import annotations

import re
from pathlib import Path

from ruamel.yaml import YAML

from ghindex import __version__

ROOT = Path(__file__).resolve().parents[1]
TAG = f"v{__version__}"
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
REUSABLE = ROOT / ".github" / "workflows" / "index.yml"
# this project named with a version: `ghindex/ghindex@v…`, `ghindex/ghindex/chain@v…`,
# `…/.github/workflows/index.yml@v…`, `git+https://github.com/ghindex/ghindex@v…`
PIN = re.compile(r"ghindex/ghindex(?:/[\w./-]*)?@(v[^\s\"'`)#=,]*)")
# where users read a version: the docs, the examples, the workflows, the actions, the code
PLACES = ("README.md", "action.yml", "chain", ".github", "examples", "docs", "src", "bench")
GIT_URL = "git+https://github.com/ghindex/ghindex@"  # pip, until the first release
SUFFIXES = {".md", ".yml", ".yaml", ".json", ".toml", ".py"}


def pinned_files() -> list[Path]:
    found = []
    for place in PLACES:
        top = ROOT / place
        paths = [top] if top.is_file() else top.rglob("*")
        found += [p for p in paths if p.is_file() and p.suffix in SUFFIXES]
    return sorted(found)


def test_the_version_is_semantic():
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_every_pin_of_this_project_names_the_version_of_this_checkout():
    pins = {}
    for path in pinned_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in PIN.finditer(line):
                pins[f"{path.relative_to(ROOT)}:{number}"] = match[1]
    assert len(pins) >= 20  # the workflows, the examples, the docs, the README
    assert {where: tag for where, tag in pins.items() if tag != TAG} == {}
    # the pins users copy: the action, the chain action, the reusable workflow, pip's URL
    assert {
        kind
        for kind in ("ghindex/ghindex@", "ghindex/ghindex/chain@", "index.yml@", GIT_URL)
        for path in pinned_files()
        if kind in path.read_text(encoding="utf-8")
    } == {"ghindex/ghindex@", "ghindex/ghindex/chain@", "index.yml@", GIT_URL}


def test_the_reusable_workflow_calls_the_actions_of_its_own_release():
    workflow = YAML(typ="safe").load(REUSABLE.read_text(encoding="utf-8"))
    uses = {
        step["uses"]
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if step.get("uses", "").startswith("ghindex/ghindex")
    }
    assert uses == {f"ghindex/ghindex@{TAG}", f"ghindex/ghindex/chain@{TAG}"}


def test_the_release_workflow_runs_on_this_version_tag_and_checks_it():
    workflow = YAML(typ="safe").load(RELEASE.read_text(encoding="utf-8"))
    (pattern,) = workflow["on"]["push"]["tags"]
    # GitHub's tag filter: `[0-9]+` is one or more digits, `.` itself
    as_regex = pattern.replace(".", r"\.").replace("[0-9]+", r"[0-9]+")
    assert re.fullmatch(as_regex, TAG)
    assert not re.fullmatch(as_regex, TAG + "-rc1")
    steps = workflow["jobs"]["build"]["steps"]
    check = next(s for s in steps if s.get("name") == "The tag is the package's version")
    assert check["env"] == {"TAG": "${{ github.ref_name }}"}
    assert "src/ghindex/__init__.py" in check["run"]
    publish = workflow["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"}  # OIDC, no stored token
    assert "secrets" not in RELEASE.read_text(encoding="utf-8")
    assert [s["uses"].split("@")[0] for s in publish["steps"]][-1] == (
        "pypa/gh-action-pypi-publish"
    )
