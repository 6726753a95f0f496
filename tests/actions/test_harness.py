"""The harness itself: act is there (or the tests fail saying so), act is handed the
repository's files unchanged, and every action GitHub provides has its stand-in, which
takes every input the files give it."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import act
import pytest
from ruamel.yaml import YAML


def digest(folder) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_act_is_installed_with_the_test_extra():
    version = subprocess.run(
        [act.act_binary(), "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == "act version 0.2.89"


def test_a_missing_act_fails_the_scenarios_with_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(pytest.fail.Exception) as failed:
        act.act_binary()
    assert str(failed.value) == act.ACT_MISSING
    assert "\n" not in act.ACT_MISSING


def test_act_is_handed_the_files_users_paste_unchanged(action_copy):
    """No `uses:` is rewritten: each maps to its stand-in by act's --local-repository, so
    the copy act runs as `ghindex/ghindex@vX` is this checkout's files, byte for byte."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=act.ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    expected = {
        name: hashlib.sha256((act.ROOT / name).read_bytes()).hexdigest()
        for name in listed
        if (act.ROOT / name).is_file()
    }
    assert digest(action_copy) == expected
    for path in act.workflow_files():
        relative = path.relative_to(act.ROOT)
        assert (action_copy / relative).read_bytes() == path.read_bytes()


def test_every_action_github_provides_has_a_stand_in_taking_the_inputs_given(action_copy):
    mappings = dict(m.split("=", 1) for m in act.local_repositories(action_copy))
    remote = {u for u in act.uses_of(act.workflow_files()) if not u.startswith("./")}
    # OWNER/NAME[/PATH]@REF is mapped as OWNER/NAME@REF: one folder per repository and ref
    repositories = {
        "/".join(u.split("@")[0].split("/")[:2]) + "@" + u.split("@")[1] for u in remote
    }
    assert set(mappings) == repositories
    yaml = YAML(typ="safe")
    for path in act.workflow_files():
        document = yaml.load(path.read_text(encoding="utf-8"))
        jobs = document.get("jobs", {}).values() if "jobs" in document else [document["runs"]]
        for step in [s for job in jobs for s in job.get("steps", [])]:
            uses = step.get("uses", "")
            owner_name = "/".join(uses.split("@")[0].split("/")[:2])
            if owner_name not in act.STANDINS:
                continue
            folder = act.STANDIN_FOLDER / act.STANDINS[owner_name][0]
            inputs = yaml.load((folder / "action.yml").read_text())["inputs"]
            assert set(step.get("with", {})) <= set(inputs), (path.name, step.get("name"))
    for folder, _replaces in act.STANDINS.values():
        assert (act.STANDIN_FOLDER / folder).exists(), folder
