"""What a handler gets: the engine, ways to run blocking work off the loop
(database work, and waits on each provider apart from it), and hooks into the
server (write accounting, shutdown).

Its limiters, provider pools and background workers are built on first use:
building an anyio primitive outside an event loop imports asyncio (to learn
that none runs), which a one-shot ``brain call`` of a loop-free method
(``inline``) never needs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from brain import DatabaseFileLost
from daemon.stopping import Shutdown

if TYPE_CHECKING:
    from brain import Brain
    from daemon.compactions import Compactions
    from daemon.embeddings import Embeddings
    from daemon.providers import Provider

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
        retention_every_s: float = 600.0,
    ) -> None:
        self.brain = brain
        self._retention_every_s = retention_every_s
        # The stop's deadline, shared by the server and the ``shutdown`` handler.
        self.shutdown = shutdown or Shutdown(30.0)
        self._db_threads = db_threads
        self._provider_concurrency = provider_concurrency
        self._provider_deadline_s = provider_deadline_s
        self.inline = False
        """Run ``db`` work in the calling thread: set by a one-shot ``brain call`` that
        runs a loop-free handler with no event loop (and nothing else to keep free)."""
        self.writes = 0
        self._write_listeners: list[Callable[[], None]] = []
        self.lost: DatabaseFileLost | None = None
        """Set once a request found the database file moved, replaced or deleted."""
        self._lost_listeners: list[Callable[[], None]] = []

    @functools.cached_property
    def compactions(self) -> Compactions:
        """Background and explicit compaction of this engine."""
        from daemon.compactions import Compactions

        return Compactions(self.brain)

    def compaction_counts(self) -> dict[str, int]:
        """Background compactions ``active`` (running or waiting to run) and ``completed``.

        Zeros in a process that never built its compactions (a one-shot ``brain call``),
        without building them.
        """
        compactions: Compactions | None = self.__dict__.get("compactions")
        if compactions is None:
            return {"active": 0, "completed": 0}
        return {"active": compactions.active, "completed": compactions.completed}

    @functools.cached_property
    def embeddings(self) -> Embeddings:
        """The background embedder of this engine."""
        from daemon.embeddings import Embeddings

        return Embeddings(self.brain, retention_every_s=self._retention_every_s)

    @functools.cached_property
    def db_limiter(self) -> anyio.CapacityLimiter:
        """Bounds how many worker threads may wait on the engine at once.

        The engine serialises database access itself; this only bounds the threads.
        """
        return anyio.CapacityLimiter(self._db_threads)

    @functools.cached_property
    def llm(self) -> Provider:
        """Waits on the chat model (``expand_query``'s synthesis).

        Provider waits never take a database thread: each provider has its own
        threads, so a hung LLM holds up neither ingest nor the embedder's callers.
        """
        from daemon.providers import Provider

        return Provider(
            "LLM", concurrency=self._provider_concurrency, deadline_s=self._provider_deadline_s
        )

    @functools.cached_property
    def embedding(self) -> Provider:
        """Waits on the embedder (query vectors for grep, query, teach, recall; sync's nodes)."""
        from daemon.providers import Provider

        return Provider(
            "embedding",
            concurrency=self._provider_concurrency,
            deadline_s=self._provider_deadline_s,
        )

    async def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking engine work in a worker thread; the event loop stays free.

        Cancelling the caller abandons the thread instead of waiting for it: a
        thread blocked for good (another process's write lock) must not keep a
        stopping daemon alive. Whatever it commits later is committed all the same.
        With ``inline`` it runs here instead (no event loop to keep free).
        """
        if self.inline:
            return fn(*args, **kwargs)
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
