"""An in-process daemon over anyio memory streams (STYLE 10: injectable pieces)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import anyio.abc
import orjson
import pytest

from brain import Brain
from daemon.context import Context
from daemon.dispatch import Dispatcher
from daemon.handlers import Handler
from daemon.server import Server
from daemon.stopping import Shutdown
from protocol.framing import encode_frame

DEADLINE = 10.0


# A callback that holds the event loop this long fails the test (STYLE 6): the
# daemon must do blocking work in threads. asyncio measures wall time, so on a
# loaded 2-core box a descheduled 20 ms callback can read as 0.3 s (seen when
# several suites shared the machine); the blocking work this is for (an SQLite
# scan, a provider wait) still takes far longer than this.
BLOCKING_THRESHOLD_S = 1.0


def _loop_factory() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    loop.slow_callback_duration = BLOCKING_THRESHOLD_S
    return loop


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return "asyncio", {"debug": True, "loop_factory": _loop_factory}


@pytest.fixture(autouse=True)
def _fail_if_the_event_loop_blocks(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING, logger="asyncio")
    yield
    records = [*caplog.get_records("setup"), *caplog.get_records("call"), *caplog.records]
    blocked = [
        r.getMessage()
        for r in records
        if r.name == "asyncio" and r.getMessage().startswith("Executing")
    ]
    assert not blocked, f"the event loop was blocked: {blocked}"


class MemorySource:
    """A ``ByteSource`` fed by the test."""

    def __init__(self) -> None:
        self.send, self._recv = anyio.create_memory_object_stream[bytes](1000)

    async def receive(self) -> bytes:
        try:
            return await self._recv.receive()
        except anyio.EndOfStream:
            return b""


class MemorySink:
    """A ``FrameSink`` the test reads from."""

    def __init__(self) -> None:
        self._send, self.recv = anyio.create_memory_object_stream[bytes](1000)

    async def send(self, frame: bytes) -> None:
        await self._send.send(frame)


class Harness:
    """A running ``Server``: write lines, read decoded frames."""

    def __init__(self, server: Server, source: MemorySource, sink: MemorySink) -> None:
        self.server = server
        self.source = source
        self.sink = sink
        self.finished = anyio.Event()
        self.leftover = 0

    async def write(self, *items: Any) -> None:
        """Send objects (encoded as frames) or raw bytes, all in one chunk."""
        chunk = b"".join(i if isinstance(i, bytes) else encode_frame(i) for i in items)
        await self.source.send.send(chunk)

    async def read(self) -> dict[str, Any]:
        with anyio.fail_after(DEADLINE):
            frame = await self.sink.recv.receive()
        assert frame.endswith(b"\n")
        assert frame.count(b"\n") == 1
        decoded: dict[str, Any] = orjson.loads(frame)
        return decoded

    async def read_n(self, n: int) -> list[dict[str, Any]]:
        return [await self.read() for _ in range(n)]

    async def eof(self) -> None:
        await self.source.send.aclose()

    async def wait_finished(self) -> None:
        """Wait for the server to return, then close every stream (frames left: ``leftover``)."""
        with anyio.fail_after(DEADLINE):
            await self.finished.wait()
        self.leftover = self.sink.recv.statistics().current_buffer_used
        for stream in (self.source.send, self.source._recv, self.sink._send, self.sink.recv):
            await stream.aclose()


@pytest.fixture
def engine(fresh_brain: Brain) -> Brain:
    """The shared engine on a new database (``tests/conftest.py``), closed after the test."""
    return fresh_brain


async def start(
    tg: anyio.abc.TaskGroup,
    engine: Brain,
    *,
    handlers: dict[str, Handler] | None = None,
    max_line: int = 1 << 20,
    max_inflight: int = 64,
    shutdown_timeout_s: float = 30.0,
    max_queued_request_bytes: int = 64 << 20,
) -> Harness:
    """Start a server in ``tg`` and return its harness."""
    source, sink = MemorySource(), MemorySink()
    context = Context(engine, shutdown=Shutdown(shutdown_timeout_s))
    server = Server(
        Dispatcher(context, handlers),
        sink,
        max_line=max_line,
        max_inflight=max_inflight,
        max_queued_request_bytes=max_queued_request_bytes,
    )
    harness = Harness(server, source, sink)

    async def serve() -> None:
        await server.serve(source)
        harness.finished.set()

    tg.start_soon(serve)
    return harness


@pytest.fixture
async def running(engine: Brain) -> AsyncIterator[Harness]:
    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine)
        yield harness
        await harness.eof()
        await harness.wait_finished()
