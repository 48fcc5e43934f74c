"""What a handler gets: the engine, ways to run blocking work off the loop
(database work, and waits on each provider apart from it), and hooks into the
server (write accounting, shutdown)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from brain import Brain, DatabaseFileLost
from daemon.compactions import Compactions
from daemon.embeddings import Embeddings
from daemon.providers import Provider
from daemon.stopping import Shutdown

T = TypeVar("T")


class Context:
    """Shared state of one daemon process, handed to every handler."""

    def __init__(
        self,
        brain: Brain,
        *,
        db_threads: int = 4,
        provider_concurrency: int = 8,
        provider_deadline_s: float = 60.0,
        shutdown: Shutdown | None = None,
    ) -> None:
        self.brain = brain
        # The stop's deadline, shared by the server and the ``shutdown`` handler.
        self.shutdown = shutdown or Shutdown(30.0)
        self.compactions = Compactions(brain)
        self.embeddings = Embeddings(brain)
        # The engine serialises database access itself; the limiter only bounds
        # how many worker threads may wait on it at once.
        self.db_limiter = anyio.CapacityLimiter(db_threads)
        # Provider waits never take a database thread: each provider has its own
        # threads, so a hung LLM holds up neither ingest nor the embedder's callers.
        self.llm = Provider("LLM", concurrency=provider_concurrency, deadline_s=provider_deadline_s)
        """Waits on the chat model (``expand_query``'s synthesis)."""
        self.embedding = Provider(
            "embedding", concurrency=provider_concurrency, deadline_s=provider_deadline_s
        )
        """Waits on the embedder (query vectors for grep, query, teach, recall; sync's nodes)."""
        self.writes = 0
        self._write_listeners: list[Callable[[], None]] = []
        self.lost: DatabaseFileLost | None = None
        """Set once a request found the database file moved, replaced or deleted."""
        self._lost_listeners: list[Callable[[], None]] = []

    async def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking engine work in a worker thread; the event loop stays free.

        Cancelling the caller abandons the thread instead of waiting for it: a
        thread blocked for good (another process's write lock) must not keep a
        stopping daemon alive. Whatever it commits later is committed all the same.
        """
        call = functools.partial(fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=self.db_limiter, abandon_on_cancel=True)

    def note_write(self) -> None:
        """Count an acknowledged write (drives auto-save)."""
        self.writes += 1
        for listener in self._write_listeners:
            listener()

    def on_write(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every acknowledged write."""
        self._write_listeners.append(listener)

    def note_lost(self, error: DatabaseFileLost) -> None:
        """Record that the database file is gone; tell the listeners once."""
        if self.lost is None:
            self.lost = error
            for listener in self._lost_listeners:
                listener()

    def on_lost(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when a request finds the database file gone (the daemon stops)."""
        self._lost_listeners.append(listener)
