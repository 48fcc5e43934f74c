"""The static embedder's large batches made by a child process, off the daemon's GIL.

The static embedder (``StaticEmbedder``) is Python and small numpy calls: ~15 us of
tokenizer bookkeeping and ~20 us of gathering and averaging token rows per chat
message, almost all of it holding the interpreter lock. Run by the daemon's
background worker, a backlog of thousands of rows kept that lock from the event
loop (``ping`` and ``info`` waited for it, up to the switch interval each time) and
from the threads ingest runs on, and it could only ever use the core the rest of
the daemon was using: the 1M-message build embedded 875 vectors/s against ingest's
920 messages/s.

:class:`ChildStaticEmbedder` is a ``StaticEmbedder`` (same ``name``, ``dim`` and
vectors: the child runs the same code, so nothing is re-embedded and the stored
identity stays) whose batches of at least ``min_batch`` texts are embedded by one
child (``python -m brain.vectors.embed_child``, this ``brain`` package first on
its path), started on the first such batch and kept. The calling thread waits on
the pipe with the lock released. Smaller batches (a query, a host's one message)
are embedded here as before: a round trip to the child costs more than they do.
A child that cannot start, dies or answers garbage is not an error: that batch is
embedded in this process and the next large one starts a new child. The child
exits when its stdin closes (``close``, or this process going away).

Frames (``brain.children``): a 4-byte length, then a pickled list of texts one way and the rows' raw
float32 bytes (or a pickled error) the other, between two processes running the
same code. Tested in tests/brain/vectors/test_embed_child.py and, through the
daemon, tests/e2e/test_embed_child.py.
"""

from __future__ import annotations

import atexit
import contextlib
import pickle
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Final

from brain.children import (
    HasChild,
    child_output,
    kill_after,
    receive_frame,
    send_frame,
    start_child,
)
from brain.vectors.embedders import StaticEmbedder

if TYPE_CHECKING:
    from brain.vectors.embedders import Matrix

__all__ = ["ChildStaticEmbedder", "main"]

_ROWS: Final = b"R"
_ERROR: Final = b"E"
MIN_BATCH: Final = 256
"""Texts from which a batch goes to the child: ~9 ms of embedding here, against a
round trip of well under a millisecond; small enough for every batch of a backlog
(the worker takes 1,024 rows), large enough that a host's messages and every query
stay in process."""


class ChildStaticEmbedder(StaticEmbedder, HasChild):
    """``StaticEmbedder`` whose batches of ``min_batch`` texts or more a child process embeds."""

    def __init__(self, batch_size: int = 4096, *, min_batch: int = MIN_BATCH) -> None:
        # Compact here: this process embeds only queries and small batches; the child,
        # which embeds the backlogs, keeps the faster float32 table.
        super().__init__(batch_size, compact=True)
        self.min_batch = max(1, min_batch)
        self._child_lock = threading.Lock()
        self._closed = False
        atexit.register(self.close)

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` (see ``StaticEmbedder.embed``); large batches in the child."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        if len(texts) >= self.min_batch:
            with self._child_lock:
                rows = None if self._closed else self._ask(list(texts))
            if rows is not None:
                return rows
        return super().embed(texts)

    def close(self) -> None:
        """End the child (it exits when its stdin closes); later batches embed in process.

        Never waits long for a batch in flight: a thread abandoned by a stopping
        daemon may hold the child, and the stop must not wait for it. The child is
        killed then, and that thread embeds its batch in process (or is gone).
        """
        self._closed = True
        self._stop_within(self._child_lock)

    def _ask(self, texts: list[str]) -> Matrix | None:
        """The child's rows for ``texts``, or None when there is no working child (dropped)."""
        import numpy as np

        try:
            proc = self._running()
            if proc is None:
                self._stop()
                proc = self._proc = _start()
            assert proc.stdin is not None
            assert proc.stdout is not None
            with kill_after(proc, answer_deadline_s(len(texts))):
                _send(proc.stdin, pickle.dumps(texts, protocol=pickle.HIGHEST_PROTOCOL))
                body = _receive(proc.stdout)
        except (OSError, EOFError, ValueError):
            self._stop()
            return None
        if body[:1] == _ROWS and len(body) - 1 == len(texts) * self.dim * 4:
            rows: Matrix = np.frombuffer(body, dtype=np.float32, offset=1).reshape(
                len(texts), self.dim
            )
            return rows.copy()  # writable, as the in-process result is
        error: object = None
        if body[:1] == _ERROR:
            with contextlib.suppress(Exception):
                error = pickle.loads(body[1:])  # noqa: S301 (our own child's frame)
        if isinstance(error, Exception):
            raise error  # the embedder's own error, as this process would have raised it
        self._stop()
        return None


ANSWER_BASE_S = 30.0
ANSWER_PER_TEXT_S = 0.01
"""A child's deadline for a batch: 30 s plus 10 ms a text. The static embedder does
thousands of texts a second on one core (a 4096-text batch well under 10 s even on a
loaded machine), so a child past 30 s + 41 s is wedged, not slow; it is killed and the
batch embedded in process."""


def answer_deadline_s(texts: int) -> float:
    """How long the child may take over a batch of ``texts`` before it is killed."""
    return ANSWER_BASE_S + ANSWER_PER_TEXT_S * texts


def _start() -> subprocess.Popen[bytes]:
    # Small products want one BLAS thread (daemon/blas.py); the child makes none anyway.
    return start_child("brain.vectors.embed_child", env={"OPENBLAS_NUM_THREADS": "1"})


def _send(out: IO[bytes], data: bytes) -> None:
    send_frame(out, data)


def _receive(stream: IO[bytes]) -> bytes:
    return receive_frame(stream, "the embedding child")


def main() -> None:
    """The child: answer each frame of texts on stdin with their rows, until stdin closes."""
    embedder = StaticEmbedder()
    out = child_output()
    stdin = sys.stdin.buffer
    while True:
        try:
            texts = pickle.loads(_receive(stdin))  # noqa: S301 (our parent's frame)
        except EOFError:
            break
        try:
            reply = _ROWS + embedder.embed(texts).astype("float32", copy=False).tobytes()
        except Exception as exc:
            try:
                reply = _ERROR + pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PickleError, TypeError, AttributeError):
                reply = _ERROR + pickle.dumps(RuntimeError(f"embedding failed: {exc!r}"))
        _send(out, reply)
    out.close()


if __name__ == "__main__":
    main()
