"""The NDJSON request loop: ``Server(dispatcher, sink).serve(source)``.

Three injectable pieces (STYLE 10): a byte source (stdin in production, a
memory stream in tests), line framing (``protocol.framing``) and a dispatcher.

* Every line is answered, in arrival order of *validation*: parse and param
  errors are answered at once; valid requests run as tasks.
* Requests on one lane (one session) run one after another in arrival order;
  requests on different lanes, or on none (``ping``), run concurrently, so
  answers may come out of order (match them by id).
* At most ``max_inflight`` requests run at once; beyond that the loop stops
  reading, which pushes back on the client through the pipe. Memory is
  bounded the same way: the loop also stops reading while the requests it
  holds (accepted, not yet answered) pass ``max_queued_request_bytes`` (one
  line alone is always admitted), or while the answers a client has not read
  pass ``max_unread_output_bytes`` (when the sink can tell, ``Backlogged``);
  requests already accepted wait for that backlog to drain before they run.
* Stopping (EOF, ``shutdown``, a signal): stop reading, answer lines already
  read with "shutting down", let in-flight requests finish, and return. The
  wait is bounded by ``shutdown_timeout_s`` (``daemon.stopping``): requests
  still running then are abandoned, each answered -32006 (their worker
  threads are not waited for), and ``shutdown`` is answered all the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

import anyio
import anyio.abc
import anyio.lowlevel

from daemon.dispatch import Answer, Call, Dispatcher
from daemon.logs import log
from protocol import errors as wire
from protocol.framing import OVERSIZED, Line, LineSplitter
from protocol.wire import error_frame

_DRAIN_QUIET_S: Final = 0.05
_DRAIN_MAX_CHUNKS: Final = 256
_ROOM_POLL_S: Final = 0.02
"""How often a paused loop looks at the backlog again (only while it is paused)."""


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


@runtime_checkable
class Backlogged(Protocol):
    """A sink that can say how many bytes of answers the client has not read yet."""

    @property
    def unread_bytes(self) -> int:
        """Bytes sent to the sink and not yet taken by the client."""
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
        max_queued_request_bytes: int = 64 << 20,
        max_unread_output_bytes: int = 16 << 20,
        on_stop: Callable[[str], object] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.sink = sink
        self.max_line = max_line
        self.max_queued_request_bytes = max_queued_request_bytes
        self.max_unread_output_bytes = max_unread_output_bytes
        self._backlog = sink if isinstance(sink, Backlogged) else None
        self._queued_bytes = 0  # request lines accepted and not yet answered
        self.pauses = 0  # times reading paused for memory (a test and bench hook)
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
        self.answered = anyio.Event()
        """Set once the first request has been answered (background warm-up waits for it)."""
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

    def _output_full(self) -> bool:
        backlog = self._backlog
        return backlog is not None and backlog.unread_bytes > self.max_unread_output_bytes

    def _requests_full(self, size: int) -> bool:
        queued = self._queued_bytes
        return queued > 0 and queued + size > self.max_queued_request_bytes

    async def _room_for(self, size: int) -> None:
        """Wait (not reading) until a line of ``size`` bytes fits in memory's bounds.

        Polled, and only while paused: the backlog drains in the writer thread
        and requests finish in tasks, and neither pays for a wake-up otherwise.
        A stop ends the wait: the line is then refused, not queued.
        """
        if self._stopping or not (self._output_full() or self._requests_full(size)):
            return
        self.pauses += 1
        log.debug(
            "reading paused",
            unread_output_bytes=self._backlog.unread_bytes if self._backlog else 0,
            queued_request_bytes=self._queued_bytes,
        )
        while not self._stopping and (self._output_full() or self._requests_full(size)):
            await anyio.sleep(_ROOM_POLL_S)
        log.debug("reading resumed")

    async def _accept(self, line: Line) -> None:
        await self._room_for(len(line) if isinstance(line, bytes) else 0)
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
        if await self._answered_now(item):
            return
        await self._slots.acquire()
        size = len(line)
        self._queued_bytes += size
        lane = item.lane
        previous = self._lanes.get(lane) if lane is not None else None
        mine = anyio.Event()
        if lane is not None and item.holds_lane:
            self._lanes[lane] = mine
        self._inflight += 1
        if self._idle.is_set():
            self._idle = anyio.Event()
        assert self._tg is not None
        self._tg.start_soon(self._run, item, previous, mine, size)

    async def _answered_now(self, call: Call) -> bool:
        """Answer a cheap call (``ping``, ``info``) right here, on the reader.

        No task and no worker thread: what a single-threaded daemon would do. The
        call has no lane, so no ordering is skipped; if the client is not reading
        its answers, the call runs as any other (and waits for the backlog).
        After the answer, the loop lets ready tasks run before the next line, so a
        stream of cheap calls cannot hold back the answers of running requests.
        """
        if self._output_full():
            return False
        answer = self.dispatcher.answer_now(call)
        if answer is None:
            return False
        if answer.frame is not None:
            await self.sink.send(answer.frame)
        self.answered.set()
        await anyio.lowlevel.checkpoint()
        return True

    # -- running --------------------------------------------------------------

    async def _run(
        self, call: Call, previous: anyio.Event | None, mine: anyio.Event, size: int
    ) -> None:
        started = False
        try:
            if previous is not None:
                await previous.wait()
            # Accepted before the backlog grew: wait for the client to read
            # before adding an answer (unless stopping: then finish).
            while self._output_full() and not self._stopping:
                await anyio.sleep(_ROOM_POLL_S)
            started = True
            frame = await self.dispatcher.execute(call, self.sink.send, mine.set)
            if frame is not None:
                await self.sink.send(frame)
        except anyio.get_cancelled_exc_class():
            await self._answer_abandoned(call, started)
            raise
        finally:
            self._queued_bytes -= size
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
        self.answered.set()
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()

    async def _wait_idle(self) -> None:
        while self._inflight > 0:
            if self._idle.is_set():
                self._idle = anyio.Event()
            await self._idle.wait()
