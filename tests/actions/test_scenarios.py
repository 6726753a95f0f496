"""The Actions path run by a real runner: the repository's workflow files, as users paste
them, executed end to end under nektos/act with GitHub, the store and the artifacts
local (tests/actions/act.py). Each scenario asserts its outcome: snapshot ids, embedded
counts, pieces moved, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from act import ROOT

from testkit.github_server import comment_node, issue_node

pytestmark = pytest.mark.slow
ARTIFACT_EXAMPLE = (ROOT / "examples" / "artifact" / "ghindex.yml").read_text()
S3_EXAMPLE = (ROOT / "examples" / "s3" / "ghindex.yml").read_text()


def serve_tiny_repo(github, repo: str = "octo/hello") -> None:
    github.add_repo(
        repo,
        issues=[
            issue_node(
                n,
                repo=repo,
                title=f"Greeting {n} is rude",
                body=f"Greeting number {n} of {repo} sounds rude.",
                updatedAt=f"2024-01-0{n}T00:00:00Z",
                comments=[comment_node(n * 10, body=f"Confirmed: greeting {n} needs work.")],
            )
            for n in (1, 2, 3)
        ],
    )


def ghindex(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ghindex", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )


def test_1_a_first_run_publishes_a_snapshot_artifact_that_answers(repository, github, tmp_path):
    serve_tiny_repo(github)
    repository.make_clone({"ghindex.yml": ARTIFACT_EXAMPLE})

    run = repository.act("ghindex.yml", "push", {"ref": "refs/heads/main"})

    assert run.returncode == 0, run.log[-6000:]
    snapshot = run.output("snapshot-id", "Build and publish")
    store = repository.artifact("ghindex-snapshot", run)
    assert (store / "LATEST").read_text().strip() == snapshot
    counts = json.loads(run.output("counts", "Build and publish"))
    assert counts["issue"] == 3 and counts["issue_comment"] == 3 and counts["doc"] == 1
    assert int(run.output("embedded", "Build and publish")) > 0
    pulled = ghindex("pull", "--store", str(store), "--dest", "pulled", "--json", cwd=tmp_path)
    assert json.loads(pulled.stdout)["snapshot_id"] == snapshot
    found = ghindex(
        "search", "rude greeting", "--snapshot", "pulled", "-k", "1", "--json", cwd=tmp_path
    )
    assert json.loads(found.stdout)["results"][0]["handle"].startswith("octo/hello#")
