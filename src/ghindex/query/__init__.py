"""The read side: one `Snapshot` on disk and the operations every door (CLI, MCP
server, Python API) calls on it."""
