"""MCP over stdio on the daemon's own byte source and frame sink.

The SDK's ``stdio_server`` reads stdin in a worker thread that a stop cannot
interrupt: a SIGTERM while the host keeps the pipe open would hang the
process. Here stdin is read on the event loop (``daemon.stdio.StdinSource``)
and frames go out through ``StdoutSink`` (never blocking the loop on a slow
host), while the SDK's own server runs the protocol over memory streams.

The end, at EOF or on ``stop`` (SIGTERM, SIGINT, a lost database file):
reading stops, the requests already received are answered (within the stop's
bound: ``shutdown_timeout_s``), and only then does the session end; a request
still running past the bound is abandoned, and counted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from daemon.logs import log
from protocol.framing import OVERSIZED, LineSplitter

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from daemon.server import ByteSource, FrameSink
    from daemon.stopping import Shutdown


class Stop:
    """Asks a serving ``brain mcp`` to stop (callable with the reason, like ``Server.stop``)."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.reason: str | None = None

    def __call__(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            log.info("stopping", reason=reason)
        self.event.set()


async def serve(
    server: MCPServer,
    source: ByteSource,
    sink: FrameSink,
    *,
    stop: Stop,
    shutdown: Shutdown,
    max_line: int,
) -> None:
    """Run one MCP session over ``source`` and ``sink`` until EOF or ``stop``."""
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    pending: set[Any] = set()  # ids of requests received and not answered yet
    answered = anyio.Event()

    async def read() -> None:
        splitter = LineSplitter(max_line)
        async with read_send:
            with anyio.CancelScope() as reading:
                reader.start_soon(_cancel_on, stop.event, reading)
                while True:
                    chunk = await source.receive()
                    for line in splitter.feed(chunk) if chunk else splitter.finish():
                        message = _parse(line)
                        if isinstance(message, Exception):
                            # The SDK logs what it cannot parse and answers nothing; the host
                            # would wait forever for a request that carried an id.
                            await sink.send(_error_frame(line, message))
                            continue
                        _note(message, pending)
                        await read_send.send(message)
                    if not chunk:
                        break
            shutdown.begin()
            with anyio.move_on_after(shutdown.remaining()):
                while pending:
                    await answered.wait()
            if pending:
                shutdown.abandoned = len(pending)
                log.warning("stopping with requests unanswered", abandoned=len(pending))

    async def write() -> None:
        nonlocal answered
        async with write_recv:
            async for message in write_recv:
                frame = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await sink.send(frame.encode() + b"\n")
                if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
                    pending.discard(message.message.id)
                    answered.set()
                    answered = anyio.Event()

    # The SDK's own transports hand their streams to the low-level server the same way
    # (MCPServer.run_stdio_async); it has no public entry point taking streams.
    lowlevel = server._lowlevel_server
    async with anyio.create_task_group() as writing:
        # The writer ends when the server closes its stream, after the last answer.
        writing.start_soon(write)
        async with anyio.create_task_group() as reader:
            reader.start_soon(read)
            await lowlevel.run(read_recv, write_send, lowlevel.create_initialization_options())
            reader.cancel_scope.cancel()  # the session ended on its own: stop reading


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _note(message: SessionMessage | Exception, pending: set[Any]) -> None:
    """Track the requests the host is owed an answer for (a cancelled one is not answered)."""
    if not isinstance(message, SessionMessage):
        return
    inner = message.message
    if isinstance(inner, types.JSONRPCRequest):
        pending.add(inner.id)
    elif isinstance(inner, types.JSONRPCNotification) and inner.method == "notifications/cancelled":
        pending.discard((inner.params or {}).get("requestId"))


def _error_frame(line: bytes | object, exc: Exception) -> bytes:
    """The JSON-RPC error answering a line the SDK cannot take, with its id when one is readable.

    Not JSON or too long: -32700 (a skipped line's id is unknown: null); JSON but not a
    valid message (``params`` not an object, ``jsonrpc`` not "2.0"): -32600.
    """
    request_id: object = None
    code, message = -32700, "parse error: a line over max_line_bytes was skipped"
    if isinstance(line, bytes):
        try:
            value = json.loads(line)
        except ValueError:
            message = "parse error: the line is not JSON"
        else:
            code, message = -32600, "invalid request: not a JSON-RPC 2.0 message"
            if isinstance(value, dict):
                candidate = value.get("id")
                if isinstance(candidate, str | int) and not isinstance(candidate, bool):
                    request_id = candidate
    log.warning("invalid line answered", code=code, error=type(exc).__name__)
    error = {"code": code, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n"


def _parse(line: bytes | object) -> SessionMessage | Exception:
    """One line as the SDK's stdio transport parses it: a message, or the error to report."""
    if line is OVERSIZED:
        return ValueError("a line over max_line_bytes was skipped")
    assert isinstance(line, bytes)
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError is one
        return exc
