"""Embedding off the request path.

Ingest and compaction queue rows for embedding (``brain.vectors.index``); this loop
drains the queue in batches with ``Brain.embed_pending``, then the entity
index's queue with ``Brain.index_entities`` (no provider: regexes, but too slow
for ingest's own transaction), then the rollups' queue with
``Brain.refresh_rollups`` (the day and week rollups of new leaf summaries). ``request()`` after a
write wakes it; it also looks every ``every_s`` seconds, so a queue left by a
previous process (or another process) is drained too. Like compaction, it
waits for writes to go quiet for ``settle_s`` (at most ``max_wait_s``) before it
starts, so a bulk import does not compete with embedding for the interpreter
lock, and it has its own limiter, so it never takes the threads requests use.
"""

from __future__ import annotations

import anyio

from brain import Brain, BrainError
from daemon.logs import log
from daemon.settle import until_quiet


class Embeddings:
    """The background embedder of one engine."""

    def __init__(
        self,
        brain: Brain,
        *,
        batch: int = 256,
        every_s: float = 5.0,
        settle_s: float = 0.25,
        max_wait_s: float = 5.0,
    ) -> None:
        self.brain = brain
        self.batch = batch
        self.every_s = every_s
        self.settle_s = settle_s
        self.max_wait_s = max_wait_s
        self.embedded = 0
        self._last_error: str | None = None
        self._entities_error: str | None = None
        self._rollups_error: str | None = None
        self._limiter = anyio.CapacityLimiter(1)
        self._wake = anyio.Event()
        self._last_request = 0.0
        self._stopped = False

    def request(self) -> None:
        """Something was written: drain the queue once writes settle."""
        self._last_request = anyio.current_time()
        self._wake.set()

    def stop(self) -> None:
        """Finish the batch in progress and start no other."""
        self._stopped = True
        self._wake.set()

    async def _index_entities(self) -> None:
        """Drain the entity index's queue (``Brain.index_entities``), one batch a turn
        so a stop is never held up long."""
        try:
            while not self._stopped:
                n = await anyio.to_thread.run_sync(
                    self.brain.index_entities, 1, limiter=self._limiter
                )
                if n == 0:
                    break
            self._entities_error = None
        except Exception as exc:  # background work must never end the daemon
            if repr(exc) != self._entities_error:  # said once per distinct error
                expected = isinstance(exc, BrainError)
                log.warning(
                    "background entity indexing failed",
                    error=repr(exc),
                    exc_info=None if expected else exc,
                )
            self._entities_error = repr(exc)

    async def _refresh_rollups(self) -> None:
        """Refresh the rollups of leaves queued since the last turn
        (``Brain.refresh_rollups``), one batch a turn so a stop is never held up long."""
        try:
            while not self._stopped:
                report = await anyio.to_thread.run_sync(
                    self.brain.refresh_rollups, 1, limiter=self._limiter
                )
                if report.leaves == 0:
                    break
            self._rollups_error = None
        except Exception as exc:  # background work must never end the daemon
            if repr(exc) != self._rollups_error:  # said once per distinct error
                expected = isinstance(exc, BrainError)
                log.warning(
                    "background rollup refresh failed",
                    error=repr(exc),
                    exc_info=None if expected else exc,
                )
            self._rollups_error = repr(exc)

    async def run(self) -> None:
        """Loop until cancelled or stopped, draining the queue when woken or periodically."""
        while not self._stopped:
            await until_quiet(
                lambda: self._last_request, self.settle_s, self.max_wait_s, lambda: self._stopped
            )
            try:
                while not self._stopped:
                    # Abandoned if cancelled: a hung provider must not hold up a stop.
                    n = await anyio.to_thread.run_sync(
                        self.brain.embed_pending,
                        self.batch,
                        limiter=self._limiter,
                        abandon_on_cancel=True,
                    )
                    if n == 0:
                        break
                    self.embedded += n
                self._last_error = None
            except Exception as exc:  # background work must never end the daemon
                # Said once per distinct error: a provider that stays down, or another
                # process owning the index with another embedder, would otherwise log
                # the same line every ``every_s``.
                if repr(exc) != self._last_error:
                    # An engine error is expected (a provider down) and says enough;
                    # anything else is a bug and needs its traceback.
                    expected = isinstance(exc, BrainError)
                    log.warning(
                        "background embedding failed",
                        error=repr(exc),
                        exc_info=None if expected else exc,
                    )
                self._last_error = repr(exc)
            await self._index_entities()
            await self._refresh_rollups()
            with anyio.move_on_after(self.every_s):
                await self._wake.wait()
            self._wake = anyio.Event()
