"""Commands that move and check snapshots: publish, pull, update, gc, status, audit-secrets."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from ghindex.cli.base import (
    Context,
    cli,
    force_option,
    git_option,
    json_option,
    max_wait_option,
    orgs_option,
    repos_option,
    vectors_option,
    wiki_option,
    workdir_root,
)
from ghindex.cli.output import emit_json, progress, redaction_text, say, visible
from ghindex.progress import size_text

store_option = click.option(
    "--store",
    metavar="URL",
    help="Snapshot store: a path, file://, s3://bucket/prefix, gs://…, az://… (env GHINDEX_STORE).",
)


snapshot_dir_option = click.option(
    "--snapshot",
    type=click.Path(file_okay=False, exists=True),
    help="A local snapshot or workdir (default: WORKDIR).",
)


def _store(obj: Context, url: str | None):
    from ghindex.snapshot import Store

    settings = obj.settings(store=url)
    if not settings.store:
        raise click.UsageError(
            "give --store URL (or set GHINDEX_STORE, or `store` in ghindex.toml)"
        )
    return settings, Store(settings.store)


@cli.command()
@store_option
@json_option
@click.pass_obj
def publish(obj: Context, store: str | None, as_json: bool) -> None:
    """Publish WORKDIR as a new immutable snapshot (the demo, while WORKDIR holds
    nothing of its own, as the reading commands read it); print its id.

    Files already in the store are not uploaded again; the store's pointer moves
    last, and only if no other publisher moved it first.

    \b
    Example:
      ghindex publish --store s3://my-bucket/ghindex
    """
    from ghindex.snapshot import publish as run_publish

    settings, target = _store(obj, store)
    # what the reading commands read: the demo, while WORKDIR holds nothing of its own
    report = run_publish(workdir_root(settings), target, progress=progress(not as_json))
    if report.repaired:
        say(f"warning: {report.repaired}", err=True)
    if as_json:
        emit_json(report.as_dict())
        return
    say(report.snapshot_id)
    say(
        f"{report.files} files, {report.bytes:,} bytes; uploaded {report.blobs_uploaded} of "
        f"{report.blobs} blobs ({report.bytes_uploaded:,} bytes) to {report.store}",
        err=True,
    )


@cli.command()
@store_option
@click.option(
    "--dest",
    type=click.Path(file_okay=False),
    help="Where to put the snapshot (default: WORKDIR). Versions live in DEST/snapshots/; "
    "DEST/current names the one in use; other files in DEST are left alone.",
)
@click.option("--snapshot", "snapshot_id", metavar="ID", help="A snapshot id (default: latest).")
@click.option(
    "--verify",
    is_flag=True,
    help="Hash the files of a copy already up to date (not only their sizes and times) and "
    "bring back any that differ from the manifest.",
)
@json_option
@click.pass_obj
def pull(
    obj: Context,
    store: str | None,
    dest: str | None,
    snapshot_id: str | None,
    verify: bool,
    as_json: bool,
) -> None:
    """Download a snapshot, verify every file, and switch to it atomically.

    Files the destination already holds are not downloaded again. Everything read
    from the store is checked first: a damaged, incomplete or crafted snapshot fails
    the pull and leaves the destination as it was. One pull at a time per DEST.

    \b
    Examples:
      ghindex pull --store s3://my-bucket/ghindex --dest ./snapshot
      ghindex pull --store s3://my-bucket/ghindex --dest ./snapshot --verify
    """
    from ghindex.snapshot import pull as run_pull

    settings, source = _store(obj, store)
    report = run_pull(
        source,
        Path(dest) if dest else settings.workdir,
        snapshot_id=snapshot_id,
        progress=progress(not as_json),
        verify=verify,
    )
    if as_json:
        emit_json(report.as_dict())
        return
    if report.repaired:
        say(f"changed on disk since the pull, brought back: {', '.join(report.repaired)}")
    what = (
        "already up to date"
        if report.unchanged
        else (f"downloaded {report.bytes_downloaded:,} bytes, reused {report.bytes_reused:,}")
    )
    say(f"{report.snapshot_id} in {report.dest}: {what}")


@cli.command()
@repos_option
@orgs_option
@store_option
@git_option
@wiki_option
@click.option("--full", is_flag=True, help="Fetch everything and re-read git sources.")
@force_option
@max_wait_option
@click.option(
    "--shard-above",
    type=click.IntRange(min=1),
    metavar="CHUNKS",
    help="With more than CHUNKS chunks to embed, stop after the fetch and say how many "
    "embedding jobs (`build --shard I/N`) of CHUNKS each to run first; nothing is published.",
)
@vectors_option("after the pull")
@json_option
@click.pass_obj
def update(
    obj: Context,
    repos,
    orgs,
    store,
    git_paths,
    wiki_paths,
    full,
    force,
    max_wait,
    shard_above,
    vector_paths,
    as_json,
) -> None:
    """Pull the latest snapshot (if any), fetch, build, publish: what CI runs.

    With an empty store it starts from nothing. An interrupted update publishes
    nothing and leaves the store as it was.

    \b
    Examples:
      ghindex update --repo psf/requests --git . --store s3://my-bucket/ghindex
      ghindex update --repo kubernetes/kubernetes --store s3://b/k8s --shard-above 100000
      ghindex update --repo kubernetes/kubernetes --store s3://b/k8s --vectors shards/*
    """
    from ghindex.config import github_token
    from ghindex.github.client import GraphQLClient
    from ghindex.index.build import GitSource
    from ghindex.index.embed import require_builder
    from ghindex.pipeline import update as run_update

    require_builder()
    settings, target = _store(obj, store)
    settings = obj.settings(repos=repos, orgs=orgs, store=store, max_wait=max_wait)
    if not settings.repos and not settings.orgs:
        raise click.UsageError("give at least one --repo OWNER/NAME or --org ORG")
    token = github_token()
    sources = [GitSource(Path(p)) for p in git_paths]
    sources += [GitSource(Path(p), wiki=True) for p in wiki_paths]
    shown = progress(not as_json)
    with GraphQLClient(
        settings.graphql_url, token, max_wait=settings.max_wait, progress=shown
    ) as client:
        report = run_update(
            settings,
            target,
            client,
            full=full,
            force=force,
            git=sources,
            progress=shown,
            shard_above=shard_above,
            vectors=[Path(p) for p in vector_paths],
        )
    if as_json:
        emit_json(report)
        return
    if report.get("repaired"):
        say(f"warning: {report['repaired']}", err=True)
    for line in report["fetched"]["warnings"]:
        say(f"warning: {line}", err=True)
    if report["shards"]:
        count = report["shards"]
        say(
            f"{report['built']['to_embed']} chunks to embed, more than {shard_above}: run "
            f"`ghindex build --shard I/{count}` for I = 1..{count} on copies of "
            f"{settings.workdir}, then update again with --vectors and their workdirs"
        )
        return
    say(report["published"]["snapshot_id"])


@cli.command()
@store_option
@click.option("--keep", type=click.IntRange(min=1), help="Snapshots to keep (`keep` setting).")
@click.option(
    "--grace-hours",
    type=click.FloatRange(min=0),
    default=24.0,
    show_default=True,
    help="Never remove blobs or manifests younger than this, nor a snapshot replaced as the "
    "newest less than this ago (at least 1: a shorter grace is raised to 1, with a note).",
)
@json_option
@click.pass_obj
def gc(
    obj: Context, store: str | None, keep: int | None, grace_hours: float, as_json: bool
) -> None:
    """Remove snapshots beyond the newest N and blobs no kept snapshot uses.

    The snapshot the pointer names is never removed, and a publish in flight is
    safe: its manifest and blobs are younger than the grace period.

    \b
    Example:
      ghindex gc --store s3://my-bucket/ghindex --keep 5
    """
    from ghindex.snapshot import gc as run_gc

    settings, target = _store(obj, store)
    report = run_gc(target, keep or settings.keep, grace=timedelta(hours=grace_hours))
    for note in report.notes:
        say(f"note: {note}", err=True)
    if as_json:
        emit_json(report.as_dict())
        return
    say(gc_text(report))


def gc_text(report) -> str:
    """What `ghindex gc` prints: what it kept and exactly what it removed."""

    def snapshots(ids: list[str]) -> str:
        noun = "snapshot" if len(ids) == 1 else "snapshots"
        return f"{len(ids)} {noun}" + (f" ({', '.join(ids)})" if ids else "")

    blobs = "blob" if report.blobs_removed == 1 else "blobs"
    return (
        f"kept {snapshots(report.kept)}; removed {snapshots(report.removed)} and "
        f"{report.blobs_removed} unused {blobs} ({size_text(report.bytes_removed)})"
    )


@cli.command()
@store_option
@snapshot_dir_option
@click.option(
    "--verify",
    is_flag=True,
    help="Read every file of a pulled snapshot and compare it with the manifest's size and "
    "sha256; exit 1 if any differs.",
)
@json_option
@click.pass_obj
def status(
    obj: Context, store: str | None, snapshot: str | None, verify: bool, as_json: bool
) -> None:
    """Snapshot id, age, repositories and their cursors, counts, model, size.

    A local snapshot's state database and index are opened and queried too: a damaged
    file exits 1 and names it. --verify hashes every file the manifest lists.

    \b
    Examples:
      ghindex status
      ghindex status --store s3://my-bucket/ghindex --json
      ghindex status --snapshot ./snap --verify
    """
    from ghindex.query.snapshot import Snapshot
    from ghindex.snapshot import Store, store_status

    if store and snapshot:
        raise click.UsageError("give --snapshot or --store, not both")
    settings = obj.settings(store=store)
    from_store = bool(settings.store and not snapshot)  # --store, GHINDEX_STORE, ghindex.toml
    if verify:
        if from_store:
            raise click.UsageError(
                "--verify reads a local snapshot: give --snapshot DIR (a store's files are "
                "verified by `ghindex pull`)"
            )
        _verify(Path(snapshot) if snapshot else workdir_root(settings), as_json)
        return
    if from_store:
        summary = store_status(Store(settings.store))
    else:
        root = Path(snapshot) if snapshot else workdir_root(settings)
        summary = Snapshot.open(root).status()
    if as_json:
        emit_json(summary)
        return
    say(status_text(summary))


def _verify(root: Path, as_json: bool) -> None:
    """`status --verify`: every file against the manifest; exit 1 when one differs."""
    from ghindex.snapshot.verify import verify

    report = verify(root, progress=progress(not as_json))
    if as_json:
        emit_json(report.as_dict())
    elif not report.verified:
        say(f"{report.source}: {report.reason}")
    else:
        for line in verify_text(report):
            say(line)
    if not report.ok:
        raise SystemExit(1)


def verify_text(report) -> list[str]:
    """What `status --verify` prints: each file that differs, then the verdict."""
    lines = []
    for d in report.differ:
        if d.problem == "missing":
            lines.append(f"{d.path}: missing")
        elif d.problem == "size":
            lines.append(f"{d.path}: {d.size:,} bytes, the manifest says {d.expected_size:,}")
        else:
            got, want = d.sha256[:12], d.expected_sha256[:12]
            lines.append(f"{d.path}: sha256 {got}…, the manifest says {want}…")
    if report.differ:
        lines.append(
            f"{len(report.differ)} of {report.files} files of {report.snapshot_id} differ from "
            "its manifest: restore them with `ghindex pull`"
        )
    else:
        size = size_text(report.bytes)
        lines.append(
            f"all {report.files} files of {report.snapshot_id} ({size}) match its manifest"
        )
    return lines


def status_text(summary: dict) -> str:
    """What `ghindex status` prints for a person, made `visible` (repository names,
    cursors and fetch reasons come from the snapshot, so from GitHub)."""
    model = summary.get("model") or {}
    lines = [
        f"snapshot  {summary['snapshot_id'] or '(local build, not published)'}",
        f"source    {summary['source']}",
        f"created   {summary['created_at']} ({_age(summary['age_seconds'])} ago)",
        f"model     {model.get('name')} ({model.get('dimension')} dimensions)",
        f"size      {size_text(summary['total_bytes'])}",
    ]
    if "checked" in summary:
        lines.append(f"checked   {_checked(summary['checked'])}")
    for kind, count in sorted(summary["counts"].items()):
        lines.append(f"  {kind:<20} {count:>8,}")
    if summary.get("redaction"):
        lines.append(redaction_text(summary["redaction"]))
    for repo, info in sorted(summary["repos"].items()):
        lines.append(f"  {repo}: {_cursors(info.get('cursors') or {})}")
        lines += [f"    {line}" for line in _fetch_health(info.get("fetch") or {})]
    return visible("\n".join(lines))


def _checked(checked: dict) -> str:
    """What status opened: 'state opens, index opens (6 rows)'."""
    state = checked["state"]
    parts = [f"state {'opens' if state == 'ok' else state}"]
    if "index" in checked:
        parts.append(f"index opens ({checked['index_rows']:,} rows)")
    return ", ".join(parts)


def _fetch_health(health: dict) -> list[str]:
    """What the last fetch of a repository could not read or remove, for `status`."""
    lines = []
    last = health.get("last_fetch") or {}
    if last:
        counted = ", ".join(
            f"{last[k]} {k.replace('_', ' ')}"
            for k in ("deleted", "transferred", "inaccessible", "held_back", "hidden", "skipped")
            if last.get(k)
        )
        lines.append(
            f"last fetch {last['status']} at {last['finished_at']}"
            + (f": {counted}" if counted else "")
        )
    for surface, reason in sorted((health.get("refused") or {}).items()):
        lines.append(f"not read: {surface.replace('_', ' ')} ({reason})")
    if health.get("unread_items"):
        lines.append(f"{health['unread_items']} items waiting to be read again")
    return lines


def _cursors(cursors: dict[str, str | None]) -> str:
    """Each surface's newest update read, e.g. 'issues to 2026-11-30 14:02'; 'none' where
    a fetch found nothing yet."""
    return ", ".join(
        f"{surface.replace('_', ' ')} " + (f"to {mark[:16].replace('T', ' ')}" if mark else "none")
        for surface, mark in sorted(cursors.items())
    )


def _age(seconds: int | None) -> str:
    if seconds is None:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@cli.command("audit-secrets")
@store_option
@snapshot_dir_option
@json_option
@click.pass_obj
def audit_secrets(obj: Context, store: str | None, snapshot: str | None, as_json: bool) -> None:
    """Scan a snapshot for credentials with the current rules; exit 1 if any is found.

    Reports each finding's kind and where it is (file, table, column, handle), never
    its value. With --store, the newest snapshot is pulled into a temporary folder,
    scanned and removed.

    \b
    Examples:
      ghindex audit-secrets
      ghindex audit-secrets --snapshot ./snap
      ghindex audit-secrets --store s3://my-bucket/ghindex --json
    """
    from ghindex.cli.output import audit_text
    from ghindex.snapshot import Store
    from ghindex.snapshot.audit import audit, audit_store

    if store and snapshot:
        raise click.UsageError("give --snapshot or --store, not both")
    settings = obj.settings(store=store)
    if store:
        report = audit_store(Store(settings.store))
    else:
        report = audit(Path(snapshot) if snapshot else workdir_root(settings))
    if as_json:
        emit_json(report.as_dict())
    else:
        for line in audit_text(report):
            say(line)
    if report.found:
        raise SystemExit(1)
