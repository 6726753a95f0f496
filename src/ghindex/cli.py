"""The `ghindex` command line: parse, call one library function, print.

stdout carries results (a JSON document with --json); talk goes to stderr.
Exit codes: 0 success, 1 failure (one line, no traceback unless --debug),
2 usage error.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import click

from ghindex import __version__
from ghindex.config import Settings, github_token, load_settings
from ghindex.documents import TYPES
from ghindex.errors import GhindexError
from ghindex.output import configure_logging, emit_json, progress, search_text

_DATE_FORMATS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%SZ"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")


@dataclass
class Context:
    config: str | None
    workdir: str | None
    debug: bool

    def settings(self, **flags: object) -> Settings:
        return load_settings(self.config, workdir=self.workdir, **flags)


class _Group(click.Group):
    """Turns expected failures into one-line messages and exit code 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GhindexError as exc:
            if ctx.obj is not None and ctx.obj.debug:
                raise
            raise click.ClickException(str(exc)) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if ctx.obj is not None and ctx.obj.debug:
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise click.ClickException(
                f"unexpected {type(exc).__name__}: {first} (rerun with --debug for details)"
            ) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ghindex")
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    help="Settings file (default: ./ghindex.toml when it exists).",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    help="Local build directory (env GHINDEX_WORKDIR, default .ghindex).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for failures.")
@click.pass_context
def cli(ctx: click.Context, config: str | None, workdir: str | None, debug: bool) -> None:
    """GitHub repositories' working state as a searchable, portable snapshot.

    \b
    Quick start:
      ghindex demo                                 # offline, on bundled sample data
      export GITHUB_TOKEN=...
      ghindex fetch --repo owner/name              # issues and PRs into .ghindex/
      ghindex build                                # embeddings + full-text index
      ghindex search "flaky test on windows" --state open -k 5
    """
    ctx.obj = Context(config=config, workdir=workdir, debug=debug)
    configure_logging(debug)


@cli.command()
@click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="OWNER/NAME",
    help="Repository to fetch; repeat for several (default: `repos` in ghindex.toml).",
)
@click.option(
    "--org",
    "orgs",
    multiple=True,
    metavar="ORG",
    help="Every repository of this organisation or user, filtered by the include, exclude, "
    "archived and forks settings of ghindex.toml (repeatable).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Ignore the high-water marks, read everything, and remove items GitHub confirms gone.",
)
@click.option(
    "--max-wait",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Longest wait for a rate-limit reset before stopping with progress saved "
    "(env GHINDEX_MAX_WAIT, default 3600).",
)
@json_option
@click.pass_obj
def fetch(
    obj: Context,
    repos: tuple[str, ...],
    orgs: tuple[str, ...],
    full: bool,
    max_wait: float | None,
    as_json: bool,
) -> None:
    """Pull issues, pull requests, discussions, releases, comments, reviews and
    links into WORKDIR/state.duckdb, incrementally.

    Needs GITHUB_TOKEN (or GH_TOKEN). GHINDEX_GRAPHQL_URL points it at GitHub
    Enterprise Server or any server speaking GitHub's GraphQL schema.

    \b
    Examples:
      ghindex fetch --repo psf/requests --repo encode/httpx
      ghindex fetch --org encode --max-wait 600
    """
    settings = obj.settings(repos=repos, orgs=orgs, max_wait=max_wait)
    if not settings.repos and not settings.orgs:
        raise click.UsageError(
            "give at least one --repo OWNER/NAME or --org ORG (or `repos` / `orgs` in ghindex.toml)"
        )
    token = github_token()
    from ghindex.fetch.client import GraphQLClient
    from ghindex.ingest import fetch as run_fetch
    from ghindex.ingest import organisation_repos

    with GraphQLClient(settings.graphql_url, token, max_wait=settings.max_wait) as client:
        chosen = list(settings.repos)
        for org in settings.orgs:
            found = organisation_repos(client, org, settings.select)
            if not found:
                raise click.ClickException(
                    f"{org} has no repositories that the include/exclude/archived/forks "
                    "settings select: check them in ghindex.toml"
                )
            chosen += found
        report = run_fetch(
            settings.state_path,
            client,
            list(dict.fromkeys(chosen)),
            full=full,
            progress=progress(not as_json),
        )
    if as_json:
        emit_json(report.as_dict())
        return
    for repo in report.repos:
        gone = f", {len(repo.deleted)} deleted" if repo.deleted else ""
        moved = f", {len(repo.transferred)} transferred away" if repo.transferred else ""
        click.echo(
            f"{repo.repo}: {repo.issues} issues, {repo.pull_requests} pull requests, "
            f"{repo.discussions} discussions, {repo.releases} releases{gone}{moved}"
        )
    click.echo(f"{report.requests} requests ({report.cost} rate-limit points)")


@cli.command()
@click.option(
    "--model",
    metavar="NAME_OR_PATH",
    help="sentence-transformers model (env GHINDEX_MODEL; default all-MiniLM-L6-v2).",
)
@click.option(
    "--git",
    "git_paths",
    multiple=True,
    metavar="PATH",
    type=click.Path(file_okay=False, exists=True),
    help="A local clone: read its docs and default-branch commits (repeatable).",
)
@click.option(
    "--wiki",
    "wiki_paths",
    multiple=True,
    metavar="PATH",
    type=click.Path(file_okay=False, exists=True),
    help="A clone of OWNER/NAME.wiki.git: read its pages (repeatable).",
)
@click.option(
    "--repo",
    metavar="OWNER/NAME",
    help="Repository the --git/--wiki clones belong to (default: their origin remote).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Drop the index and embedding cache and re-read git sources; rebuild.",
)
@json_option
@click.pass_obj
def build(
    obj: Context,
    model: str | None,
    git_paths: tuple[str, ...],
    wiki_paths: tuple[str, ...],
    repo: str | None,
    full: bool,
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
    """
    from ghindex.build import GitSource
    from ghindex.build import build as run_build
    from ghindex.config import parse_repo

    settings = obj.settings(model=model)
    owner = parse_repo(repo) if repo else None
    sources = [GitSource(Path(p), repo=owner) for p in git_paths]
    sources += [GitSource(Path(p), wiki=True, repo=owner) for p in wiki_paths]
    report = run_build(settings, full=full, git=sources, progress=progress(not as_json))
    if as_json:
        emit_json(report.as_dict())
        return
    for source in report.git:
        click.echo(
            f"{source['repo']} {source['source']} at {source['commit'][:12]}: "
            f"{source['docs_added']} docs added, {source['docs_updated']} updated, "
            f"{source['docs_removed']} removed; {source['commits_added']} commits added"
        )
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts.items()) or "nothing"
    click.echo(f"indexed {counts}: {report.chunks} chunks in {settings.lance_path}")
    click.echo(
        f"embedded {report.embedded} chunks, {report.from_cache} from the cache "
        f"({report.model}, {report.seconds:.1f}s)"
    )


@cli.command()
@click.argument("query")
@click.option("--repo", "repos", multiple=True, metavar="OWNER/NAME", help="Only this repo.")
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(sorted({*TYPES, "commit"})),
    help="Only this kind of document, or of entity (issue includes its comments).",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(["open", "closed", "merged"], case_sensitive=False),
    help="Only items in this state.",
)
@click.option("--label", "labels", multiple=True, help="Only items with this label (repeat: all).")
@click.option("--any-label", "any_labels", multiple=True, help="Only items with one of these.")
@click.option("--not-label", "not_labels", multiple=True, help="Only items without this label.")
@click.option("--author", "authors", multiple=True, metavar="LOGIN", help="Only by this author.")
@click.option("--assignee", "assignees", multiple=True, metavar="LOGIN", help="Assigned to.")
@click.option("--milestone", "milestones", multiple=True, help="In this milestone (title).")
@click.option("--path", "path_prefix", metavar="PREFIX", help="Docs and diffs under this path.")
@click.option("--since", type=click.DateTime(_DATE_FORMATS), help="Updated at or after.")
@click.option("--until", type=click.DateTime(_DATE_FORMATS), help="Updated before.")
@click.option("--created-since", type=click.DateTime(_DATE_FORMATS), help="Created at or after.")
@click.option("--created-until", type=click.DateTime(_DATE_FORMATS), help="Created before.")
@click.option(
    "-k", "k", type=click.IntRange(1, 100), default=10, show_default=True, help="Number of results."
)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "dense", "sparse"]),
    default="hybrid",
    show_default=True,
    help="hybrid: vectors + BM25 fused by RRF; dense: vectors; sparse: BM25.",
)
@click.option(
    "--rerank",
    is_flag=True,
    help="Rerank the top candidates with a cross-encoder (GHINDEX_RERANK_MODEL).",
)
@click.option(
    "--mmr",
    type=click.FloatRange(0, 1),
    metavar="LAMBDA",
    help="Diversify results by maximal marginal relevance (1 = relevance only).",
)
@click.option(
    "--snapshot",
    type=click.Path(file_okay=False, exists=True),
    help="Snapshot or workdir to search (default: WORKDIR).",
)
@json_option
@click.pass_obj
def search(
    obj: Context,
    query: str,
    k: int,
    mode: str,
    rerank: bool,
    mmr: float | None,
    snapshot: str | None,
    as_json: bool,
    **filter_options: object,
) -> None:
    """Hybrid search over the index; results are whole items.

    A query that is an identifier (#123, owner/repo#12, a commit SHA or prefix,
    a handle, a file path) finds that item first.

    \b
    Examples:
      ghindex search "flaky test on windows" --state open --label bug -k 5
      ghindex search "TypeError: cannot pickle" --mode sparse --json
      ghindex search "#1234"
    """
    from ghindex.search import Filters, Searcher

    root = Path(snapshot) if snapshot else obj.settings().workdir
    options = {
        key: (tuple(v.lower() for v in value) if key == "states" else value)
        for key, value in filter_options.items()
    }
    for key in ("since", "until", "created_since", "created_until"):
        if options.get(key) is not None:
            options[key] = options[key].replace(tzinfo=UTC)
    response = Searcher(root / "lance").search(
        query, filters=Filters(**options), k=k, mode=mode, rerank=rerank, mmr=mmr
    )
    if as_json:
        emit_json(response.as_dict())
    else:
        click.echo(search_text(response))


@cli.command()
@click.option(
    "--dest",
    type=click.Path(file_okay=False),
    help="Where to build the demo snapshot (default: WORKDIR/demo).",
)
@json_option
@click.pass_obj
def demo(obj: Context, dest: str | None, as_json: bool) -> None:
    """Build a snapshot from the bundled sample, offline, and run example searches.

    The sample is real GitHub data recorded by the github3.py project (issues and
    pull requests of betamax, github3.py, requests and others).

    \b
    Example:
      ghindex demo
    """
    from ghindex.demo import run_demo

    base = obj.settings()
    settings = Settings(
        workdir=Path(dest) if dest else base.workdir / "demo",
        graphql_url=base.graphql_url,
        model=base.model,
    )
    report = run_demo(settings, progress=progress(not as_json))
    if as_json:
        emit_json(report.as_dict())
        return
    click.echo(
        f"loaded {report.issues} issues and {report.pull_requests} pull requests "
        f"of {report.repos} repositories into {settings.workdir}"
    )
    click.echo(
        f"indexed {report.build.chunks} chunks ({report.build.embedded} embedded, "
        f"{report.build.from_cache} from the cache) with {report.build.model}"
    )
    for response in report.searches:
        filters = " ".join(f"--{k.rstrip('s')} {' '.join(v)}" for k, v in response.filters.items())
        click.echo(
            f"\n$ ghindex search {response.query!r} --mode {response.mode} {filters}".rstrip()
        )
        click.echo(search_text(response))
    click.echo(f'\nTry your own: ghindex search --snapshot {settings.workdir} "your question"')


@cli.command()
@click.argument("handle")
@click.option(
    "--hops",
    type=click.IntRange(1, 2),
    default=1,
    show_default=True,
    help="1: the item's own links; 2: also the links of those items.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND",
    help="Only links of this kind, e.g. closes, duplicate_of, mentions (repeatable).",
)
@click.option(
    "--history",
    is_flag=True,
    help="Every link event as recorded (connected and disconnected, marked and unmarked "
    "duplicates), not only what holds now.",
)
@click.option(
    "--snapshot",
    type=click.Path(file_okay=False, exists=True),
    help="Snapshot or workdir to read (default: WORKDIR).",
)
@json_option
@click.pass_obj
def related(
    obj: Context,
    handle: str,
    hops: int,
    kinds: tuple[str, ...],
    history: bool,
    snapshot: str | None,
    as_json: bool,
) -> None:
    """Graph neighbours of one item (what it links to and what links to it) and
    the items whose text is nearest to it in the index.

    HANDLE is an item's handle; a comment or review stands for its item, and a
    commit can be named by the first 7 or more characters of its sha.

    \b
    Examples:
      ghindex related psf/requests#6240
      ghindex related psf/requests#6240 --hops 2 --kind closes --kind duplicate_of
      ghindex related psf/requests@1a2b3c4 --json
    """
    from ghindex.graph import KINDS
    from ghindex.graph import related as find_related
    from ghindex.store.state import open_state

    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise click.BadParameter(
            f"{unknown[0]!r} is not a link kind: use one of {', '.join(KINDS)}",
            param_hint="'--kind'",
        )
    root = Path(snapshot) if snapshot else obj.settings().workdir
    nearest = None
    if (root / "lance").exists():
        from ghindex.search import Searcher

        nearest = Searcher(root / "lance").nearest
    con = open_state(root / "state.duckdb", read_only=True)
    try:
        result = find_related(
            con,
            handle,
            hops=hops,
            kinds=kinds or None,
            include_history=history,
            nearest_items=nearest,
        )
    finally:
        con.close()
    if as_json:
        emit_json(result.as_dict())
    else:
        click.echo(result.as_text())


def main() -> None:
    cli(prog_name="ghindex")
