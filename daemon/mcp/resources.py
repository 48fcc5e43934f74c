"""The ``brain://`` resources: what a host (or its user) can attach to a conversation.

- ``brain://info``: versions and counts (``info``);
- ``brain://summary/{id}``, ``brain://message/{id}``: a summary or message (``describe``);
- ``brain://file/{id}{?first,last}``: a payload file, or its lines first..last (``describe``);
- ``brain://session/{session}/context{?budget}``: the session's assembled context
  (``assemble``, OpenAI shape, default budget ``CONTEXT_BUDGET``).

Each is JSON, the method's result. A server pinned to a session reads only
that session; errors are MCP errors carrying the daemon's code and message.
"""

from __future__ import annotations

from typing import Any, Final

import orjson
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from daemon.mcp.calls import Calls
from daemon.mcp.tools import Pin
from protocol import errors as wire

CONTEXT_BUDGET: Final = 8_000
"""Tokens of ``brain://session/{session}/context`` when the URI names no ``budget``."""

JSON: Final = "application/json"


async def read(calls: Calls, method: str, params: dict[str, Any]) -> str:
    """A method's result as JSON text; its error as an MCP error with the same code."""
    try:
        result = await calls.call(method, params)
    except wire.RPCError as exc:
        raise MCPError(exc.code, exc.message, exc.data) from None
    return orjson.dumps(result, option=orjson.OPT_INDENT_2).decode()


def scope(pin: Pin) -> dict[str, Any]:
    """The lookup scope of a server: its pinned session, or every session."""
    return {"session": pin.session} if pin.session is not None else {"all": True}


def _int(text: str | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise MCPError(wire.InvalidParams.CODE, f"{name}: must be an integer") from None


def _kind(item: str, prefix: str, what: str, wanted: bool = True) -> None:
    if item.startswith(prefix) != wanted:
        raise MCPError(wire.InvalidParams.CODE, f"id: {item!r} is not a {what} id")


def register(server: MCPServer, calls: Calls, pin: Pin) -> None:
    """Add the resources to ``server``."""

    @server.resource(
        "brain://info",
        name="info",
        title="brain info",
        description="Version, schema version and counts of the memory database.",
        mime_type=JSON,
    )
    async def info() -> str:
        return await read(calls, "info", {})

    @server.resource(
        "brain://summary/{id}",
        name="summary",
        title="A summary",
        description="A summary (sum_ id): its text, time span, sources and children.",
        mime_type=JSON,
    )
    async def summary(id: str) -> str:  # the URI variable: id
        _kind(id, "sum_", "summary")
        return await read(calls, "describe", {"id": id, **scope(pin)})

    @server.resource(
        "brain://message/{id}",
        name="message",
        title="A message",
        description="A stored message exactly as it was sent, with what covers it.",
        mime_type=JSON,
    )
    async def message(id: str) -> str:
        for prefix in ("sum_", "file_"):
            _kind(id, prefix, "message", wanted=False)
        return await read(calls, "describe", {"id": id, **scope(pin)})

    @server.resource(
        "brain://file/{id}{?first,last}",
        name="file",
        title="A payload file",
        description="A large tool output or attachment (file_ id); first and last (1-based) "
        "read a line range.",
        mime_type=JSON,
    )
    async def file(id: str, first: str | None = None, last: str | None = None) -> str:
        _kind(id, "file_", "file")
        params: dict[str, Any] = {"id": id, **scope(pin)}
        start, end = _int(first, "first"), _int(last, "last")
        if start is not None or end is not None:
            params["lines"] = [start or 1, end if end is not None else 1 << 31]
        return await read(calls, "describe", params)

    @server.resource(
        "brain://session/{session}/context{?budget}",
        name="context",
        title="A session's context",
        description="The session's assembled context (summaries and recent messages) under "
        f"a token budget (default {CONTEXT_BUDGET}); like assemble, the session's compaction "
        "follows that budget.",
        mime_type=JSON,
    )
    async def context(session: str, budget: str | None = None) -> str:
        if pin.session is not None and session != pin.session:
            raise MCPError(
                wire.ScopeDenied.CODE,
                "session: this server is pinned to another session",
                {"reason": "scope"},
            )
        tokens = _int(budget, "budget") or CONTEXT_BUDGET
        return await read(calls, "assemble", {"session": session, "budget": tokens})
