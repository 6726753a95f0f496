"""Which previous snapshot artifact a ghindex run may start from, and whether a run started
by an event should do nothing (min-interval). Run by chain/action.yml once it has saved
GitHub's answers in RUNNER_TEMP: the repository, this workflow's successful runs on the
default branch, and the artifacts of the name. Standard library only: ghindex is not
installed yet when it runs.

Only a successful run of this workflow, in this repository and on this repository's code
(never a fork's), on the default branch, started by a trusted event, hands its snapshot
artifact on. Every artifact passed over is logged with the reason.
tests/test_workflow_chain.py runs this file against recorded API answers.
"""

import json
import os
from datetime import UTC, datetime

TRUSTED = {
    "push",
    "schedule",
    "workflow_dispatch",
    "issues",
    "issue_comment",
    "discussion",
    "discussion_comment",
    "release",
}
ALWAYS_RUN = {"push", "schedule", "workflow_dispatch"}  # never skipped by min-interval


def read(name: str) -> dict:
    path = os.path.join(os.environ["RUNNER_TEMP"], name)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as answer:
        return json.load(answer)


def distrust(run: dict, own: int, branch: str) -> str | None:
    """Why a run may not hand a snapshot on, or None when it may."""
    if (run.get("repository") or {}).get("id") != own:
        return "it ran in another repository"
    if (run.get("head_repository") or {}).get("id") != own:
        return "it ran on a fork's code"
    if run.get("head_branch") != branch:
        return f"it ran on branch {run.get('head_branch')!r}, not {branch!r}"
    if run.get("event") not in TRUSTED:
        return f"it was started by a {run.get('event')} event"
    if (run.get("status"), run.get("conclusion")) != ("completed", "success"):
        return "it did not complete successfully"
    return None


def previous(artifacts: list[dict], runs: dict, own: int, branch: str) -> str:
    """The run id whose artifact to start from ('' for none), saying why others are not."""
    for artifact in artifacts:
        origin = artifact.get("workflow_run") or {}
        run = runs.get(origin.get("id"))
        if artifact.get("expired"):
            why = "it has expired"
        elif origin.get("repository_id") != own or origin.get("head_repository_id") != own:
            why = "it was made on a fork's code or in another repository"
        elif origin.get("head_branch") != branch:
            why = f"it was made on branch {origin.get('head_branch')!r}, not {branch!r}"
        elif run is None:
            why = f"its run is not a successful run of this workflow on {branch!r}"
        else:
            why = distrust(run, own, branch)
        if why is None:
            print(f"previous snapshot: artifact {artifact['id']} of run {origin['id']}")
            return str(origin["id"])
        print(f"ignored artifact {artifact.get('id')} of run {origin.get('id')}: {why}")
    return ""


def too_soon(trusted: list[dict], event: str, minutes: float) -> bool:
    """Whether an event run comes less than `minutes` after the last trusted run started."""
    if minutes <= 0 or event in ALWAYS_RUN or not trusted:
        return False
    last = max(datetime.fromisoformat(r["run_started_at"].replace("Z", "+00:00")) for r in trusted)
    since = (datetime.now(UTC) - last).total_seconds() / 60
    if since >= minutes:
        return False
    print(
        f"skipped: the last run started {since:.0f} min ago, less than the min-interval of "
        f"{minutes:g}; the next run catches up"
    )
    return True


def main() -> None:
    repository = read("ghindex-repository.json")
    own, branch = repository["id"], repository["default_branch"]
    runs = {run["id"]: run for run in read("ghindex-runs.json").get("workflow_runs", [])}
    current = os.environ.get("CURRENT_RUN", "")
    trusted = [
        r for r in runs.values() if distrust(r, own, branch) is None and str(r["id"]) != current
    ]
    chosen = previous(read("ghindex-artifacts.json").get("artifacts", []), runs, own, branch)
    minutes = float(os.environ.get("MIN_INTERVAL") or 0)
    skip = too_soon(trusted, os.environ.get("GITHUB_EVENT_NAME", ""), minutes)
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
        out.write(f"run-id={chosen}\nskip={'true' if skip else 'false'}\n")


if __name__ == "__main__":
    main()
