"""Commands that read GitHub and git: fetch, build."""

from __future__ import annotations

from pathlib import Path

import click

from ghindex.cli.base import (
    UNFINISHED,
    Context,
    cli,
    force_option,
    git_option,
    json_option,
    max_wait_option,
    orgs_option,
    precision_option,
    repo_values,
    repos_option,
    vectors_option,
    wiki_option,
)
from ghindex.cli.output import emit_json, progress, say
from ghindex.config import DEFAULT_DEVICE, DEVICES, github_token
from ghindex.errors import ConfigError


@cli.command()
@repos_option
@orgs_option
@click.option(
    "--full",
    is_flag=True,
    help="Ignore the high-water marks, read everything, and remove items GitHub confirms gone.",
)
@force_option
@max_wait_option
@json_option
@click.pass_obj
def fetch(
    obj: Context,
    repos: tuple[str, ...],
    orgs: tuple[str, ...],
    full: bool,
    force: bool,
    max_wait: float | None,
    as_json: bool,
) -> None:
    """Pull issues, pull requests, discussions, releases, comments, reviews and
    links into WORKDIR/state.duckdb, incrementally.

    Needs GITHUB_TOKEN (or GH_TOKEN). GHINDEX_GRAPHQL_URL points it at GitHub
    Enterprise Server or any server speaking GitHub's GraphQL schema.

    \b
    What GitHub answers with an error (an item, a surface the token may not read) is
    skipped with a warning and read again on the next run; see docs/github-behaviour.md.

    \b
    Examples:
      ghindex fetch --repo psf/requests --repo encode/httpx
      ghindex fetch --org encode --max-wait 600
      ghindex fetch --repo psf/requests --full     # also remove what GitHub deleted
    """
    settings = obj.settings(repos=repos, orgs=orgs, max_wait=max_wait)
    if not settings.repos and not settings.orgs:
        raise click.UsageError(
            "give at least one --repo OWNER/NAME or --org ORG (or `repos` / `orgs` in ghindex.toml)"
        )
    token = github_token()
    from ghindex.github.client import GraphQLClient
    from ghindex.github.ingest import chosen_repos
    from ghindex.github.ingest import fetch as run_fetch

    shown = progress(not as_json)
    with GraphQLClient(
        settings.graphql_url, token, max_wait=settings.max_wait, progress=shown
    ) as client:
        notes: list[str] = []
        report = run_fetch(
            settings.state_path,
            client,
            chosen_repos(client, settings, notes),
            full=full,
            force=force,
            redacted=settings.redact,
            progress=shown,
            notes=notes,
        )
    if as_json:
        emit_json(report.as_dict())
        return
    for line in report.warnings():
        say(f"warning: {line}", err=True)
    for repo in report.repos:
        gone = f", {len(repo.deleted)} deleted" if repo.deleted else ""
        moved = f", {len(repo.transferred)} transferred away" if repo.transferred else ""
        say(
            f"{repo.repo}: {repo.issues} issues, {repo.pull_requests} pull requests, "
            f"{repo.discussions} discussions, {repo.releases} releases{gone}{moved}"
        )
    say(f"{report.requests} requests ({report.cost} rate-limit points)")


@cli.command()
@click.option(
    "--model",
    metavar="NAME_OR_PATH",
    help="sentence-transformers model (env GHINDEX_MODEL; default all-MiniLM-L6-v2).",
)
@precision_option
@click.option(
    "--device",
    type=click.Choice(DEVICES),
    help="Where to embed: a CUDA GPU through ONNX Runtime (or torch), the CPU, or auto: "
    f"the GPU when ONNX Runtime has one (env GHINDEX_DEVICE; default {DEFAULT_DEVICE}).",
)
@git_option
@wiki_option
@click.option(
    "--repo",
    metavar="OWNER/NAME",
    callback=repo_values,
    help="Repository the --git/--wiki clones belong to (default: their origin remote).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Rebuild the index beside the old one (which serves until the new one is whole) "
    "and re-read git sources; the embedding caches stay.",
)
@click.option(
    "--shard",
    metavar="I/N",
    help="Embed only shard I of N of the chunks into the cache, writing no index: run "
    "N at once (an Actions matrix, any mix of runners), then `ghindex merge` them.",
)
@click.option(
    "--plan",
    is_flag=True,
    help="Count the chunks the build would embed (not in the cache; with --shard, that "
    "shard's) and stop: no model is loaded and no index written.",
)
@click.option(
    "--stop-after",
    type=click.FloatRange(min=0, min_open=True),
    metavar="MINUTES",
    help="Stop embedding after MINUTES, keeping what is embedded in the cache, write no "
    "index and exit 3: the next build goes on from there (a job's time limit).",
)
@vectors_option("first (what a stopped attempt, or a parallel build, embedded)")
@json_option
@click.pass_obj
def build(
    obj: Context,
    model: str | None,
    precision: str | None,
    device: str | None,
    git_paths: tuple[str, ...],
    wiki_paths: tuple[str, ...],
    repo: str | None,
    full: bool,
    shard: str | None,
    plan: bool,
    stop_after: float | None,
    vector_paths: tuple[str, ...],
    as_json: bool,
) -> None:
    """Chunk, embed and index WORKDIR/state.duckdb into WORKDIR/lance.

    Only chunks whose text is new are embedded; the rest come from the cache.
    With --git/--wiki, docs, commits and wiki pages are read from the clones'
    git objects (never their working trees) into the state first.

    \b
    Examples:
      ghindex build
      ghindex build --git . --wiki ../project.wiki
      ghindex build --precision int8
      ghindex build --shard 2/4        # one job of four; then: ghindex merge
      ghindex build --plan --json      # how much there is to embed
      ghindex build --shard 2/4 --stop-after 150 --vectors earlier/2
    """
    from ghindex.config import parse_repo
    from ghindex.index.build import GitSource, Shard
    from ghindex.index.build import build as run_build
    from ghindex.index.embed import canonical_model_name, require_builder
    from ghindex.index.merge import merge_vectors

    require_builder()
    part = Shard.parse(shard) if shard else None
    if part and full:
        raise ConfigError("--shard embeds into the cache only: leave out --full")
    if plan and full:
        raise ConfigError("--plan counts what a build would embed: leave out --full")

    settings = obj.settings(model=model, precision=precision, device=device)
    owner = parse_repo(repo) if repo else None
    sources = [GitSource(Path(p), repo=owner) for p in git_paths]
    sources += [GitSource(Path(p), wiki=True, repo=owner) for p in wiki_paths]
    shown = progress(not as_json)
    if vector_paths:
        shown.note(f"joining the embedding caches of {len(vector_paths)} builds")
        model_name = canonical_model_name(settings.model)
        merge_vectors(settings.workdir, [Path(p) for p in vector_paths], model_name, progress=shown)
    report = run_build(
        settings,
        full=full,
        git=sources,
        progress=shown,
        shard=part,
        plan=plan,
        stop_after=None if stop_after is None else stop_after * 60,
    )
    if as_json:
        emit_json(report.as_dict())
        if report.unfinished:
            raise SystemExit(UNFINISHED)
        return
    for line in report.notes:
        say(f"note: {line}", err=True)
    for source in report.git:
        say(
            f"{source['repo']} {source['source']} at {source['commit'][:12]}: "
            f"{source['docs_added']} docs added, {source['docs_updated']} updated, "
            f"{source['docs_removed']} removed; {source['commits_added']} commits added"
        )
    if plan:
        say(
            f"{report.to_embed} of {report.chunks} chunks to embed"
            + (f" in shard {part}" if part else "")
            + f", {report.from_cache} in the cache; nothing embedded or indexed"
        )
        return
    if report.unfinished:
        say(
            f"stopped after {stop_after:g} min: embedded {report.embedded} chunks into the "
            f"cache, {report.unfinished} left; no index written. Run the same build again "
            "to go on."
        )
        raise SystemExit(UNFINISHED)
    if part:
        say(
            f"shard {part}: embedded {report.embedded} chunks into the cache in "
            f"{settings.lance_path} ({report.seconds:.1f}s); no index written"
        )
        return
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts.items()) or "nothing"
    say(f"indexed {counts}: {report.chunks} chunks in {settings.lance_path}")
    say(
        f"embedded {report.embedded} chunks, {report.from_cache} from the cache "
        f"({report.model}, {report.precision}, {report.seconds:.1f}s)"
    )


@cli.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--model", metavar="NAME_OR_PATH", help="The model every shard was built with.")
@precision_option
@json_option
@click.pass_obj
def merge(
    obj: Context, shards: tuple[str, ...], model: str | None, precision: str | None, as_json: bool
) -> None:
    """Combine workdirs built separately (one per shard of repositories) into WORKDIR
    and build it, reusing the shards' embeddings: nothing is embedded again.

    \b
    Example:
      ghindex merge shards/a shards/b shards/c
    """
    from ghindex.index.build import build as run_build
    from ghindex.index.embed import canonical_model_name, require_builder
    from ghindex.index.merge import merge as run_merge

    require_builder()
    settings = obj.settings(model=model, precision=precision)
    shown = progress(not as_json)
    merged = run_merge(
        settings.root,
        [Path(s) for s in shards],
        canonical_model_name(settings.model),
        precision=settings.precision,
        redacted=settings.redact,
        progress=shown,
    )
    for line in merged.notes:
        say(f"note: {line}", err=True)
    report = run_build(settings, precision=merged.precision, progress=shown)
    if as_json:
        emit_json({"merged": merged.as_dict(), "built": report.as_dict()})
        return
    say(
        f"merged {len(merged.shards)} shards into {settings.workdir}: {report.chunks} chunks, "
        f"{report.embedded} embedded, {report.from_cache} from the cache"
    )
