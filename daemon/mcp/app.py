"""The SDK server (``MCPServer``) holding brain's tools, resources and prompts.

Tools are registered from their table (``daemon.mcp.tools``) rather than from
Python signatures: the input schema is the one ``protocol.tools`` and the
table define, the SDK passes the arguments through untouched, and the
daemon's own params types validate them, so a bad argument is the same
-32602 naming the field that ``brain serve`` answers. A failed call is an MCP
tool error (``isError``) whose text and ``structuredContent.error`` carry the
stable code, its name and the message.
"""

from __future__ import annotations

from typing import Any

import orjson
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from daemon.mcp import prompts, resources
from daemon.mcp.calls import Calls
from daemon.mcp.tools import MCP_TOOLS, McpTool, Pin
from protocol import errors as wire

INSTRUCTIONS = (
    "brain is this agent's long-term memory: every message of past conversations "
    "(searchable even after it was folded into summaries) and what it was taught. "
    "Find a detail with memory_grep, read an item whole with memory_describe, walk a "
    "summary down with memory_expand, and get a cited answer from many messages with "
    "memory_expand_query. memory_query recalls taught knowledge and workspace notes; "
    "memory_teach and memory_correction add to it; memory_learn says how a recall went."
)


class _Arguments(ArgModelBase):
    """Takes any arguments and hands them over whole: the dispatcher validates them."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        """All the arguments, as one ``arguments`` keyword."""
        return {"arguments": dict(self.model_extra or {})}


def build(calls: Calls, pin: Pin, version: str) -> MCPServer:
    """The server: every tool of ``MCP_TOOLS``, the resources and the prompts."""
    server: MCPServer = MCPServer(
        "brain",
        title="brain memory",
        version=version,
        instructions=INSTRUCTIONS,
        tools=[_tool(t, calls, pin) for t in MCP_TOOLS],
    )
    resources.register(server, calls, pin)
    prompts.register(server, calls, pin)
    return server


def _tool(tool: McpTool, calls: Calls, pin: Pin) -> Tool:
    async def run(arguments: dict[str, Any], context: Context) -> CallToolResult:
        report = context.report_progress if tool.long else None
        try:
            result = await calls.call(tool.method, tool.params(arguments, pin), report)
        except wire.RPCError as exc:
            return failure(exc)
        # The JSON as text too, for hosts that read only content (the spec's advice).
        text = TextContent(type="text", text=orjson.dumps(result).decode())
        return CallToolResult(content=[text], structured_content=result)

    return Tool(
        fn=run,
        name=tool.name,
        title=tool.title,
        description=tool.description,
        parameters=tool.input_schema(pin),
        # No output model: the schema is published, and the client checks results against it.
        fn_metadata=FuncMetadata(arg_model=_Arguments, output_schema=tool.output),
        is_async=True,
        context_kwarg="context",
        annotations=ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.hints.read_only,
            destructive_hint=tool.hints.destructive,
            idempotent_hint=tool.hints.idempotent,
            open_world_hint=False,
        ),
    )


def failure(exc: wire.RPCError) -> CallToolResult:
    """A tool error carrying the wire error's code, name, message and data."""
    name = wire.ERROR_CODES.get(exc.code, type(exc)).__name__
    error: dict[str, Any] = {"code": exc.code, "name": name, "message": exc.message}
    if exc.data:
        error["data"] = exc.data
    return CallToolResult(
        content=[TextContent(type="text", text=f"{name} ({exc.code}): {exc.message}")],
        structured_content={"error": error},
        is_error=True,
    )
