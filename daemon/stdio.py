"""stdin and stdout as a byte source and a frame sink.

stdin is read unbuffered (``os.read`` returns whatever the pipe holds), so a
single request is seen as soon as its line arrives rather than when a 64 KiB
buffer fills. Pipes are polled on the event loop; files fall back to a daemon
thread, whose blocked read never holds up shutdown.

stdout is the wire and nothing else may write to it: ``claim_stdout`` moves
the real stdout to a private descriptor and points fd 1 at stderr, so a stray
``print`` (ours or a library's, Python or C) lands in the log instead of
corrupting a frame. Frames go straight to the private descriptor when the
pipe has room, else through a writer thread, so a slow reader never blocks
the event loop.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import stat
import sys
import threading
from typing import TYPE_CHECKING, Final

import anyio

if TYPE_CHECKING:
    import anyio.lowlevel
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

_CHUNK: Final = 1 << 16
_BATCH_BYTES: Final = 1 << 20
_EOF: Final = b""


def claim_stdout() -> int:
    """Return a private duplicate of fd 1 for frames and point fd 1 at stderr."""
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)
    return wire


class StdinSource:
    """A ``ByteSource`` over a file descriptor, read only when the server asks.

    Pipes, sockets and terminals are read on the event loop once the loop
    reports them readable (no thread hop per request). Regular files and
    devices the loop cannot poll fall back to a reader thread. Either way
    nothing is read ahead: when the daemon stops, what it has read is
    answered and the rest stays in the pipe.
    """

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd
        self._pollable: bool | None = None
        # The reader thread's channel, made with the thread: a pipe never needs it.
        self._send: MemoryObjectSendStream[bytes] | None = None
        self._recv: MemoryObjectReceiveStream[bytes] | None = None
        self._want = threading.Semaphore(0)
        self._asked = False
        self._thread: threading.Thread | None = None

    async def receive(self) -> bytes:
        """The next chunk, or ``b""`` at EOF (or once the reader thread has died)."""
        if self._pollable is None:
            self._pollable = _pollable(self._fd)
        if self._pollable:
            try:
                await anyio.wait_readable(self._fd)
            except OSError:  # the loop refused this descriptor after all
                self._pollable = False
            else:
                try:
                    return os.read(self._fd, _CHUNK)
                except BlockingIOError:  # woken spuriously; nothing to read yet
                    return await self.receive()
                except OSError:
                    return _EOF
        return await self._receive_threaded()

    async def _receive_threaded(self) -> bytes:
        if self._thread is None:
            # ``from``: a plain ``import anyio.x`` here would make ``anyio`` a local name.
            from anyio.lowlevel import current_token

            self._send, self._recv = anyio.create_memory_object_stream[bytes](1)
            token = current_token()
            self._thread = threading.Thread(
                target=self._pump, args=(token, self._send), name="brain-stdin", daemon=True
            )
            self._thread.start()
        if not self._asked:  # a cancelled receive leaves its read outstanding
            self._asked = True
            self._want.release()
        assert self._recv is not None
        try:
            chunk = await self._recv.receive()
        except anyio.EndOfStream:
            return _EOF
        self._asked = False
        return chunk

    def _pump(
        self, token: anyio.lowlevel.EventLoopToken, send: MemoryObjectSendStream[bytes]
    ) -> None:
        from anyio import from_thread

        try:
            while True:
                self._want.acquire()
                try:
                    chunk = os.read(self._fd, _CHUNK)
                except OSError:
                    chunk = _EOF
                if not chunk:
                    break
                from_thread.run(send.send, chunk, token=token)
        except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the loop is gone or stopped listening: nothing left to feed
        with contextlib.suppress(RuntimeError):
            from_thread.run_sync(send.close, token=token)


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd`` (pipes, sockets, terminals)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


class StdoutSink:
    """A ``FrameSink`` that never blocks the loop for long.

    A small frame is written straight from the loop when nothing is queued
    and the pipe has room for it (``poll`` says writable, meaning at least
    ``PIPE_BUF`` bytes free, and a write of at most ``PIPE_BUF`` bytes is atomic
    and does not block). Anything else goes to a writer thread, which writes
    frames in order, coalesced. The direct path saves a thread wake-up per
    answer, which on a small VM costs ~0.2 ms.

    The queue itself is unbounded (``send`` must not block the loop), so
    ``unread_bytes`` tells the server how much a client that does not read
    has left waiting: the server stops reading requests past its bound.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._queued = 0  # frames handed to the thread and not yet written
        self._unread = 0  # their bytes
        self._count_lock = threading.Lock()
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)
        self.broken = False
        self._thread = threading.Thread(target=self._drain, name="brain-stdout", daemon=True)
        self._thread.start()

    async def send(self, frame: bytes) -> None:
        """Write or queue a frame; frames reach the client in the order sent."""
        if self.broken:
            return
        with self._count_lock:
            direct = self._queued == 0 and len(frame) <= select.PIPE_BUF and self._writable()
            if not direct:
                self._queued += 1
                self._unread += len(frame)
        if direct:
            self._write(frame)
        else:
            self._queue.put(frame)

    @property
    def unread_bytes(self) -> int:
        """Bytes of frames sent and not yet written to the pipe."""
        return self._unread

    def close(self, timeout: float = 10.0) -> None:
        """Write everything queued, then stop the writer thread."""
        self._queue.put(None)
        self._thread.join(timeout)
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def _writable(self) -> bool:
        try:
            return any(ev & select.POLLOUT for _fd, ev in self._poll.poll(0))
        except OSError:
            return False

    def _drain(self) -> None:
        while True:
            frame = self._queue.get()
            batch = [] if frame is None else [frame]
            size = 0 if frame is None else len(frame)
            stop = frame is None
            # Coalesced up to a bound: the join below copies the batch.
            while not stop and size < _BATCH_BYTES:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                else:
                    batch.append(more)
                    size += len(more)
            if batch and not self.broken:
                self._write(b"".join(batch))
            with self._count_lock:
                self._queued -= len(batch)
                self._unread -= size
            if stop:
                return

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            # The client closed its end: answers have nowhere to go. Keep
            # draining (and dropping) so the daemon can still shut down cleanly.
            self.broken = True
