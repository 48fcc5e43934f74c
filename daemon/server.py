"""The NDJSON request loop: ``Server(dispatcher, sink).serve(source)``.

Three injectable pieces (STYLE 10): a byte source (stdin in production, a
memory stream in tests), line framing (``protocol.framing``) and a dispatcher.

* Every line is answered, in arrival order of *validation*: parse and param
  errors are answered at once; valid requests run as tasks.
* Requests on one lane (one session) run one after another in arrival order;
  requests on different lanes, or on none (``ping``), run concurrently, so
  answers may come out of order (match them by id).
* At most ``max_inflight`` requests run at once; beyond that the loop stops
  reading, which pushes back on the client through the pipe.
* Stopping (EOF, ``shutdown``, a signal): stop reading, answer lines already
  read with "shutting down", let in-flight requests finish, and return. The
  wait is bounded by ``shutdown_timeout_s`` (``daemon.stopping``): requests
  still running then are abandoned, each answered -32006 (their worker
  threads are not waited for), and ``shutdown`` is answered all the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

import anyio
import anyio.abc

from daemon.dispatch import Answer, Call, Dispatcher
from daemon.logs import log
from protocol import errors as wire
from protocol.framing import OVERSIZED, Line, LineSplitter
from protocol.wire import error_frame

_DRAIN_QUIET_S: Final = 0.05
_DRAIN_MAX_CHUNKS: Final = 256


class ByteSource(Protocol):
    """Where request bytes come from."""

    async def receive(self) -> bytes:
        """The next chunk of bytes; ``b""`` at end of input."""
        ...


class FrameSink(Protocol):
    """Where response frames go."""

    async def send(self, frame: bytes) -> None:
        """Deliver one complete frame (a JSON line)."""
        ...


class Server:
    """Reads request lines from a source and answers them on a sink."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        sink: FrameSink,
        *,
        max_line: int,
        max_inflight: int = 1024,
        on_stop: Callable[[str], object] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.sink = sink
        self.max_line = max_line
        self.shutdown = dispatcher.context.shutdown
        self._slots = anyio.Semaphore(max_inflight)
        self._lanes: dict[str, anyio.Event] = {}
        self._inflight = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._stopping = False
        self._recv_scope: anyio.CancelScope | None = None
        self._tg: anyio.abc.TaskGroup | None = None  # requests
        self._outer: anyio.abc.TaskGroup | None = None  # the answer to ``shutdown``
        self._work_done = anyio.Event()
        self.stop_reason: str | None = None
        # Called once, with the reason, when the server stops reading (systemd's STOPPING=1).
        self._on_stop = on_stop
        self._splitter = LineSplitter(max_line)

    async def serve(self, source: ByteSource) -> None:
        """Answer requests until EOF, ``shutdown`` or ``stop()``; return when drained."""
        async with anyio.create_task_group() as outer:
            self._outer = outer
            async with anyio.create_task_group() as work:
                self._tg = work
                await self._read(source)
                if self.stop_reason is None:
                    self._begin_stop("eof")
                with anyio.move_on_after(self.shutdown.remaining()):
                    await self._drain(source)
                with anyio.move_on_after(self.shutdown.remaining()):
                    await self._wait_idle()
                if self._inflight > 0:
                    # Their threads may never return (a lock another process holds,
                    # a hung provider): answer, stop waiting, let the process exit.
                    self.shutdown.abandoned = self._inflight
                    log.warning(
                        "shutdown timeout: abandoning in-flight requests", count=self._inflight
                    )
                    work.cancel_scope.cancel()
            self._work_done.set()
        log.info("stopped", reason=self.stop_reason)

    def stop(self, reason: str) -> None:
        """Stop reading (safe to call from a signal-watching task, and twice)."""
        if not self._stopping:
            self._begin_stop(reason)
        if self._recv_scope is not None:
            self._recv_scope.cancel()

    def _begin_stop(self, reason: str) -> None:
        self._stopping = True
        self.stop_reason = reason
        self.shutdown.begin()
        if self._on_stop is not None:
            self._on_stop(reason)

    # -- reading --------------------------------------------------------------

    async def _read(self, source: ByteSource) -> None:
        splitter = self._splitter
        while not self._stopping:
            chunk = b""
            with anyio.CancelScope() as scope:
                self._recv_scope = scope
                chunk = await source.receive()
            self._recv_scope = None
            if scope.cancelled_caught:
                return
            lines = splitter.feed(chunk) if chunk else splitter.finish()
            for line in lines:
                await self._accept(line)
            if not chunk:
                return

    async def _drain(self, source: ByteSource) -> None:
        """Answer "shutting down" to what the client has already sent, briefly.

        Lines that are in the pipe when the daemon stops get an answer rather
        than silence; the drain ends at EOF, after a short quiet spell, or
        after a bounded number of chunks, so a client that keeps writing
        cannot hold the daemon open.
        """
        splitter = self._splitter
        for _ in range(_DRAIN_MAX_CHUNKS):
            chunk = None
            with anyio.move_on_after(_DRAIN_QUIET_S):
                chunk = await source.receive()
            if chunk is None:
                return
            for line in splitter.feed(chunk) if chunk else splitter.finish():
                await self._accept(line)
            if not chunk:
                return

    async def _accept(self, line: Line) -> None:
        if line is OVERSIZED:
            error = wire.ParseError(
                f"line longer than {self.max_line} bytes", {"limit": self.max_line}
            )
            await self.sink.send(error_frame(None, error))
            return
        assert isinstance(line, bytes)
        item = self.dispatcher.prepare(line)
        if isinstance(item, Answer):
            if item.frame is not None:
                await self.sink.send(item.frame)
            return
        if self._stopping:
            answer = self.dispatcher.reject(item, wire.ShuttingDown())
            if answer.frame is not None:
                await self.sink.send(answer.frame)
            return
        if item.request.method == "shutdown":
            self.stop("shutdown")
            assert self._outer is not None
            self._outer.start_soon(self._finish_shutdown, item)
            return
        await self._slots.acquire()
        lane = item.lane
        previous = self._lanes.get(lane) if lane is not None else None
        mine = anyio.Event()
        if lane is not None and item.holds_lane:
            self._lanes[lane] = mine
        self._inflight += 1
        if self._idle.is_set():
            self._idle = anyio.Event()
        assert self._tg is not None
        self._tg.start_soon(self._run, item, previous, mine)

    # -- running --------------------------------------------------------------

    async def _run(self, call: Call, previous: anyio.Event | None, mine: anyio.Event) -> None:
        started = False
        try:
            if previous is not None:
                await previous.wait()
            started = True
            frame = await self.dispatcher.execute(call, self.sink.send)
            if frame is not None:
                await self.sink.send(frame)
        except anyio.get_cancelled_exc_class():
            await self._answer_abandoned(call, started)
            raise
        finally:
            mine.set()
            if call.lane is not None and self._lanes.get(call.lane) is mine:
                del self._lanes[call.lane]
            self._slots.release()
            self._done()

    async def _answer_abandoned(self, call: Call, started: bool) -> None:
        """Answer a request cancelled by the shutdown bound (every line gets an answer)."""
        error = wire.ShuttingDown(
            "shutting down: abandoned after shutdown_timeout_s; it may or may not have applied"
            if started
            else None,
            {"abandoned": True} if started else None,
        )
        answer = self.dispatcher.reject(call, error)
        if answer.frame is None:
            return
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + self.shutdown.grace_s
            await self.sink.send(answer.frame)

    async def _finish_shutdown(self, call: Call) -> None:
        """Answer ``shutdown`` once every other request has finished or been abandoned."""
        await self._work_done.wait()
        frame = await self.dispatcher.execute(call)
        if frame is not None:
            await self.sink.send(frame)

    def _done(self) -> None:
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()

    async def _wait_idle(self) -> None:
        while self._inflight > 0:
            if self._idle.is_set():
                self._idle = anyio.Event()
            await self._idle.wait()
