"""The GitHub Action, the reusable workflow and the examples: checked offline.

Every workflow and action file validates against GitHub's schemas (check-jsonschema's
vendored copies) and passes zizmor's audits; third-party actions are pinned to commits.
The workflows themselves run under a real runner (nektos/act) in tests/actions/; what
stays here of the action's shell steps run with bash are the cases no scenario there
reaches (a refused switch, a missing clone, diffs left out).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import duckdb
import pytest
from ruamel.yaml import YAML

from ghindex import __version__
from ghindex.cli import cli
from testkit.github_server import issue_node, serve_tiny_repo

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ACTION = ROOT / "action.yml"
CHAIN = ROOT / "chain" / "action.yml"  # the snapshot chain: which previous artifact to trust
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
EXAMPLES = sorted((ROOT / "examples").rglob("*.yml"))
ALL_WORKFLOWS = WORKFLOWS + EXAMPLES
REUSABLE = ROOT / ".github" / "workflows" / "index.yml"
TAG = f"v{__version__}"
SHA_PIN = re.compile(r"^(?P<action>[\w.-]+/[\w.-]+(?:/[\w./-]+)?)@(?P<sha>[0-9a-f]{40})$")
VERSION_COMMENT = re.compile(r"#\s*(v\d+\.\d+\.\d+)\s*$")
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def load(path: Path):
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def steps_of(document) -> list[dict]:
    if "runs" in document:
        return list(document["runs"]["steps"])
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_there_is_something_to_check():
    assert ACTION.exists()
    assert {p.name for p in WORKFLOWS} >= {"index.yml", "ci.yml", "self-test.yml"}
    assert {p.parent.name for p in EXAMPLES} >= {"artifact", "s3", "gcs", "org"}


# --- schemas and audits ----------------------------------------------------------------


def run_tool(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_"))}
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_the_action_validates_against_the_action_schema():
    result = run_tool(
        "check-jsonschema",
        "--builtin-schema",
        "vendor.github-actions",
        "action.yml",
        "chain/action.yml",
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_workflow_validates_against_the_workflow_schema():
    files = [relative(p) for p in ALL_WORKFLOWS]
    result = run_tool("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_finds_nothing():
    files = [relative(p) for p in [ACTION, CHAIN, *ALL_WORKFLOWS]]
    result = run_tool(
        "zizmor",
        "--offline",
        "--config",
        ".github/zizmor.yml",
        "--format",
        "json",
        "--no-progress",
        *files,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []


# --- hardening, checked on the files directly --------------------------------------------


def uses_lines():
    """(file, line) for every `uses:` of a step or job, as written."""
    for path in [ACTION, CHAIN, *ALL_WORKFLOWS]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.match(r"^\s*(-\s+)?uses:\s", line):
                yield path, line


def test_third_party_actions_are_pinned_to_a_commit_with_its_version():
    pins: dict[str, set[tuple[str, str]]] = {}
    for path, line in uses_lines():
        target = line.split("uses:", 1)[1].split("#", 1)[0].strip()
        if target.startswith("./"):
            continue
        if target.startswith("ghindex/ghindex"):  # this project: the release being documented
            assert target.endswith(f"@{TAG}"), (relative(path), line)
            continue
        pin = SHA_PIN.match(target)
        comment = VERSION_COMMENT.search(line)
        assert pin and comment, f"{relative(path)}: not pinned to a commit and version: {line}"
        pins.setdefault(pin["action"], set()).add((pin["sha"], comment[1]))
    inconsistent = {action: found for action, found in pins.items() if len(found) > 1}
    assert inconsistent == {}
    assert "actions/checkout" in pins


def test_no_expression_is_templated_into_a_script():
    for path in [ACTION, CHAIN, *ALL_WORKFLOWS]:
        for step in steps_of(load(path)):
            assert "${{" not in step.get("run", ""), (relative(path), step.get("name"))


def test_checkouts_keep_no_credentials():
    for path in [ACTION, CHAIN, *ALL_WORKFLOWS]:
        for step in steps_of(load(path)):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, (relative(path), step)


def test_permissions_start_empty_and_each_grant_says_why():
    for path in ALL_WORKFLOWS:
        workflow = load(path)
        assert workflow["permissions"] == {}, relative(path)
        for name, job in workflow["jobs"].items():
            assert isinstance(job.get("permissions"), dict), (relative(path), name)
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.match(r"^\s+[a-z-]+:\s+(read|write)\b", line):
                assert "#" in line, f"{relative(path)}: a permission without a reason: {line}"


def test_jobs_have_timeouts_and_publishers_queue_instead_of_cancelling():
    for path in ALL_WORKFLOWS:
        for name, job in load(path)["jobs"].items():
            if "uses" not in job:  # a job calling a reusable workflow takes no timeout
                assert "timeout-minutes" in job, (relative(path), name)
    for name, job in load(REUSABLE)["jobs"].items():
        if name == "embed":  # writes nothing shared: the shards of one run run at once
            assert "concurrency" not in job
            continue
        group = job["concurrency"]["group"]
        assert group.startswith("ghindex-"), name
        assert job["concurrency"]["cancel-in-progress"] is False


def action_steps(job) -> list[dict]:
    return [s for s in job.get("steps", []) if s.get("uses", "").startswith("ghindex/ghindex@")]


def test_every_job_of_a_split_build_shapes_the_chunks_alike():
    """The jobs of a split first build must chunk alike (model, docs, diffs), or the
    shards embed what the index job did not count and the publish job embeds again."""
    jobs = load(REUSABLE)["jobs"]
    for name in ("index", "embed", "publish"):
        (step,) = action_steps(jobs[name])
        for key in ("model", "docs", "diffs"):
            assert step["with"][key] == f"${{{{ inputs.{key} }}}}", (name, key)


def test_a_rerun_of_the_failed_jobs_finds_what_the_earlier_attempt_left():
    """Artifacts passed between the jobs are named by the run, not the attempt (a rerun
    of failed jobs does not rerun the index job), are overwritten by a rerun, and every
    one downloaded is one uploaded."""
    text = REUSABLE.read_text(encoding="utf-8")
    assert "run_attempt" not in text
    steps = steps_of(load(REUSABLE))
    # each shard's vectors are named by a step from the run id and the shard
    (naming,) = [s for s in steps if s.get("id") == "shard"]
    assert "artifact=ghindex-vectors-${GITHUB_RUN_ID}-${SHARD" in naming["run"]
    shard_name = "ghindex-vectors-${{ github.run_id }}-SHARD"

    def named(name: str) -> str:
        return shard_name if name == "${{ steps.shard.outputs.artifact }}" else name

    uploaded = {
        named(s["with"]["name"])
        for s in steps
        if s.get("uses", "").startswith("actions/upload-artifact")
    }
    passed = {name for name in uploaded if "github.run_id" in name}
    assert len(passed) == 2  # the workdir, and each shard's vectors
    for step in steps:
        if (
            step.get("uses", "").startswith("actions/upload-artifact")
            and named(step["with"]["name"]) in passed
        ):
            assert step["with"]["overwrite"] is True, step["name"]
        if step.get("uses", "").startswith("actions/download-artifact"):
            wanted = named(step["with"].get("name", "")) or step["with"]["pattern"].replace("*", "")
            if "github.run_id" in wanted:
                assert any(name.startswith(wanted) for name in passed), step["name"]
    embed = load(REUSABLE)["jobs"]["embed"]
    (step,) = action_steps(embed)
    assert step["with"]["stop-after"] == "${{ inputs.embed-minutes }}"
    assert "steps.earlier.outcome" in step["with"]["vectors"]
    publish = load(REUSABLE)["jobs"]["publish"]
    (step,) = action_steps(publish)
    downloads = {s.get("with", {}).get("path"): s for s in publish["steps"]}
    assert step["with"]["workdir"] in downloads  # what the index job fetched, not again


def test_callers_pass_only_inputs_that_exist():
    action = load(ACTION)
    reusable = load(REUSABLE)["on"]["workflow_call"]
    for path in ALL_WORKFLOWS:
        workflow = load(path)
        for name, job in workflow["jobs"].items():
            if job.get("uses", "").startswith(
                ("ghindex/ghindex/.github/workflows/index.yml", "./.github/workflows/index.yml")
            ):
                assert set(job.get("with", {})) <= set(reusable["inputs"]), (relative(path), name)
                secrets = job.get("secrets", {})
                assert secrets == "inherit" or set(secrets) <= set(reusable.get("secrets", {}))
            for step in job.get("steps", []):
                if step.get("uses", "") == "./" or step.get("uses", "").startswith(
                    "ghindex/ghindex@"
                ):
                    assert set(step.get("with", {})) <= set(action["inputs"]), (
                        relative(path),
                        step.get("name"),
                    )


def test_the_reusable_workflow_runs_the_action_of_this_release():
    uses = {s["uses"] for s in steps_of(load(REUSABLE)) if "ghindex/ghindex" in s.get("uses", "")}
    assert uses == {f"ghindex/ghindex/chain@{TAG}", f"ghindex/ghindex@{TAG}"}


def parse(args):
    """Resolve the command and parse its options exactly as click would, without running."""
    with cli.make_context("ghindex", list(args)) as ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # protected_args, until click 9
        name, command, rest = cli.resolve_command(ctx, [*ctx.protected_args, *ctx.args])
        command.make_context(name, rest, parent=ctx)


def parse_line(line: str, root: Path) -> None:
    """Parse one `ghindex …` line, first making the directories it names (click checks)."""
    args = shlex.split(line)[1:]
    for flag, value in itertools.pairwise(args):
        if flag in ("--snapshot", "--git", "--wiki"):
            (root / value).mkdir(parents=True, exist_ok=True)
    if args[0] == "merge":  # its arguments are workdirs
        for value in args[1:]:
            if not value.startswith("-"):
                (root / value).mkdir(parents=True, exist_ok=True)
    parse(args)


def ghindex_command_lines(script: str):
    """Each `ghindex …` command of a shell script, with continuation lines joined."""
    for line in script.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith("ghindex "):
            yield line.split(" #", 1)[0].split(" >", 1)[0].split(" |", 1)[0]


def test_ghindex_commands_in_workflows_parse(isolated):
    lines = [
        line
        for path in ALL_WORKFLOWS
        for step in steps_of(load(path))
        for line in ghindex_command_lines(step.get("run", ""))
    ]
    for line in lines:
        parse_line(line, isolated)
    commands = {shlex.split(line)[1] for line in lines}
    assert commands >= {"merge", "publish", "gc", "status", "search"}


def shown(path: Path) -> str:
    """An example file as the docs show it: a workflow without its leading comment, which
    the surrounding prose says, as a yaml block; a client config whole, as a json block."""
    text = path.read_text(encoding="utf-8").rstrip("\n")
    if path.suffix == ".yml":
        lines = text.splitlines()
        body = "\n".join(itertools.dropwhile(lambda line: line.startswith("#") or not line, lines))
        return f"```yaml\n{body}\n```"
    return f"```{path.suffix[1:]}\n{text}\n```"


def test_the_readme_shows_the_artifact_example_as_it_is():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert shown(ROOT / "examples" / "artifact" / "ghindex.yml") in readme


EXAMPLE_PAGES = sorted((ROOT / "docs" / "examples").glob("*.md"))
PAGE_SECTIONS = [
    "## What to paste",
    "## Permissions and secrets",
    "## What it costs",
    "## Forcing a full rebuild",
    "## Reading the snapshot",
]


def test_commands_in_the_actions_docs_parse(isolated):
    lines = [
        line
        for page in [ROOT / "docs" / "actions.md", *EXAMPLE_PAGES]
        for block in re.findall(
            r"```(?:sh|bash)\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S
        )
        for line in ghindex_command_lines(block)
    ]
    for line in lines:
        parse_line(line, isolated)
    assert len(lines) >= 20


@pytest.mark.parametrize("example", ["artifact", "s3", "gcs", "org", "mcp"])
def test_every_example_has_a_page_that_shows_it_as_it_is(example):
    page = (ROOT / "docs" / "examples" / f"{example}.md").read_text(encoding="utf-8")
    assert [line for line in page.splitlines() if line.startswith("## ")] == PAGE_SECTIONS
    files = sorted(p for p in (ROOT / "examples" / example).rglob("*") if p.is_file())
    assert files
    for path in files:
        assert shown(path) in page, relative(path)
        assert f"(../../{relative(path)})" in page, relative(path)


# --- the action's shell steps, run for real ---------------------------------------------


class ActionRun:
    """Runs the action's `run:` steps the way the runner does: `bash -e -o pipefail`,
    with each step's `env:` resolved from the inputs and contexts given here."""

    def __init__(
        self, tmp: Path, github_url: str, token: str, inputs: dict[str, str], runner: str = "runner"
    ) -> None:
        self.action = load(ACTION)
        self.tmp = tmp / runner
        self.temp = self.tmp / "temp"
        self.workspace = tmp / "workspace"
        self.temp.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(exist_ok=True)
        self.contexts = {
            "github.graphql_url": github_url,
            "github.token": token,
            "github.repository": "octo/hello",
            "steps.python.outputs.python-version": "3.12.0",
            "steps.python.outputs.python-path": sys.executable,
        }
        unknown = set(inputs) - set(self.action["inputs"])
        assert not unknown, unknown
        self.inputs = {
            name: self.resolve(str(spec.get("default", "")))
            for name, spec in self.action["inputs"].items()
        } | inputs
        self.outputs: dict[str, dict[str, str]] = {}

    def resolve(self, value: str) -> str:
        def one(match: re.Match) -> str:
            expression = match[1]
            if expression.startswith("inputs."):
                return self.inputs[expression.removeprefix("inputs.")]
            if expression.startswith("steps.") and ".outputs." in expression:
                step, key = expression.removeprefix("steps.").split(".outputs.")
                if step in self.outputs:
                    return self.outputs[step][key]
            return self.contexts[expression]  # an expression this test does not know: fail

        return EXPRESSION.sub(one, value)

    def step(self, step_id: str, expect_failure: bool = False):
        step = next(s for s in self.action["runs"]["steps"] if s.get("id") == step_id)
        assert step["shell"] == "bash"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GHINDEX_", "GITHUB_"))}
        output = self.tmp / f"{step_id}.output"
        output.write_text("")
        env |= {
            "PATH": f"{BIN}{os.pathsep}{env['PATH']}",
            "RUNNER_TEMP": str(self.temp),
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "GITHUB_ACTION_PATH": str(ROOT),
            "GITHUB_REPOSITORY": "octo/hello",
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(self.tmp / "summary.md"),
            "GHINDEX_HTTP_RETRIES": "0",
        }
        env |= {key: self.resolve(str(value)) for key, value in step.get("env", {}).items()}
        script = self.tmp / f"{step_id}.sh"
        script.write_text(step["run"])
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if expect_failure:
            assert result.returncode != 0, result.stdout + result.stderr
            return result
        assert result.returncode == 0, result.stdout + result.stderr
        values = dict(line.split("=", 1) for line in output.read_text().splitlines())
        self.outputs[step_id] = values
        return values

    def action_outputs(self) -> dict[str, str]:
        return {name: self.resolve(spec["value"]) for name, spec in self.action["outputs"].items()}


def make_clone(path: Path) -> Path:
    git_env = {
        "PATH": os.environ["PATH"],
        "HOME": str(path.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Octo Cat",
        "GIT_AUTHOR_EMAIL": "octo@example.com",
        "GIT_COMMITTER_NAME": "Octo Cat",
        "GIT_COMMITTER_EMAIL": "octo@example.com",
    }

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "commit.gpgsign=false", *args],
            cwd=path,
            env=git_env,
            check=True,
            capture_output=True,
        )

    path.mkdir(parents=True)
    git("init", "-q", "-b", "main")
    (path / "README.md").write_text(
        "# Hello\n\nHello is a small library that greets people politely, in any language.\n"
    )
    git("add", "-A")
    git("commit", "-q", "-m", "Write the README")
    git("remote", "add", "origin", "https://github.com/octo/hello.git")
    return path


@pytest.mark.slow
def test_a_shard_stopped_by_its_time_limit_keeps_its_work_and_goes_on_next_run(github, tmp_path):
    """`build` with `stop-after` ends in time with what it embedded kept in the workdir's
    cache and `unfinished` set; the next run embeds only the rest (examples/org)."""
    github.add_repo(
        "octo/hello",
        issues=[
            issue_node(n, title=f"Report {n}", body=f"Report number {n} says something.")
            for n in range(1, 301)
        ],
    )
    inputs = {"mode": "build", "workdir": "shard", "git": "false", "stop-after": "0.0001"}

    stopped = ActionRun(tmp_path, github.url, github.token, inputs).step("run")

    # one embedding step (256 rows) is done before the time is looked at
    assert (stopped["embedded"], stopped["unfinished"]) == ("256", "44")
    assert stopped["counts"] == "{}"  # no index yet
    workdir = tmp_path / "workspace" / "shard"
    assert not (workdir / "manifest.json").exists()

    finished = ActionRun(
        tmp_path, github.url, github.token, {**inputs, "stop-after": ""}, runner="next"
    ).step("run")
    assert (finished["embedded"], finished["unfinished"]) == ("44", "0")
    assert json.loads(finished["counts"])["chunks"] == 300


def test_the_action_refuses_an_embedding_job_without_its_shard(github, tmp_path):
    job = {"mode": "embed", "git": "false"}
    result = ActionRun(tmp_path, github.url, github.token, job).step("run", expect_failure=True)
    assert result.stdout == "::error::mode embed needs shard: I/N, e.g. 2/4\n"
    assert github.requests == []


@pytest.mark.slow
def test_the_action_can_leave_diffs_out_of_the_index(github, tmp_path):
    serve_tiny_repo(github)
    make_clone(tmp_path / "workspace")
    inputs = {"mode": "build", "diffs": "false"}
    outputs = ActionRun(tmp_path, github.url, github.token, inputs).step("run")

    counts = json.loads(outputs["counts"])
    assert "diff" not in counts and counts["doc"] >= 1
    workdir = Path(outputs["snapshot-path"])
    con = duckdb.connect(str(workdir / "state.duckdb"), read_only=True)
    try:  # the commits are read all the same, for SQL
        assert con.execute("SELECT count(*) FROM commit_files").fetchone()[0] >= 1
    finally:
        con.close()


def test_the_action_refuses_a_switch_that_is_not_true_or_false(github, tmp_path):
    action = ActionRun(tmp_path, github.url, github.token, {"git": "false", "docs": "yes"})

    result = action.step("run", expect_failure=True)

    assert result.stdout == "::error::docs must be true or false, not 'yes'\n"
    assert github.requests == []


def test_the_action_asks_for_a_clone_when_git_is_on(github, tmp_path):
    action = ActionRun(tmp_path, github.url, github.token, {"git": "true", "git-path": "nothing"})
    (tmp_path / "workspace" / "nothing").mkdir()

    result = action.step("run", expect_failure=True)

    assert result.stdout == (
        "::error::nothing is not a git clone: check the repository out first "
        "(actions/checkout with fetch-depth: 0), or set git: false.\n"
    )
    assert list((tmp_path / "runner" / "temp" / "ghindex-reports").iterdir()) == []  # no run
    assert github.requests == []


MCP_CONFIGS = sorted((ROOT / "examples" / "mcp").rglob("*.json"))


@pytest.mark.parametrize("path", MCP_CONFIGS, ids=relative)
def test_mcp_client_configs_start_the_server_from_a_store(path):
    config = json.loads(path.read_text(encoding="utf-8"))
    servers = config.get("mcpServers") or config["servers"]
    server = servers["ghindex"]
    args = server["args"]
    if server["command"] == "uvx":  # Claude Code starts it from a shell, which has PATH
        assert args[:3] == [
            "--from",
            f"ghindex @ git+https://github.com/ghindex/ghindex@{TAG}",
            "ghindex",
        ]
        args = args[3:]
    else:  # desktop clients see no shell PATH
        assert server["command"].endswith("/bin/ghindex")
        assert server["command"].startswith(("/", "${userHome}/"))
    # and may start the server in an unwritable directory
    assert server["env"]["GHINDEX_WORKDIR"].startswith(("/", "${userHome}/", "${HOME}/"))
    assert args[:2] == ["serve", "--store"]
    parse(args)
