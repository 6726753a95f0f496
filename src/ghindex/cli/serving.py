"""`ghindex serve`: the MCP server, over stdio for an agent that starts it, or HTTP."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ghindex.cli.base import Context, cli, workdir_root
from ghindex.cli.terminal import say
from ghindex.config import DEFAULT_SYNC_INTERVAL, env

# Said on stderr when stdin is a terminal: someone typed `ghindex serve` to try it.
WAITING = (
    "MCP server waiting for a client on stdin (an agent starts it as a command: see "
    "docs/mcp.md for its configuration); Ctrl-C stops it"
)


@cli.command()
@click.option(
    "--store",
    metavar="URL",
    help="Serve the newest snapshot of this store, re-checked every --sync-interval seconds.",
)
@click.option(
    "--snapshot",
    type=click.Path(file_okay=False, exists=True),
    help="Serve this local snapshot or workdir (default: WORKDIR).",
)
@click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP address.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="HTTP port (0: a free one, said on stderr).",
)
@click.option(
    "--sync-interval",
    type=click.FloatRange(min=1),
    default=DEFAULT_SYNC_INTERVAL,
    show_default=True,
    help="Seconds between checks of the store for a newer snapshot (one small request).",
)
@click.option(
    "--allowed-host",
    "allowed_host",
    multiple=True,
    metavar="HOST[:PORT]",
    help="Another Host header to answer (a reverse proxy's name); repeatable.",
)
@click.option(
    "--allowed-origin",
    "allowed_origin",
    multiple=True,
    metavar="URL",
    help="Another browser Origin to accept, e.g. https://tools.example.com; repeatable.",
)
@click.pass_obj
def serve(
    obj: Context,
    store: str | None,
    snapshot: str | None,
    transport: str,
    host: str,
    port: int,
    sync_interval: float,
    allowed_host: tuple[str, ...],
    allowed_origin: tuple[str, ...],
) -> None:
    """The read-only MCP server: search, fetch, related, context, sql, status.

    Over stdio an agent starts it as a command and speaks MCP on its stdin and stdout;
    over HTTP clients connect to http://HOST:PORT/mcp, said on stderr once listening.
    Ctrl-C (or SIGTERM) stops it. Over HTTP on anything but 127.0.0.1, ::1 or
    localhost it requires GHINDEX_MCP_TOKEN (32+ characters) as a bearer token; on
    every bind it answers only its own Host names and Origins (add others with
    --allowed-host and --allowed-origin). Logs go to stderr; stdout belongs to the
    protocol in stdio mode.

    \b
    Examples:
      ghindex serve --store s3://my-bucket/ghindex
      ghindex serve --snapshot ./snap --transport http --port 8000
    """
    from ghindex.serve import SnapshotHolder, open_snapshot, run
    from ghindex.serve.server import check_binding
    from ghindex.snapshot import Store
    from ghindex.snapshot.local import STAMP, live_root

    if store and snapshot:
        raise click.UsageError("give --snapshot or --store, not both")
    token = env("GHINDEX_MCP_TOKEN") or None
    if transport == "http":
        check_binding(host, token)
    settings = obj.settings(store=store)
    if store:
        holder = SnapshotHolder(
            store=Store(settings.store), cache=settings.workdir / "serve", interval=sync_interval
        )
        holder.start()
    else:
        root = (live_root(Path(snapshot)) if snapshot else workdir_root(settings)).resolve()
        # A pulled snapshot is never written to, so its state can stay open; any other
        # directory is a workdir someone may fetch or build in: served from a copy.
        immutable = (root / STAMP).exists()
        holder = SnapshotHolder(current=open_snapshot(root, immutable=immutable))
    if transport == "stdio" and _is_terminal(sys.stdin):
        say(WAITING, err=True)
    try:
        run(
            holder,
            transport=transport,
            host=host,
            port=port,
            token=token,
            allowed_host=allowed_host,
            allowed_origin=allowed_origin,
            listening=lambda url: say(
                f"MCP server on {url} (streamable HTTP); Ctrl-C stops it", err=True
            ),
        )
    finally:
        holder.stop()


def _is_terminal(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False
