"""Commands that read a snapshot: search, related, demo."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ghindex.cli.base import (
    DEMO_DIR,
    Context,
    cli,
    demo_root,
    json_option,
    open_for_query,
    snapshot_options,
)
from ghindex.cli.output import context_text, emit_json, item_text, progress, say, search_text
from ghindex.config import Settings
from ghindex.errors import GhindexError
from ghindex.query.filters import CONTEXT_FILTERS, MODES, OPTIONS, SORTS
from ghindex.vocabulary.edges import KINDS
from ghindex.vocabulary.times import iso_moment


class IsoMoment(click.ParamType):
    """A date or time as every door reads it (`vocabulary.times.iso_moment`)."""

    name = "date"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        try:
            return iso_moment(value, "the value")
        except GhindexError as exc:
            self.fail(str(exc), param, ctx)


def filter_options(*arguments: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of these filters (`query.filters.OPTIONS`, from which the MCP tools'
    arguments are made too): each fills its `Filters` field of the same name."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed(arguments):
            option = OPTIONS[name]
            settings: dict[str, Any] = {"help": option.meaning, "metavar": option.metavar}
            if option.kind == "time":
                settings["type"] = IsoMoment()
            elif option.kind == "values":
                settings["multiple"] = True
            if option.choices:  # any case, given back as the choice is spelled
                settings["type"] = click.Choice(option.choices, case_sensitive=False)
            command = click.option(option.cli_flag, option.field, **settings)(command)
        return command

    return decorate


@cli.command()
@click.argument("query", required=False)
@filter_options(*OPTIONS)
@click.option(
    "-k",
    "--top-k",
    "k",
    type=click.IntRange(1, 100),
    default=10,
    show_default=True,
    help="Number of results.",
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
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
    "--sort",
    type=click.Choice(SORTS),
    default="relevance",
    show_default=True,
    help="Order of the results; without a QUERY, relevance means updated_desc.",
)
@click.option("--expand", is_flag=True, help="Also list the items linked to the results.")
@click.option(
    "--hops", type=click.IntRange(1, 2), default=1, show_default=True, help="Link hops to expand."
)
@snapshot_options
@json_option
@click.pass_obj
def search(
    obj: Context,
    query: str | None,
    k: int,
    mode: str,
    rerank: bool,
    mmr: float | None,
    sort: str,
    expand: bool,
    hops: int,
    snapshot: str | None,
    store: str | None,
    as_json: bool,
    **filter_options: Any,
) -> None:
    """Hybrid search over the index; results are whole items. Without a QUERY (or with
    an empty one, as the MCP `search` tool takes it), the items the filters select,
    newest first.

    A query that is an identifier (#123, owner/repo#12, a commit SHA or prefix,
    a handle, a file path) finds that item first.

    \b
    Examples:
      ghindex search "flaky test on windows" --state open --label bug -k 5
      ghindex search "TypeError: cannot pickle" --mode sparse --json
      ghindex search "#1234"
      ghindex search --label bug --state open --sort created_desc
    """
    from ghindex.query.filters import Filters

    with open_for_query(obj, snapshot, store) as snap:
        response = snap.find(
            query,
            Filters(**filter_options),
            k=k,
            mode=mode,
            rerank=rerank,
            mmr=mmr,
            sort=sort,
            expand=expand,
            hops=hops,
        )
    if as_json:
        emit_json(response.as_dict())
    else:
        say(search_text(response))


@cli.command()
@click.argument("question")
@click.option(
    "--max-tokens",
    type=click.IntRange(100, 50_000),
    default=4000,
    show_default=True,
    help="Budget for the passages, in tokens (estimated per script, as docs/mcp.md says).",
)
@filter_options(*CONTEXT_FILTERS)
@snapshot_options
@json_option
@click.pass_obj
def context(
    obj: Context,
    question: str,
    max_tokens: int,
    snapshot: str | None,
    store: str | None,
    as_json: bool,
    **filter_options: Any,
) -> None:
    """The passages most relevant to a question that fit a token budget, each cited
    with its handle and URL (what the MCP `context` tool gives an agent).

    \b
    Examples:
      ghindex context "why do uploads through a proxy time out?" --max-tokens 2000
      ghindex context "release process" --type doc --json
    """
    from ghindex.query.filters import Filters

    chosen = Filters(**filter_options)
    with open_for_query(obj, snapshot, store) as snap:
        body = snap.context(question, chosen, max_tokens=max_tokens)
    if as_json:
        emit_json(body)
    else:
        say(context_text(body))


# what the demo suggests next, each runnable as printed; export and report write only
# the path they name (in the temporary directory: nothing lands where the demo was typed)
DEMO_NEXT = (
    'search{flag} "your question"',
    "show{flag} sigmavirus24/github3.py#785",
    "related{flag} sigmavirus24/github3.py#785",
    'sql{flag} "SELECT repo, count(*) AS issues FROM issues GROUP BY repo ORDER BY 2 DESC"',
    "status{flag}",
    "export{flag} {export}",
    "report{flag} --out {report}",
    "serve{flag}                      # the MCP server, for an agent",
)


@cli.command()
@click.option(
    "--dest",
    type=click.Path(file_okay=False),
    help="Where to build the demo snapshot (default: WORKDIR/demo, which the other "
    "commands read while WORKDIR holds no data of its own).",
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
    import shlex
    import tempfile

    from ghindex.index.embed import require_builder
    from ghindex.sample.demo import run_demo

    require_builder("the demo builds an index from the bundled sample: it")
    base = obj.settings()
    settings = Settings(
        workdir=Path(dest) if dest else base.workdir / DEMO_DIR,
        graphql_url=base.graphql_url,
        model=base.model,
        precision=base.precision,
        device=base.device,
    )
    report = run_demo(settings, progress=progress(not as_json))
    if as_json:
        emit_json(report.as_dict())
        return
    say(
        f"loaded {report.issues} issues and {report.pull_requests} pull requests "
        f"of {report.repos} repositories into {settings.workdir}"
    )
    say(
        f"indexed {report.build.chunks} chunks ({report.build.embedded} embedded, "
        f"{report.build.from_cache} from the cache) with {report.build.model}"
    )
    for response in report.searches:
        filters = " ".join(f"--{k.rstrip('s')} {' '.join(v)}" for k, v in response.filters.items())
        say(f"\n$ ghindex search {response.query!r} --mode {response.mode} {filters}".rstrip())
        say(search_text(response))
    reads_demo = dest is None and demo_root(base) is not None
    flag = "" if reads_demo else f" --snapshot {settings.workdir}"
    reason = f" ({base.workdir} holds no data of its own, so commands read the demo)"
    scratch = Path(tempfile.gettempdir())
    paths = {
        "export": shlex.quote(str(scratch / "ghindex-demo-export")),
        "report": shlex.quote(str(scratch / "ghindex-demo-report.html")),
    }
    say(f"\nNext, as typed{reason if reads_demo else ''}:")
    for command in DEMO_NEXT:
        say(f"  ghindex {command.format(flag=flag, **paths)}")


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
@snapshot_options
@json_option
@click.pass_obj
def related(
    obj: Context,
    handle: str,
    hops: int,
    kinds: tuple[str, ...],
    history: bool,
    snapshot: str | None,
    store: str | None,
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
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise click.BadParameter(
            f"{unknown[0]!r} is not a link kind: use one of {', '.join(KINDS)}",
            param_hint="'--kind'",
        )
    with open_for_query(obj, snapshot, store) as snap:
        result = snap.related(handle, hops=hops, kinds=kinds, history=history)
    if as_json:
        emit_json(result.as_dict())
    else:
        say(result.as_text())


@cli.command()
@click.argument("handle")
@click.option(
    "--max-chars",
    type=click.IntRange(min=200),
    default=20_000,
    show_default=True,
    help="Budget of the answer, in characters; what is left out is counted.",
)
@click.option("--skip", type=click.IntRange(min=0), default=0, help="Pieces already read.")
@snapshot_options
@json_option
@click.pass_obj
def show(
    obj: Context,
    handle: str,
    max_chars: int,
    skip: int,
    snapshot: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """One item in full: an issue with its comments, a pull request with its reviews
    and review threads, a discussion, a doc, a release, a commit with its diffs.

    \b
    Examples:
      ghindex show psf/requests#6240
      ghindex show psf/requests@1a2b3c4 --json
    """
    with open_for_query(obj, snapshot, store) as snap:
        item = snap.show(handle, max_chars=max_chars, skip=skip)
    if as_json:
        emit_json(item)
    else:
        say(item_text(item))
