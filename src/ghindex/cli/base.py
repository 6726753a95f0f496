"""The command group, its shared options, and how failures become exit codes."""

from __future__ import annotations

import signal
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import click

from ghindex import __version__
from ghindex.cli.output import configure_logging, say
from ghindex.cli.terminal import shown_safely, visible
from ghindex.config import DEFAULT_PRECISION, PRECISIONS, Settings, load_settings
from ghindex.errors import GhindexError, disk_problem
from ghindex.vocabulary.layout import DEMO_DIR

# Exit statuses of a command Ctrl-C (SIGINT) or SIGTERM stopped, as shells report them.
INTERRUPTED = 128 + signal.SIGINT
TERMINATED = 128 + signal.SIGTERM
# Exit status of a build its --stop-after ended with chunks still to embed: what it
# embedded is kept, and running it again goes on (not a failure, not a finished build).
UNFINISHED = 3
# Commands that commit their work as they go (pages with their cursors, embedding cache
# slices, verified pieces): stopped at any point they lose nothing, and run again they
# go on from there.
RESUMABLE = frozenset({"fetch", "build", "demo", "update", "pull", "publish"})


def repo_values(_ctx: click.Context, _param: click.Parameter, value):
    """--repo checked as it is parsed: a malformed one is a usage error (exit 2)."""
    from ghindex.config import parse_repo

    values = value if isinstance(value, tuple) else (value,) if value else ()
    try:
        parsed = tuple(parse_repo(v) for v in values)
    except GhindexError as exc:
        raise click.BadParameter(str(exc)) from None
    return parsed if isinstance(value, tuple) else (parsed[0] if parsed else None)


repos_option = click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="OWNER/NAME",
    callback=repo_values,
    help="Repository to fetch; repeat for several (default: `repos` in ghindex.toml).",
)
orgs_option = click.option(
    "--org",
    "orgs",
    multiple=True,
    metavar="ORG",
    help="Every repository of this organisation or user, filtered by the include, exclude, "
    "archived and forks settings of ghindex.toml (repeatable).",
)


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")

git_option = click.option(
    "--git",
    "git_paths",
    multiple=True,
    metavar="PATH",
    type=click.Path(file_okay=False, exists=True),
    help="A local clone: read its docs and default-branch commits (repeatable).",
)
wiki_option = click.option(
    "--wiki",
    "wiki_paths",
    multiple=True,
    metavar="PATH",
    type=click.Path(file_okay=False, exists=True),
    help="A clone of OWNER/NAME.wiki.git: read its pages (repeatable).",
)


def vectors_option(when: str):
    """--vectors DIR (repeatable): embedding caches of other builds, joined `when`."""
    return click.option(
        "--vectors",
        "vector_paths",
        multiple=True,
        type=click.Path(file_okay=False, exists=True),
        metavar="DIR",
        help=f"The workdir (or its lance/ alone) of an embedding job, whose cache joins "
        f"this one's {when}. Repeatable.",
    )


max_wait_option = click.option(
    "--max-wait",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Longest wait for a rate-limit reset before stopping with progress saved "
    "(env GHINDEX_MAX_WAIT, default 3600).",
)

precision_option = click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    help="Vectors of the model as trained (fp32) or with int8 weights, faster on the CPU "
    "(env GHINDEX_PRECISION). One index holds one precision; default: the index's own, "
    f"{DEFAULT_PRECISION} for a new one (fp32 where ONNX Runtime cannot run the model).",
)

force_option = click.option(
    "--force",
    is_flag=True,
    help="With --full: remove the items GitHub confirms gone even when they are more than "
    "10% of a repository's stored items (otherwise nothing is removed then).",
)


def snapshot_options(command):
    """--store and --snapshot: where a query command reads."""
    command = click.option(
        "--snapshot",
        type=click.Path(file_okay=False, exists=True),
        help="Snapshot or workdir to read (default: WORKDIR).",
    )(command)
    return click.option(
        "--store",
        metavar="URL",
        help="Read the newest snapshot of this store, pulled first into the user's cache "
        "(GHINDEX_CACHE_DIR/stores/; only what changed is downloaded).",
    )(command)


@dataclass
class Context:
    config: str | None
    workdir: str | None
    debug: bool

    def settings(self, **flags: object) -> Settings:
        return load_settings(self.config, workdir=self.workdir, **flags)


class _Group(click.Group):
    """Turns expected failures into one-line messages and exit code 1. Every failure
    click prints (ours, a usage error, a bad parameter: they quote what was typed or
    what GitHub answered) is made terminal-safe first (`shown_safely`)."""

    def make_context(self, *args, **kwargs) -> click.Context:
        try:  # the group's own options: `ghindex --bad-option` quotes what was typed
            return super().make_context(*args, **kwargs)
        except click.ClickException as exc:
            shown_safely(exc)
            raise

    def invoke(self, ctx: click.Context):
        try:
            return self._failures_as_messages(ctx)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (see `Terminated`)
            raise click.exceptions.Exit(stopped(ctx, exc)) from None
        except click.NoSuchOption as exc:
            shown_safely(with_hint(exc))
            raise
        except click.ClickException as exc:
            shown_safely(exc)
            raise

    def _failures_as_messages(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GhindexError as exc:
            if query_interrupted(exc):  # DuckDB took the Ctrl-C itself
                raise KeyboardInterrupt from exc
            if ctx.obj is not None and ctx.obj.debug:
                raise
            raise click.ClickException(str(exc)) from None
        # a closed pipe (`| head`) is click's to end quietly, not an unexpected failure
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise
        except Exception as exc:
            if query_interrupted(exc):
                raise KeyboardInterrupt from exc
            if ctx.obj is not None and ctx.obj.debug:
                raise
            disk = disk_problem(exc)
            if disk:
                raise click.ClickException(disk) from None
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise click.ClickException(
                f"unexpected {type(exc).__name__}: {first} (rerun with --debug for details)"
            ) from None


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises `KeyboardInterrupt`: every command then ends
    on it as cleanly as on Ctrl-C (transactions rolled back, a server's snapshot let go)."""


def terminated(_signum: int, _frame: object) -> None:
    """The SIGTERM handler `main` installs."""
    raise Terminated()


def query_interrupted(exc: BaseException) -> bool:
    """Whether `exc` is (or was raised from) a DuckDB query that Ctrl-C stopped: DuckDB
    takes SIGINT itself while a query runs and raises "Query interrupted" instead of
    `KeyboardInterrupt`."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        # not `duckdb.InterruptException`: that is the `sql` time limit's own interrupt
        if type(link) is RuntimeError and str(link).strip() == "Query interrupted":
            return True
        link = link.__cause__ or link.__context__
    return False


def stopped(ctx: click.Context, exc: KeyboardInterrupt) -> int:
    """Say in one line on stderr that the command was stopped (with --debug, where first),
    and return its exit status: 130 for Ctrl-C, 143 for SIGTERM. By the time the
    interrupt reaches here, every `with` and `finally` it passed through has run."""
    if ctx.obj is not None and ctx.obj.debug:
        sys.stderr.write(visible("".join(traceback.format_exception(exc))))
    command = ctx.invoked_subcommand
    if command == "serve":
        line = "stopped: the server has shut down"
    elif command in RESUMABLE:
        line = "interrupted: the work done so far is kept; run the same command again to go on"
    else:
        line = "interrupted"
    say(line, err=True)
    return TERMINATED if isinstance(exc, Terminated) else INTERRUPTED


# Options people reach for from other tools, and the parameter that does it here (the
# first of them a command has): `-n 5` means `-k 5` for `search`, `--max-rows` for `sql`.
MEANT = {
    name: ("k", "max_rows")
    for name in ("-n", "--n", "--limit", "--top", "--top-n", "--num", "--number", "--count")
}


def with_hint(exc: click.NoSuchOption) -> click.NoSuchOption:
    """An unknown option's error naming the option meant, in its one line: click suggests
    long options spelled alike (`--stat`: `--state`); a habit from another tool (`-n`,
    `--limit`, `--top`) is mapped by `MEANT` onto the command's own option instead."""
    command = exc.ctx.command if exc.ctx is not None else None
    if command is None or exc.option_name not in MEANT:
        return exc
    options = {p.name: p for p in command.params if isinstance(p, click.Option)}
    meant = next((options[name] for name in MEANT[exc.option_name] if name in options), None)
    if meant is not None:
        exc.possibilities = ["/".join(meant.opts)]  # type: ignore[misc]  (click's own field)
    return exc


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
    ctx.command.invoked = ctx.invoked_subcommand  # type: ignore[attr-defined]  (for `main`)
    configure_logging(debug)


def open_for_query(obj: Context, snapshot: str | None, store: str | None):
    """The `Snapshot` a query command reads (see `snapshot_root`), one connection per call."""
    from ghindex.query.snapshot import Snapshot

    return Snapshot.open(snapshot_root(obj, snapshot, store))


def snapshot_root(obj: Context, snapshot: str | None, store: str | None) -> Path:
    """Where a query command reads: --snapshot DIR; with --store URL the store's newest
    snapshot, pulled first into the user's cache (`reading_copy`: reading writes nothing
    in the working directory or WORKDIR); else WORKDIR (or the demo's snapshot while
    WORKDIR holds nothing of its own: see `workdir_root`)."""
    if snapshot and store:
        raise click.UsageError("give --snapshot or --store, not both")
    from ghindex.snapshot.local import live_root

    settings = obj.settings(store=store)
    if snapshot:
        return live_root(Path(snapshot))
    if settings.store and store:
        from ghindex.snapshot import Store, pull
        from ghindex.snapshot.local import reading_copy

        source = Store(settings.store)
        copy = reading_copy(source)
        pull(source, copy)
        return live_root(copy)
    return workdir_root(settings)


def workdir_root(settings: Settings) -> Path:
    """WORKDIR's current snapshot, or the demo's while WORKDIR holds nothing of its own
    (see `demo_root`; said on stderr)."""
    demo = demo_root(settings)
    if demo is None:
        return settings.root
    say(
        f"reading the demo snapshot in {settings.workdir / DEMO_DIR} ({settings.workdir} "
        "holds no data of its own yet)",
        err=True,
    )
    return demo


def demo_root(settings: Settings) -> Path | None:
    """The snapshot `ghindex demo` built in WORKDIR/demo, when WORKDIR holds no fetch,
    build or pull of its own (`query.snapshot.demo_in`, the rule every door follows)."""
    from ghindex.query.snapshot import demo_in

    return demo_in(settings.workdir)
