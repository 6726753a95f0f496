"""The Actions path run by a real runner: the repository's workflow files, as users paste
them, executed end to end under nektos/act with GitHub, the store and the artifacts
local (tests/actions/act.py). Each scenario asserts its outcome: snapshot ids, embedded
counts, pieces moved, refusals."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from act import ROOT

from ghindex.snapshot.layout import Manifest, blob_path
from testkit.github_server import issue_node, serve_tiny_repo

pytestmark = pytest.mark.slow
ARTIFACT_EXAMPLE = (ROOT / "examples" / "artifact" / "ghindex.yml").read_text()
S3_EXAMPLE = (ROOT / "examples" / "s3" / "ghindex.yml").read_text()


def ghindex(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ghindex", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )


def published(repository, run, artifact: str, job: str) -> tuple[str, Path, dict]:
    """A run that succeeded and uploaded a store whose pointer names the snapshot its job
    output: (snapshot id, the artifact's store, the counts output)."""
    assert run.returncode == 0, run.log[-6000:]
    snapshot = run.output("snapshot-id", job)
    store = repository.artifact(artifact, run)
    assert (store / "LATEST").read_text().strip() == snapshot
    return snapshot, store, json.loads(run.output("counts", job))


def test_1_a_first_run_publishes_a_snapshot_artifact_that_answers(repository, github, tmp_path):
    serve_tiny_repo(github)
    repository.make_clone({"ghindex.yml": ARTIFACT_EXAMPLE})

    run = repository.act("ghindex.yml", "push", {"ref": "refs/heads/main"})

    snapshot, store, counts = published(repository, run, "ghindex-snapshot", "Build and publish")
    assert counts["issue"] == 3 and counts["issue_comment"] == 3 and counts["doc"] == 1
    assert int(run.output("embedded", "Build and publish")) > 0
    # the packages, the model and its ONNX export are cached per runner, Python and torch
    key = run.output("key", "Build and publish")
    assert re.fullmatch(r"ghindex-Linux-X64-py3\.\d+\.\d+-torch2\.13\.0-default-[0-9a-f]{16}", key)
    pulled = ghindex("pull", "--store", str(store), "--dest", "pulled", "--json", cwd=tmp_path)
    assert json.loads(pulled.stdout)["snapshot_id"] == snapshot
    found = ghindex(
        "search", "rude greeting", "--snapshot", "pulled", "-k", "1", "--json", cwd=tmp_path
    )
    assert json.loads(found.stdout)["results"][0]["handle"].startswith("octo/hello#")


def issue_edited(number: int) -> dict:
    return {"action": "edited", "issue": {"number": number}}


def serve_search(store: Path, query: str, tmp: Path) -> dict:
    """`ghindex serve --store` as an MCP client starts it: the search tool's answer."""
    import asyncio
    import os

    import mcp
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = dict(os.environ) | {"GHINDEX_WORKDIR": str(tmp / "serve-work")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ghindex", "serve", "--store", str(store)], env=env
    )

    async def session(errlog):
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            return await client.call_tool("search", {"query": query, "top_k": 1})

    with open(tmp / "serve-stderr.txt", "w") as errlog:
        found = asyncio.run(session(errlog))
    assert not found.is_error, found.content
    return found.structured_content


def test_2_an_issue_event_after_an_edit_embeds_one_chunk_and_publishes(
    repository, github, tmp_path
):
    serve_tiny_repo(github)
    repository.make_clone({"ghindex.yml": ARTIFACT_EXAMPLE})
    first = repository.act("ghindex.yml", "push", {"ref": "refs/heads/main"})
    assert first.returncode == 0, first.log[-6000:]
    github.repos["octo/hello"]["issues"][0].update(
        body="Greeting number 1 now says bonjour to everyone, wholeheartedly.",
        updatedAt="2024-02-01T00:00:00Z",
    )
    github.requests.clear()

    second = repository.act("ghindex.yml", "issues", issue_edited(1))

    assert second.returncode == 0, second.log[-6000:]
    (artifact,) = [a for a in repository.api.artifacts() if a["run_id"] == str(first.run_id)]
    assert f"previous snapshot: artifact {artifact['id']} of run {first.run_id}" in second.log
    issue_queries = [r for r in github.requests if r["operation"] == "Issues"]
    assert issue_queries and all(r["variables"].get("since") for r in issue_queries)
    assert second.output("embedded", "Build and publish") == "1"
    snapshot = second.output("snapshot-id", "Build and publish")
    assert snapshot != first.output("snapshot-id", "Build and publish")
    store = repository.artifact("ghindex-snapshot", second)
    assert (store / "LATEST").read_text().strip() == snapshot
    found = serve_search(store, "bonjour to everyone", tmp_path)
    assert found["snapshot_id"] == snapshot
    assert found["results"][0]["handle"] == "octo/hello#1"


@pytest.fixture
def bucket(repository):
    """moto's S3 server on 127.0.0.1 with the examples' bucket, for the AWS stand-in."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    # moto keeps its buckets per process, not per server: start from none
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))
    repository.env["STANDIN_S3_ENDPOINT"] = endpoint
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="eu-west-1",
    )
    yield s3, endpoint
    server.stop()


def objects(s3, bucket_name: str = "my-ghindex-bucket") -> dict[str, str]:
    listed = s3.list_objects_v2(Bucket=bucket_name).get("Contents", [])
    return {o["Key"]: o["ETag"] for o in listed}


def age(bucket_name: str, by: timedelta) -> None:
    """Move every object's modification time back, as a store ages between runs (moto
    serves S3 from this process: its keys are the server's own)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    for key in s3_backends[DEFAULT_ACCOUNT_ID]["global"].buckets[bucket_name].keys.values():
        key.last_modified -= by


def manifest_blobs(s3, snapshot_id: str) -> set[str]:
    body = s3.get_object(
        Bucket="my-ghindex-bucket", Key=f"ghindex/snapshots/{snapshot_id}/manifest.json"
    )["Body"].read()
    return {f"ghindex/{blob_path(d)}" for d in Manifest.from_bytes(body, snapshot_id).blobs()}


def s3_env(endpoint: str) -> dict[str, str]:
    import os

    return dict(os.environ) | {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": endpoint,
    }


def test_3_the_s3_example_publishes_moves_only_changes_and_a_full_run_confirms_deletions(
    repository, github, bucket, tmp_path
):
    s3, endpoint = bucket
    s3.create_bucket(
        Bucket="my-ghindex-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    serve_tiny_repo(github)
    # keep 2 in place of the example's 10, so three runs leave one snapshot to remove
    assert S3_EXAMPLE.count("      keep: 10\n") == 1
    repository.make_clone(
        {"ghindex.yml": S3_EXAMPLE.replace("      keep: 10\n", "      keep: 2\n")}
    )
    store = "s3://my-ghindex-bucket/ghindex"

    first = repository.act("ghindex.yml", "schedule", {"schedule": "17 3 * * *"})
    assert first.returncode == 0, first.log[-6000:]
    before = objects(s3)
    snapshot = first.output("snapshot-id", "Build and publish")
    latest = s3.get_object(Bucket="my-ghindex-bucket", Key="ghindex/LATEST")["Body"].read()
    assert latest.decode().strip() == snapshot
    assert repository.api.artifacts() == []  # a store: no snapshot artifact
    age("my-ghindex-bucket", timedelta(days=2))  # the first run was two days ago

    github.repos["octo/hello"]["issues"][1].update(
        title="Greeting 2 is kind now", updatedAt="2024-02-01T00:00:00Z"
    )
    second = repository.act("ghindex.yml", "issues", issue_edited(2))
    assert second.returncode == 0, second.log[-6000:]
    after = objects(s3)
    moved = {k for k in after if before.get(k) != after[k]}
    kept = {k for k in before if after.get(k) == before[k]}
    # the issue and its comment (it names it) again, the rest from the store's cache
    assert second.output("embedded", "Build and publish") == "2"
    assert "ghindex/LATEST" in moved and kept  # unchanged pieces stayed where they were
    assert len(moved) < len(after) / 2, sorted(moved)

    # the second run was two days ago too: gc keeps a snapshot replaced as the newest
    # within the grace (a reader may be pulling it), so the first goes only once it is past
    age("my-ghindex-bucket", timedelta(days=2))
    del github.repos["octo/hello"]["issues"][2]  # issue 3 deleted on GitHub
    third = repository.act("ghindex.yml", "workflow_dispatch", inputs={"full": "true"})
    assert third.returncode == 0, third.log[-6000:]
    final = third.output("snapshot-id", "Build and publish")
    assert final not in (snapshot, second.output("snapshot-id", "Build and publish"))
    env = s3_env(endpoint)
    pulled = subprocess.run(
        [
            sys.executable,
            "-m",
            "ghindex",
            "sql",
            "SELECT handle FROM issues ORDER BY 1",
            "--store",
            store,
            "--json",
        ],
        cwd=tmp_path,
        env=env | {"GHINDEX_WORKDIR": str(tmp_path / "read")},
        capture_output=True,
        text=True,
        check=True,
    )
    handles = [row["handle"] for row in json.loads(pulled.stdout)["rows"]]
    assert handles == ["octo/hello#1", "octo/hello#2"]
    # keep: 2 after the third publish: the first snapshot goes with its pointer
    # generation and the pieces only it named (replaced two days ago, past the 24 hours'
    # grace);
    # the two newest stay whole
    middle = second.output("snapshot-id", "Build and publish")
    left = set(objects(s3))
    manifests = {k for k in left if k.endswith("manifest.json")}
    assert manifests == {f"ghindex/snapshots/{s}/manifest.json" for s in (middle, final)}
    needed = manifest_blobs(s3, middle) | manifest_blobs(s3, final)
    assert {k for k in left if k.startswith("ghindex/blobs/")} == needed
    only_first = {k for k in before if k.startswith("ghindex/blobs/")} - needed
    assert only_first and not only_first & left  # the first one's own pieces were removed
    generations = sorted(k for k in left if k.startswith("ghindex/refs/latest/"))
    named = [
        json.loads(s3.get_object(Bucket="my-ghindex-bucket", Key=k)["Body"].read())
        for k in generations
    ]
    assert [r["snapshot_id"] for r in named] == [middle, final]


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


CALLER_OF_ANOTHER_REPOSITORY = """name: ghindex
on:
  push:
permissions: {}
jobs:
  index:
    uses: ghindex/ghindex/.github/workflows/index.yml@v0.1.0
    permissions:
      contents: read # check out the repository
      issues: read # fetch issues
      pull-requests: read # fetch pull requests
      discussions: read # fetch discussions
      actions: read # download the previous snapshot
      id-token: write # asked for by the cloud logins
    with:
      repos: octo/hello octo/private
"""


def test_7_refusals_are_one_line_and_leave_the_store_and_the_artifact_as_they_were(
    repository, github
):
    serve_tiny_repo(github)
    # a user who adds a pull_request trigger to the example, and a second workflow that
    # indexes a repository the workflow token cannot read
    with_pull_requests = ARTIFACT_EXAMPLE.replace("on:\n  push:", "on:\n  pull_request:\n  push:")
    assert with_pull_requests != ARTIFACT_EXAMPLE
    repository.make_clone(
        {"ghindex.yml": with_pull_requests, "private.yml": CALLER_OF_ANOTHER_REPOSITORY}
    )
    first = repository.act("ghindex.yml", "push", {"ref": "refs/heads/main"})
    assert first.returncode == 0, first.log[-6000:]
    store = repository.artifact("ghindex-snapshot", first)
    kept = files_of(store)
    artifacts = repository.api.artifacts()

    pull_request = repository.act("ghindex.yml", "pull_request", {"number": 7})
    assert pull_request.returncode != 0
    assert pull_request.errors() == [
        "ghindex does not run on pull_request* events (a fork's code, the token's scope): "
        "trigger it on push, schedule, workflow_dispatch, issues, issue_comment, discussion, "
        "discussion_comment or release"
    ]

    private = repository.act("private.yml", "push", {"ref": "refs/heads/main"})
    assert private.returncode != 0
    assert private.errors() == [
        "repository octo/private not found, or the token cannot read it: check the name and "
        "the token's access"
    ]

    # the previous snapshot artifact made unreadable: its manifest is not JSON
    (manifest,) = store.glob("snapshots/*/manifest.json")
    manifest.write_text("{ not json")
    kept = files_of(store)
    unreadable = repository.act("ghindex.yml", "issues", issue_edited(1))
    assert unreadable.returncode != 0
    (line,) = unreadable.errors()
    assert "manifest" in line, line

    assert files_of(store) == kept
    assert repository.api.artifacts() == artifacts  # no run uploaded anything
    for run in (pull_request, private, unreadable):
        assert "Traceback" not in run.job_output() and "unexpected" not in run.job_output()


def test_9_the_self_test_workflow_as_it_stands(repository, github, action_copy):
    serve_tiny_repo(github)
    workflow = (ROOT / ".github" / "workflows" / "self-test.yml").read_text()
    repository.make_clone({"self-test.yml": workflow}, files=action_copy)

    run = repository.act("self-test.yml", "push", {"ref": "refs/heads/main"})

    _snapshot, _store, counts = published(
        repository, run, "ghindex-self-test", "Index this repository"
    )
    assert counts["issue"] == 3 and counts["doc"] > 0 and counts["diff"] > 0
    assert "Success - Main Check the outputs and query the snapshot" in run.log


# A job after the reusable workflow that reads its outputs, as a user's next step would.
REPORT_JOB = """
  report:
    needs: index
    runs-on: ubuntu-latest
    timeout-minutes: 5
    permissions: {}
    steps:
      - name: Report
        env:
          SNAPSHOT: ${{ needs.index.outputs.snapshot-id }}
          EMBEDDED: ${{ needs.index.outputs.embedded }}
          COUNTS: ${{ needs.index.outputs.counts }}
        run: echo "workflow outputs snapshot=$SNAPSHOT embedded=$EMBEDDED counts=$COUNTS"
"""
WORKFLOW_OUTPUTS = re.compile(
    r"\| workflow outputs snapshot=(\S*) embedded=(\S*) counts=(\S*)$", re.M
)


def calling_index_with(**inputs: str) -> str:
    """The artifact example with more inputs given to the reusable workflow, as a user
    adds them under its `with:`, and a job reading its outputs."""
    added = "".join(f"      {key}: {value}\n" for key, value in inputs.items())
    marker = "      full: ${{ inputs.full == true }}\n"
    assert marker in ARTIFACT_EXAMPLE
    return ARTIFACT_EXAMPLE.replace(marker, marker + added) + REPORT_JOB


def workflow_outputs(run) -> dict[str, str]:
    """The reusable workflow's outputs as the job after it read them."""
    (found,) = WORKFLOW_OUTPUTS.findall(run.log)
    return dict(zip(["snapshot-id", "embedded", "counts"], found, strict=True))


def test_6_min_interval_skips_an_event_run_but_never_a_scheduled_or_dispatched_one(
    repository, github
):
    serve_tiny_repo(github)
    repository.make_clone({"ghindex.yml": calling_index_with(**{"min-interval": "60"})})
    first = repository.act("ghindex.yml", "push", {"ref": "refs/heads/main"})
    assert first.returncode == 0, first.log[-6000:]
    github.requests.clear()

    event = repository.act("ghindex.yml", "issues", issue_edited(1))

    assert event.returncode == 0, event.log[-6000:]
    assert re.search(
        r"skipped: the last run started \d+ min ago, less than the min-interval of 60; "
        "the next run catches up",
        event.log,
    )
    assert github.requests == []  # nothing fetched
    assert "Install ghindex" not in event.log  # nothing set up
    assert [a["run_id"] for a in repository.api.artifacts()] == [str(first.run_id)]

    scheduled = repository.act("ghindex.yml", "schedule", {"schedule": "17 */6 * * *"})

    assert scheduled.returncode == 0, scheduled.log[-6000:]
    assert "skipped:" not in scheduled.log
    outputs = workflow_outputs(scheduled)
    assert outputs["embedded"] == "0"  # nothing changed
    store = repository.artifact("ghindex-snapshot", scheduled)
    assert (store / "LATEST").read_text().strip() == outputs["snapshot-id"]
    assert outputs["snapshot-id"] != first.output("snapshot-id", "Build and publish")

    # on demand, minutes after the scheduled run: inside the interval, and it runs
    dispatched = repository.act("ghindex.yml", "workflow_dispatch", inputs={"full": "false"})

    assert dispatched.returncode == 0, dispatched.log[-6000:]
    assert "skipped:" not in dispatched.log
    on_demand = workflow_outputs(dispatched)
    assert on_demand["embedded"] == "0"
    store = repository.artifact("ghindex-snapshot", dispatched)
    assert (store / "LATEST").read_text().strip() == on_demand["snapshot-id"]
    assert on_demand["snapshot-id"] != outputs["snapshot-id"]


def test_4_a_first_build_above_shard_above_embeds_in_parallel_jobs_and_publishes_once(
    repository, github, tmp_path
):
    serve_tiny_repo(github)
    repository.make_clone({"ghindex.yml": calling_index_with(**{"shard-above": "4"})})

    run = repository.act("ghindex.yml", "push", {"ref": "refs/heads/main"})

    assert run.returncode == 0, run.log[-6000:]
    shards = json.loads(run.output("shards", "Build and publish the snapshot"))
    to_embed = int(run.output("to-embed", "Build and publish the snapshot"))
    assert shards == [f"{i}/{len(shards)}" for i in range(1, len(shards) + 1)]
    assert len(shards) == -(-to_embed // 4) >= 2
    embedded = [int(run.output("embedded", f"Embed shard {shard}")) for shard in shards]
    assert sum(embedded) == to_embed and all(embedded)  # disjoint shards, each its part
    outputs = workflow_outputs(run)  # the publishing job's, not the index job's
    assert outputs["embedded"] == "0"
    store = repository.artifact("ghindex-snapshot", run)
    manifests = list(store.glob("snapshots/*/manifest.json"))
    assert [m.parent.name for m in manifests] == [outputs["snapshot-id"]]
    # the same chunks as one job building it all
    single = tmp_path / "single"
    env = {"GHINDEX_WORKDIR": str(single), "GITHUB_TOKEN": github.token}
    ghindex_env("fetch", "--repo", "octo/hello", env=env, cwd=tmp_path)
    ghindex_env("build", "--git", str(repository.clone), env=env, cwd=tmp_path)
    status = json.loads(ghindex_env("status", "--json", env=env, cwd=tmp_path).stdout)
    counts = json.loads(outputs["counts"])
    assert counts == status["counts"]


def ghindex_env(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "ghindex", *args],
        cwd=cwd,
        env=dict(os.environ) | env,
        capture_output=True,
        text=True,
        check=True,
    )


def test_8_the_organisation_example_builds_a_matrix_of_shards_and_merges_them(
    repository, github, bucket, tmp_path
):
    s3, endpoint = bucket
    s3.create_bucket(
        Bucket="my-ghindex-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    for name in ("my-org/alpha", "my-org/beta", "my-org/gamma"):
        serve_tiny_repo(github, name)
    workflow = (ROOT / "examples" / "org" / "ghindex-org.yml").read_text()
    repository.make_clone({"ghindex-org.yml": workflow})
    secrets = {"GITHUB_TOKEN": github.token, "GHINDEX_TOKEN": github.token}

    run = repository.act("ghindex-org.yml", "schedule", {"schedule": "23 2 * * *"}, secrets=secrets)

    assert run.returncode == 0, run.log[-6000:]
    matrix = json.loads(run.output("matrix", "Split the repositories"))
    shards = {entry["shard"]: entry["repos"].split() for entry in matrix["include"]}
    assert sorted(r for repos in shards.values() for r in repos) == [
        "my-org/alpha",
        "my-org/beta",
        "my-org/gamma",
    ]
    assert len(shards) >= 2  # the hash split the three
    for shard, repos in shards.items():
        counts = json.loads(run.output("counts", f"Shard {shard}"))
        assert counts["issue"] == 3 * len(repos), (shard, counts)
        assert (repository.artifact(f"ghindex-shard-{shard}", run) / "state.duckdb").exists()
    pulled = subprocess.run(
        [
            sys.executable,
            "-m",
            "ghindex",
            "sql",
            "SELECT repo, count(*) AS issues FROM issues GROUP BY 1 ORDER BY 1",
            "--store",
            "s3://my-ghindex-bucket/my-org",
            "--json",
        ],
        cwd=tmp_path,
        env=s3_env(endpoint) | {"GHINDEX_WORKDIR": str(tmp_path / "read")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(pulled.stdout)["rows"] == [
        {"repo": "my-org/alpha", "issues": 3},
        {"repo": "my-org/beta", "issues": 3},
        {"repo": "my-org/gamma", "issues": 3},
    ]


def test_5_an_embedding_job_stopped_by_embed_minutes_hands_on_and_a_rerun_goes_on(
    repository, github
):
    github.add_repo(
        "octo/hello",
        issues=[
            issue_node(n, title=f"Report {n}", body=f"Report number {n} says something.")
            for n in range(1, 601)
        ],
    )
    # two shards of about 300 chunks: each job embeds one step of 256, then its time is up
    caller = calling_index_with(**{"shard-above": "400", "embed-minutes": "0.0001"})
    repository.make_clone({"ghindex.yml": caller})

    first = repository.act("ghindex.yml", "push", {"ref": "refs/heads/main"}, record=False)

    assert first.returncode != 0
    to_embed = int(first.output("to-embed", "Build and publish the snapshot"))
    shards = json.loads(first.output("shards", "Build and publish the snapshot"))
    stopped = {s: int(first.output("embedded", f"Embed shard {s}")) for s in shards}
    assert all(n == 256 for n in stopped.values()), stopped  # one embedding step each
    left = {s: int(first.output("unfinished", f"Embed shard {s}")) for s in shards}
    # (beside the first attempt's download of an earlier attempt's vectors, which finds none)
    expected = {
        f"shard {s} stopped after embed-minutes with {left[s]} chunks left: its vectors are "
        "kept; re-run the failed jobs to go on from there"
        for s in shards
    }
    # act's host mode now and then loses the one line a 4 ms step echoes before it fails
    # (seen in 1 run of 4; GitHub keeps it): every line seen is one expected, one at least
    seen = {e for e in first.errors() if e.startswith("shard ")}
    assert seen and seen <= expected, seen
    vectors = [a["name"] for a in repository.api.artifacts()]
    assert sum(name.startswith(f"ghindex-vectors-{first.run_id}-") for name in vectors) == len(
        shards
    )
    assert "ghindex-snapshot" not in vectors  # nothing published

    # "Re-run failed jobs" as near as act comes: the same run, its second attempt, with the
    # first attempt's artifacts (named by the run) still there. act has no such command and
    # runs every job again; the index job, kept on GitHub, plans the same shards and
    # embeds nothing, so running it again changes nothing the embedding jobs are given.
    again = repository.act(
        "ghindex.yml", "push", {"ref": "refs/heads/main"}, run_id=first.run_id, attempt=2
    )

    assert again.returncode == 0, again.log[-6000:]
    assert json.loads(again.output("shards", "Build and publish the snapshot")) == shards
    assert int(again.output("to-embed", "Build and publish the snapshot")) == to_embed
    for s in shards:  # each embedding job went on from its first attempt's vectors
        assert re.search(
            rf"^\[[^\]]*Embed shard {re.escape(s)}[^\]]*\]\s+✅\s+Success - Main Download what "
            "an earlier attempt of this shard embedded",
            again.log,
            flags=re.M,
        ), s
    finished = {s: int(again.output("embedded", f"Embed shard {s}")) for s in shards}
    assert finished == left  # only the rest: nothing embedded twice
    assert sum(stopped.values()) + sum(finished.values()) == to_embed
    outputs = workflow_outputs(again)
    assert outputs["embedded"] == "0"
    # every job of both attempts together embedded each chunk once
    assert sum(int(o.get("embedded", 0)) for r in (first, again) for o in r.outputs.values()) == (
        to_embed
    )
    assert json.loads(outputs["counts"])["issue"] == 600
