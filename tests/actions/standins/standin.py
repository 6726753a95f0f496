"""What the stand-in actions and the stand-in `gh` do, run by the host's python3 (standard
library only, as the runner's own tools would be). Each subcommand keeps the inputs,
outputs and failure lines of the GitHub action or tool it stands in for; the list of
stand-ins, with the real action each replaces, is STANDINS in tests/actions/act.py.

Where they keep what GitHub would keep (artifacts, caches) is given by the harness in the
environment: STANDIN_STATE (this repository's artifacts, shared by the runs of one
scenario) and STANDIN_CACHES (the cache, shared by every scenario of a test run).
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path


def output(**values: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
        out.writelines(f"{key}={value}\n" for key, value in values.items())


def fail(message: str) -> None:
    print(f"::error::{message}")
    sys.exit(1)


def workspace_path(value: str) -> Path:
    path = Path(os.path.expanduser(value or "."))
    return path if path.is_absolute() else Path(os.environ["GITHUB_WORKSPACE"]) / path


@contextlib.contextmanager
def locked(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# --- actions/setup-python --------------------------------------------------------------


def setup_python() -> None:
    home = Path(os.environ["RUNNER_TEMP"]) / "standin-python"
    subprocess.run(
        [os.environ["STANDIN_PYTHON"], "-m", "venv", "--without-pip", str(home)], check=True
    )
    python = home / "bin" / "python"
    (site,) = Path(home, "lib").glob("python3*/site-packages")
    # the test environment's packages after this environment's own: pip finds torch and
    # every dependency installed, and installs ghindex itself here
    (site / "standin-test-packages.pth").write_text(os.environ["STANDIN_SITE"] + "\n")
    version = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with open(os.environ["GITHUB_PATH"], "a", encoding="utf-8") as path:
        path.write(f"{home / 'bin'}\n")
    with open(os.environ["GITHUB_ENV"], "a", encoding="utf-8") as env:
        env.write(f"pythonLocation={home}\n")
    print(f"Python {version} at {python} (stand-in for actions/setup-python)")
    output(**{"python-version": version, "python-path": str(python)})


# --- actions/cache -----------------------------------------------------------------------


def stored_name(path: str) -> str:
    """A cached path as every runner names it: under $HOME as `~/…`."""
    absolute = os.path.abspath(os.path.expanduser(path))
    home = os.path.expanduser("~")
    if absolute == home or absolute.startswith(home + os.sep):
        return "~" + absolute[len(home) :]
    return absolute


def cache_entries(caches: Path) -> list[dict]:
    entries = []
    for meta in caches.glob("*/meta.json"):
        entries.append(json.loads(meta.read_text()) | {"folder": str(meta.parent)})
    return sorted(entries, key=lambda e: e["created"], reverse=True)


def keep_or_copy(source: str, target: str) -> None:
    if not os.path.exists(target):
        shutil.copy2(source, target)


def cache_restore() -> None:
    caches = Path(os.environ["STANDIN_CACHES"])
    paths = [line.strip() for line in os.environ["CACHE_PATHS"].splitlines() if line.strip()]
    names = [stored_name(p) for p in paths]
    key = os.environ["CACHE_KEY"]
    prefixes = [k.strip() for k in os.environ.get("CACHE_RESTORE_KEYS", "").splitlines()]
    # as GitHub's cache: an entry matches only with the same paths (its "version")
    entries = [e for e in cache_entries(caches) if e["names"] == names]
    found = next((e for e in entries if e["key"] == key), None)
    for prefix in [p for p in prefixes if p] if found is None else []:
        found = next((e for e in entries if e["key"].startswith(prefix)), None)
        if found:
            break
    if found:
        for index, name in enumerate(names):
            source = Path(found["folder"]) / str(index)
            if source.exists():
                # files already there stay: another job of the machine may be reading them
                shutil.copytree(
                    source, os.path.expanduser(name), dirs_exist_ok=True, copy_function=keep_or_copy
                )
        print(f"Cache restored from key: {found['key']}")
    else:
        print(f"Cache not found for input keys: {', '.join([key, *prefixes])}")
    hit = found is not None and found["key"] == key
    if not hit:  # the real action's post step saves it when the job succeeds
        pending = Path(os.environ["STANDIN_STATE"]) / "pending-caches"
        pending.mkdir(parents=True, exist_ok=True)
        record = {"key": key, "names": names, "home": os.path.expanduser("~")}
        (pending / f"{uuid.uuid4().hex}.json").write_text(json.dumps(record))
    output(
        **{
            "cache-hit": "true" if hit else "false",
            "cache-primary-key": key,
            "cache-matched-key": found["key"] if found else "",
        }
    )


def cache_save(record: dict, caches: Path) -> None:
    """The post step of actions/cache, run by the harness when the job has succeeded."""
    with locked(caches):
        if any(e["key"] == record["key"] for e in cache_entries(caches)):
            return  # GitHub keeps the first entry of a key
        folder = caches / hashlib.sha256(record["key"].encode()).hexdigest()[:16]
        for index, name in enumerate(record["names"]):
            source = Path(record["home"] + name[1:] if name.startswith("~") else name)
            if source.is_dir():
                shutil.copytree(source, folder / str(index))
        folder.mkdir(parents=True, exist_ok=True)
        created = datetime.now(UTC).isoformat()
        meta = {"key": record["key"], "names": record["names"], "created": created}
        (folder / "meta.json").write_text(json.dumps(meta))


# --- actions/upload-artifact and download-artifact ---------------------------------------


def artifacts_root() -> Path:
    return Path(os.environ["STANDIN_STATE"]) / "artifacts"


def upload_artifact() -> None:
    name, run = os.environ["ARTIFACT_NAME"], os.environ["GITHUB_RUN_ID"]
    sources = [
        workspace_path(line.strip())
        for line in os.environ["ARTIFACT_PATH"].splitlines()
        if line.strip()
    ]
    files = [f for s in sources if s.exists() for f in ([s] if s.is_file() else s.rglob("*"))]
    if not any(f.is_file() for f in files):
        message = (
            f"No files were found with the provided path: {os.environ['ARTIFACT_PATH']}. "
            "No artifacts will be uploaded."
        )
        behaviour = os.environ.get("IF_NO_FILES_FOUND", "warn")
        if behaviour == "error":
            fail(message)
        print(f"::warning::{message}" if behaviour == "warn" else message)
        return
    root = artifacts_root()
    with locked(root):
        index_file = root / "index.json"
        index = json.loads(index_file.read_text()) if index_file.exists() else []
        same = [a for a in index if a["name"] == name and a["run_id"] == run]
        if same and os.environ.get("OVERWRITE") != "true":
            fail(
                "Failed to CreateArtifact: Received non-retryable error: Failed request: "
                "(409) Conflict: an artifact with this name already exists on the workflow run"
            )
        target = root / run / name
        shutil.rmtree(target, ignore_errors=True)
        for source in sources:
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            elif source.is_file():
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / source.name)
        size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
        artifact_id = max((a["id"] for a in index), default=0) + 1
        index = [a for a in index if a not in same]
        index.append(
            {
                "id": artifact_id,
                "name": name,
                "run_id": run,
                "size_in_bytes": size,
                "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "expired": False,
            }
        )
        index_file.write_text(json.dumps(index, indent=1))
    print(f"Artifact {name} has been successfully uploaded! Final size is {size} bytes.")
    repository = os.environ["GITHUB_REPOSITORY"]
    url = f"https://github.com/{repository}/actions/runs/{run}/artifacts/{artifact_id}"
    output(**{"artifact-id": str(artifact_id), "artifact-url": url, "artifact-digest": ""})


def download_artifact() -> None:
    name, pattern = os.environ.get("ARTIFACT_NAME", ""), os.environ.get("ARTIFACT_PATTERN", "")
    run = os.environ.get("ARTIFACT_RUN_ID") or os.environ["GITHUB_RUN_ID"]
    if os.environ.get("ARTIFACT_RUN_ID") and not os.environ.get("ARTIFACT_TOKEN"):
        fail("Inputs `github-token` and `run-id` must be set together")
    path = workspace_path(os.environ.get("ARTIFACT_PATH", ""))
    folder = artifacts_root() / run
    if name:
        if not (folder / name).is_dir():
            fail(f"Unable to download artifact(s): Artifact not found for name: {name}")
        shutil.copytree(folder / name, path, dirs_exist_ok=True)
        print(f"Artifact download completed successfully: {name} of run {run}")
    else:
        found = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        chosen = [n for n in found if fnmatch.fnmatchcase(n, pattern or "*")]
        merge = os.environ.get("MERGE_MULTIPLE") == "true"
        for each in chosen:
            shutil.copytree(folder / each, path if merge else path / each, dirs_exist_ok=True)
        print(f"Found {len(chosen)} artifact(s): {', '.join(chosen)}")
    output(**{"download-path": str(path)})


# --- aws-actions/configure-aws-credentials -----------------------------------------------


def aws_login() -> None:
    if not os.environ.get("ROLE"):
        fail(
            "Credentials could not be loaded, please check your action inputs: "
            "Could not load credentials from any providers"
        )
    region = os.environ["REGION"]
    with open(os.environ["GITHUB_ENV"], "a", encoding="utf-8") as env:
        env.write(
            "AWS_ACCESS_KEY_ID=testing\nAWS_SECRET_ACCESS_KEY=testing\n"
            f"AWS_SESSION_TOKEN=testing\nAWS_REGION={region}\nAWS_DEFAULT_REGION={region}\n"
            # the bucket is moto's on 127.0.0.1: the one thing the real action never sets
            f"AWS_ENDPOINT_URL={os.environ['STANDIN_S3_ENDPOINT']}\n"
        )
    print(f"Assumed role {os.environ['ROLE']} (stand-in: moto's credentials)")
    output(**{"aws-account-id": "123456789012"})


# --- GitHub's CLI ------------------------------------------------------------------------


OWNER_REPOSITORIES = """
query($login: String!, $after: String, $archived: Boolean, $fork: Boolean) {
  repositoryOwner(login: $login) {
    repositories(first: 100, after: $after, isArchived: $archived, isFork: $fork) {
      nodes { nameWithOwner }
      pageInfo { hasNextPage endCursor }
    }
  }
}
"""


def gh_repo_list(args: list[str]) -> None:
    """`gh repo list OWNER [--limit N] [--no-archived] [--source] --json nameWithOwner`,
    read from GITHUB_GRAPHQL_URL as the real gh reads GitHub's GraphQL API."""
    owner = args[0]
    limit = int(args[args.index("--limit") + 1]) if "--limit" in args else 30
    variables = {
        "login": owner,
        "archived": False if "--no-archived" in args else None,
        "fork": False if "--source" in args else None,
    }
    names, after = [], None
    while len(names) < limit:
        body = json.dumps({"query": OWNER_REPOSITORIES, "variables": variables | {"after": after}})
        request = urllib.request.Request(
            os.environ["GITHUB_GRAPHQL_URL"], data=body.encode(), method="POST"
        )
        request.add_header("Authorization", f"bearer {os.environ.get('GH_TOKEN', '')}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as answer:
            data = json.load(answer)
        owner_data = (data.get("data") or {}).get("repositoryOwner")
        if owner_data is None:
            print(
                f"GraphQL: Could not resolve to a RepositoryOwner with the login of '{owner}'.",
                file=sys.stderr,
            )
            sys.exit(1)
        page = owner_data["repositories"]
        names += [node["nameWithOwner"] for node in page["nodes"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    print(json.dumps([{"nameWithOwner": name} for name in names[:limit]]))


def gh(args: list[str]) -> None:
    """`gh api [-X METHOD] ENDPOINT [-f KEY=VALUE]...` against GITHUB_API_URL, and
    `gh repo list` against GITHUB_GRAPHQL_URL."""
    if args[:2] == ["repo", "list"]:
        return gh_repo_list(args[2:])
    if args[:1] != ["api"]:
        print(f"gh stand-in: `gh {' '.join(args)}` is not stood in for")
        sys.exit(1)
    method, endpoint, fields = "GET", "", []
    rest = args[1:]
    while rest:
        arg = rest.pop(0)
        if arg in ("-X", "--method"):
            method = rest.pop(0)
        elif arg in ("-f", "--raw-field", "-F", "--field"):
            fields.append(tuple(rest.pop(0).split("=", 1)))
        else:
            endpoint = arg
    token = os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN") or ""
    url = f"{os.environ['GITHUB_API_URL'].rstrip('/')}/{endpoint.lstrip('/')}"
    if fields:
        url += "?" + urllib.parse.urlencode(fields)
    request = urllib.request.Request(url, method=method)
    if token:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            sys.stdout.write(answer.read().decode())
    except urllib.error.HTTPError as error:
        body = json.loads(error.read() or b"{}")
        print(f"gh: {body.get('message', error.reason)} (HTTP {error.code})", file=sys.stderr)
        sys.exit(1)


COMMANDS = {
    "setup-python": setup_python,
    "cache-restore": cache_restore,
    "upload-artifact": upload_artifact,
    "download-artifact": download_artifact,
    "aws-login": aws_login,
}

if __name__ == "__main__":
    if sys.argv[1] == "gh":
        gh(sys.argv[2:])
    else:
        COMMANDS[sys.argv[1]]()
