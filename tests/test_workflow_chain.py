"""The snapshot chain of the reusable workflow trusts only itself, and its triggers are
safe to run with the repository's token.

The chain action (chain/action.yml, used by the reusable workflow and the organisation
example) lists the runs and artifacts with `gh api`, then runs chain/choose.py; here
choose.py runs as the action runs it, in a fresh process, against recorded answers of
GitHub's REST API (tests/github_actions/): the
listing holds a fork's pull request run on a branch named `main`, a
`pull_request_target` run, a failed run, another branch, an expired artifact, and
only then a trusted one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
REUSABLE = ROOT / ".github" / "workflows" / "index.yml"
CHAIN = ROOT / "chain" / "action.yml"
RECORDED = Path(__file__).parent / "github_actions"
EVENT_EXAMPLES = ["artifact", "s3", "gcs"]
EVENTS = {"issues", "issue_comment", "discussion", "discussion_comment", "release"}


def load(path: Path):
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def choose(tmp_path, *, event="schedule", min_interval="0", current="1", runs=None):
    """Run chain/choose.py as the chain action does: (outputs, log lines)."""
    run = next(s for s in load(CHAIN)["runs"]["steps"] if s.get("id") == "choose")
    assert run["run"] == 'python3 "$GITHUB_ACTION_PATH/choose.py"'
    temp = tmp_path / "runner-temp"
    temp.mkdir(exist_ok=True)
    for name in ("repository", "runs", "artifacts"):
        shutil.copy(RECORDED / f"{name}.json", temp / f"ghindex-{name}.json")
    if runs is not None:
        (temp / "ghindex-runs.json").write_text(json.dumps(runs), encoding="utf-8")
    output = tmp_path / "github-output"
    output.write_text("", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(CHAIN.parent / "choose.py")],
        env={
            "RUNNER_TEMP": str(temp),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_EVENT_NAME": event,
            "MIN_INTERVAL": min_interval,
            "CURRENT_RUN": current,
        },
        capture_output=True,
        text=True,
        check=True,
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return outputs, done.stdout.splitlines()


def test_only_a_successful_run_of_this_repository_on_the_default_branch_hands_its_snapshot_on(
    tmp_path,
):
    outputs, log = choose(tmp_path)

    assert outputs == {"run-id": "1001", "skip": "false"}
    assert log == [
        "ignored artifact 96 of run 6006: it was made on a fork's code or in another repository",
        "ignored artifact 95 of run 5005: it was started by a pull_request_target event",
        "ignored artifact 94 of run 4004: its run is not a successful run of this workflow on "
        "'main'",
        "ignored artifact 93 of run 7007: it was made on branch 'feature', not 'main'",
        "ignored artifact 92 of run 3003: it has expired",
        "previous snapshot: artifact 91 of run 1001",
    ]


def test_a_run_that_claims_this_repository_but_ran_a_forks_code_is_not_trusted(tmp_path):
    answer = json.loads((RECORDED / "runs.json").read_text())
    for run in answer["workflow_runs"]:
        if run["id"] == 1001:  # the artifact says "this repository", the run says otherwise
            run["head_repository"] = {"id": 800002, "full_name": "mallory/hello", "fork": True}

    outputs, log = choose(tmp_path, runs=answer)

    assert outputs["run-id"] == ""
    assert (
        log[-1] == "ignored artifact 90 of run 999: its run is not a successful run of this "
        "workflow on 'main'"
    )
    assert "ignored artifact 91 of run 1001: it ran on a fork's code" in log


def test_nothing_trusted_means_starting_from_nothing(tmp_path):
    outputs, _log = choose(tmp_path, runs={"total_count": 0, "workflow_runs": []})
    assert outputs == {"run-id": "", "skip": "false"}


def started_ago(minutes: float) -> dict:
    answer = json.loads((RECORDED / "runs.json").read_text())
    when = (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for run in answer["workflow_runs"]:
        if run["id"] == 1001:
            run["run_started_at"] = when
    return answer


@pytest.mark.parametrize(
    ("event", "minutes_ago", "min_interval", "skip"),
    [
        ("issue_comment", 5, "15", "true"),  # an event soon after a run: wait for the next
        ("issues", 20, "15", "false"),  # long enough ago
        ("issue_comment", 5, "0", "false"),  # no minimum: every event runs
        ("push", 5, "15", "false"),  # push, schedule and manual runs always run
        ("schedule", 5, "15", "false"),
        ("workflow_dispatch", 5, "15", "false"),
    ],
)
def test_min_interval_skips_only_event_runs_soon_after_a_trusted_run(
    tmp_path, event, minutes_ago, min_interval, skip
):
    outputs, log = choose(
        tmp_path, event=event, min_interval=min_interval, runs=started_ago(minutes_ago)
    )
    assert outputs["skip"] == skip
    assert any(line.startswith("skipped: the last run started") for line in log) == (skip == "true")


def test_the_running_run_itself_does_not_count_for_the_min_interval(tmp_path):
    outputs, _log = choose(
        tmp_path, event="issues", min_interval="15", current="1001", runs=started_ago(1)
    )
    assert outputs["skip"] == "false"


def test_every_step_after_the_choice_obeys_the_skip():
    steps = load(REUSABLE)["jobs"]["index"]["steps"]
    assert steps[0]["uses"].startswith("ghindex/ghindex/chain@") and steps[0]["id"] == "previous"
    assert steps[1:] and all(
        s["if"].startswith("steps.previous.outputs.skip != 'true'") for s in steps[1:]
    ), [s["name"] for s in steps[1:]]


def test_the_organisation_example_takes_its_shards_through_the_chain_too():
    shard = load(ROOT / "examples" / "org" / "ghindex-org.yml")["jobs"]["shard"]
    chooser = next(s for s in shard["steps"] if s.get("id") == "previous")
    assert chooser["uses"].startswith("ghindex/ghindex/chain@")
    assert chooser["with"] == {"artifact-name": "ghindex-shard-${{ matrix.shard }}"}


def test_pull_request_events_are_refused_with_one_line():
    steps = load(CHAIN)["runs"]["steps"]
    refuse = steps[0]
    assert refuse["if"] == "startsWith(github.event_name, 'pull_request')"

    done = subprocess.run(["bash", "-e", "-c", refuse["run"]], capture_output=True, text=True)

    assert done.returncode == 1
    assert done.stdout.count("\n") == 1 and done.stdout.startswith(
        "::error::ghindex does not run on pull_request* events"
    )


@pytest.mark.parametrize("example", EVENT_EXAMPLES)
def test_examples_run_on_the_events_that_change_state_and_never_on_pull_requests(example):
    workflow = load(ROOT / "examples" / example / "ghindex.yml")
    triggers = set(workflow["on"])
    assert triggers >= {"push", "schedule", "workflow_dispatch"} | EVENTS
    assert not any(t.startswith("pull_request") for t in triggers)
    assert workflow["on"]["push"] == {"branches": ["main"]}


def test_the_reusable_workflow_is_never_called_for_pull_requests_by_our_own_workflows():
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        workflow = load(path)
        for job in workflow["jobs"].values():
            if "index.yml" in job.get("uses", ""):
                assert not any(str(t).startswith("pull_request") for t in workflow["on"]), path
