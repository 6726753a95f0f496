"""The read-only MCP server: a snapshot holder that swaps snapshots while serving,
six query tools, and the stdio and streamable-HTTP transports."""

from ghindex.serve.holder import NoSnapshot, ServedSnapshot, SnapshotHolder, open_snapshot
from ghindex.serve.server import create_server, run

__all__ = [
    "NoSnapshot",
    "ServedSnapshot",
    "SnapshotHolder",
    "create_server",
    "open_snapshot",
    "run",
]
