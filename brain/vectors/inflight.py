"""A batch taken from the embed queue, being embedded on a thread of its own.

``Embedding.embed_ahead`` keeps one at the embedder while it stores the one before:
with the static embedder's child process (``brain.vectors.embed_child``) the child
then embeds while the worker waits for the writer's lock, takes and puts. The thread
only embeds (it never touches the store), so abandoning a batch writes nothing: its
rows stay queued. Tested through tests/brain/vectors/test_embed_ahead.py.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain.vectors.embedders import Embedder, Matrix
    from brain.vectors.epochs import Kind
    from brain.vectors.index import VectorIndex
    from brain.vectors.queue import Pending

__all__ = ["InFlight"]


class InFlight:
    """``pending``'s texts being embedded by ``embedder`` for ``index`` (started at once)."""

    def __init__(self, embedder: Embedder, index: VectorIndex, pending: Pending) -> None:
        self.index = index
        self.pending = pending
        self.last: tuple[Kind, int] | None = max((*pending.keys, *pending.gone), default=None)
        """The batch's last queue key (the queue's order): the next batch starts after it."""
        self._vectors: Matrix | None = None
        self._error: BaseException | None = None
        # A daemon thread: a process exiting does not wait for a batch nobody will store.
        self._thread = threading.Thread(
            target=self._embed, args=(embedder,), name="brain-embed-ahead", daemon=True
        )
        self._thread.start()

    def _embed(self, embedder: Embedder) -> None:
        try:
            self._vectors = self.pending.embed(embedder, self.index.dim)
        except BaseException as exc:  # handed to result()'s caller
            self._error = exc

    def result(self) -> Matrix:
        """The vectors of ``pending.to_embed`` once embedded; the embedder's error if it failed."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._vectors is not None
        return self._vectors
