"""Embedding off the request path.

Ingest and compaction queue rows for embedding (``brain.vectors.index``); this loop
drains the queue in batches with ``Brain.embed_pending``, in turns with the entity
index's queue (``Brain.index_entities``: no provider, regexes, but too slow
for ingest's own transaction) and the rollups' queue
(``Brain.refresh_rollups``: the day and week rollups of new leaf summaries), one
batch of each a round, so no queue waits for another to empty; then, with a
retention limit set, a retention pass (``Brain.retain``) every ``retention_every_s``
(the first one on its first turn). ``request()`` after a
write wakes it; it also looks every ``every_s`` seconds, so a queue left by a
previous process (or another process) is drained too. Like compaction, it
waits for writes to go quiet for ``settle_s`` (at most ``max_wait_s``) before it
starts, so a bulk import does not compete with embedding for the interpreter
lock, and it has its own limiter, so it never takes the threads requests use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import anyio

from brain import Brain, BrainError, ChildStaticEmbedder
from daemon.logs import log
from daemon.settle import until_quiet

BATCH: Final = 1024
"""Rows per embedding batch of an embedder that runs in this process (or a provider)."""
CHILD_BATCH: Final = 4096
"""Rows per embedding batch when the static embedder's child process embeds them
(``brain.vectors.embed_child``)."""


class Embeddings:
    """The background embedder of one engine."""

    def __init__(
        self,
        brain: Brain,
        *,
        batch: int | None = None,
        every_s: float = 5.0,
        settle_s: float = 0.25,
        max_wait_s: float = 5.0,
        retention_every_s: float = 600.0,
        embed_share: int = 3,
    ) -> None:
        self.brain = brain
        self.embed_share = max(1, embed_share)
        """Embedding batches per batch of the entity index and of the rollups while
        rows wait to be embedded."""
        self.retention_every_s = retention_every_s
        self._retained_at: float | None = None
        self._batch = batch
        self.every_s = every_s
        self.settle_s = settle_s
        self.max_wait_s = max_wait_s
        self.embedded = 0
        self._errors: dict[str, str | None] = {}
        """The last error of each queue (``_step``'s ``what``), None after a batch went
        through."""
        self._limiter = anyio.CapacityLimiter(1)
        self._wake = anyio.Event()
        self._last_request = 0.0
        self._stopped = False

    @property
    def batch(self) -> int:
        """Rows per embedding batch: the one given, else ``CHILD_BATCH`` when the engine's
        embedder embeds large batches in a child process, else ``BATCH``.

        Each batch waits twice for the writer's lock (its take, its put), which a
        steady ingest holds most of the time, and once for the embedder. Embedded in
        this process a batch is Python holding the interpreter lock (1,024 rows:
        ~35 ms), so it stays at that; the child holds no lock of ours, and fewer,
        larger batches wait for the writer's lock fewer times per row.
        """
        if self._batch is not None:
            return self._batch
        return CHILD_BATCH if isinstance(self.brain.embedder, ChildStaticEmbedder) else BATCH

    def _embed_one(self) -> int:
        """One embedding batch; with the child embedder, the next one is sent to the
        child before this one is stored (``Brain.embed_ahead``), so the child embeds
        while this thread waits for the writer's lock, takes and puts, and while the other
        queues take their turns (one after the other, the child idled through ~35% of
        the embedding batches' wall at 100k messages, and through every other turn)."""
        if isinstance(self.brain.embedder, ChildStaticEmbedder):
            return self.brain.embed_ahead(self.batch)
        return self.brain.embed_pending(self.batch)

    def request(self) -> None:
        """Something was written: drain the queue once writes settle."""
        self._last_request = anyio.current_time()
        self._wake.set()

    def stop(self) -> None:
        """Finish the batch in progress and start no other."""
        self._stopped = True
        self._wake.set()

    async def _step(
        self,
        what: str,
        step: Callable[[], int],
        *,
        abandon_on_cancel: bool = False,
    ) -> int:
        """Run ``step`` (one batch of a queue) once; the rows it took (0 after a failure).

        Background work must never end the daemon: a failure is logged, once per
        distinct error (a provider that stays down, or another process owning the
        index with another embedder, would otherwise log the same line every
        ``every_s``), and the queue is tried again on the next turn.
        """
        try:
            n = await anyio.to_thread.run_sync(
                step, limiter=self._limiter, abandon_on_cancel=abandon_on_cancel
            )
        except Exception as exc:
            if repr(exc) != self._errors.get(what):
                # An engine error is expected (a provider down) and says enough;
                # anything else is a bug and needs its traceback.
                expected = isinstance(exc, BrainError)
                log.warning(
                    f"background {what} failed",
                    error=repr(exc),
                    exc_info=None if expected else exc,
                )
            self._errors[what] = repr(exc)
            return 0
        self._errors[what] = None
        return n

    async def _drain(self) -> None:
        """Drain the three queues in turns until a round finds nothing to do (or a stop):
        ``embed_share`` embedding batches, then one batch of each other queue (every
        round once the embedding queue is empty).

        In turns, not one queue after the other: while writes keep coming, one queue
        may never empty (the entity index is slower than ingest), and a queue behind
        it would then never be served (at 1M messages, embedding stopped for good
        once it caught up and the worker moved on to the entity index). Embedding gets
        the larger share: a row costs the entity index ~3x what it costs the static
        embedder (~170 vs ~55 us of CPU), so one batch each gave embedding 40% of the
        worker and it fell behind ingest; and a lagging entity index is caught up by
        the next ``entities`` call, while a row without a vector is missing from
        semantic search until the worker reaches it. A queue that failed waits for
        the next turn.
        """
        failed: set[str] = set()
        turn = 0
        while not self._stopped:
            progress = 0
            n = 0
            # Abandoned if cancelled: a hung provider must not hold up a stop.
            if "embedding" not in failed:
                n = await self._step("embedding", self._embed_one, abandon_on_cancel=True)
                self.embedded += n
                progress += n
                if self._errors.get("embedding"):
                    failed.add("embedding")
            turn += 1
            if n and turn % self.embed_share:
                continue  # the other queues' turn comes after embed_share batches
            for what, step in (
                ("entity indexing", lambda: self.brain.index_entities(1)),
                ("rollup refresh", lambda: self.brain.refresh_rollups(1).leaves),
            ):
                if what in failed or self._stopped:
                    continue
                progress += await self._step(what, step)
                if self._errors.get(what):
                    failed.add(what)
            if progress == 0:
                return

    async def _retain(self) -> None:
        """A retention pass when a limit is set and ``retention_every_s`` has passed.

        The pass commits in small batches and asks ``_stopped`` between them, so a
        stop waits for one batch at most; a failure is logged like any queue's.
        """
        if not self.brain.config.retention.active:
            return
        now = anyio.current_time()
        if self._retained_at is not None and now - self._retained_at < self.retention_every_s:
            return
        self._retained_at = now

        def one_pass() -> int:
            self.brain.retain(stop=lambda: self._stopped)
            return 0

        await self._step("retention", one_pass)

    async def run(self) -> None:
        """Loop until cancelled or stopped, draining the queues when woken or periodically."""
        while not self._stopped:
            await until_quiet(
                lambda: self._last_request, self.settle_s, self.max_wait_s, lambda: self._stopped
            )
            await self._drain()
            await self._retain()
            with anyio.move_on_after(self.every_s):
                await self._wake.wait()
            self._wake = anyio.Event()
