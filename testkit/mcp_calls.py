"""Tool calls against an in-process MCP server (`create_server(...)`), each in a fresh
client session of the SDK: what an agent's call returns, its answer, or its error."""

from __future__ import annotations

import asyncio
import json

import mcp


def call(server, tool: str, **arguments):
    """One tool call in a fresh in-process client session."""

    async def go():
        async with mcp.Client(server) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(go())


def answer(server, tool: str, **arguments) -> dict:
    """A call that must succeed: its structured answer (the same as its text)."""
    result = call(server, tool, **arguments)
    assert not result.is_error, result.content[0].text
    assert result.structured_content == json.loads(result.content[0].text)
    return result.structured_content


def failure(server, tool: str, **arguments) -> str:
    """A call that must fail: its one error text."""
    result = call(server, tool, **arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text
