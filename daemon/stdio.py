"""stdin and stdout as a byte source and a frame sink.

stdin is read unbuffered (``os.read`` returns whatever the pipe holds) by a
daemon thread, so a single request is seen as soon as its line arrives rather
than when a 64 KiB buffer fills, and a blocked read never holds up shutdown.
It works for pipes, terminals and redirected files alike.

stdout is the wire and nothing else may write to it: ``claim_stdout`` moves
the real stdout to a private descriptor and points fd 1 at stderr, so a stray
``print`` (ours or a library's, Python or C) lands in the log instead of
corrupting a frame. A writer thread drains frames to the private descriptor,
so a slow reader never blocks the event loop.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
from typing import Final

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

_CHUNK: Final = 1 << 16
_EOF: Final = b""


def claim_stdout() -> int:
    """Return a private duplicate of fd 1 for frames and point fd 1 at stderr."""
    sys.stdout.flush()
    wire = os.dup(1)
    os.dup2(2, 1)
    return wire


class StdinSource:
    """A ``ByteSource`` over a file descriptor, read by a thread on demand.

    The thread reads only when the server asks for the next chunk, so the
    daemon never holds bytes it has not looked at: when it stops, what it has
    read is answered and the rest stays in the pipe.
    """

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd
        self._send, self._recv = anyio.create_memory_object_stream[bytes](1)
        self._want = threading.Semaphore(0)
        self._asked = False
        self._started = False

    async def receive(self) -> bytes:
        """The next chunk, or ``b""`` at EOF (or once the reader thread has died)."""
        if not self._started:
            self._started = True
            token = anyio.lowlevel.current_token()
            threading.Thread(
                target=self._pump, args=(token,), name="brain-stdin", daemon=True
            ).start()
        if not self._asked:  # a cancelled receive leaves its read outstanding
            self._asked = True
            self._want.release()
        try:
            chunk = await self._recv.receive()
        except anyio.EndOfStream:
            return _EOF
        self._asked = False
        return chunk

    def _pump(self, token: anyio.lowlevel.EventLoopToken) -> None:
        try:
            while True:
                self._want.acquire()
                try:
                    chunk = os.read(self._fd, _CHUNK)
                except OSError:
                    chunk = _EOF
                if not chunk:
                    break
                anyio.from_thread.run(self._send.send, chunk, token=token)
        except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the loop is gone or stopped listening: nothing left to feed
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(self._send.close, token=token)


class StdoutSink:
    """A ``FrameSink`` that queues frames for a writer thread (never blocks the loop)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.broken = False
        self._thread = threading.Thread(target=self._drain, name="brain-stdout", daemon=True)
        self._thread.start()

    async def send(self, frame: bytes) -> None:
        """Queue a frame; it is written in order, coalesced with its neighbours."""
        self._queue.put(frame)

    def close(self, timeout: float = 10.0) -> None:
        """Write everything queued, then stop the writer thread."""
        self._queue.put(None)
        self._thread.join(timeout)
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def _drain(self) -> None:
        while True:
            frame = self._queue.get()
            batch = [] if frame is None else [frame]
            stop = frame is None
            while not stop:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                else:
                    batch.append(more)
            if batch and not self.broken:
                self._write(b"".join(batch))
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
