"""Compaction off the request path.

``request(session)`` after an ingest (or an assemble: a new budget to follow,
history it could not hold) starts (at most) one background task per
session that folds history while it is over the threshold; a request that
arrives while that task runs makes it look again before it ends, so no
threshold crossing is missed. The task first waits for the session to go
quiet for ``settle_s`` (at most ``max_wait_s``): during a bulk import the
summarizer would otherwise compete with ingest for the one interpreter lock
(measured: batched ingest through the daemon fell from 34k to 16k msg/s),
while a conversation at human pace is compacted a quarter second after its
turn. A task first asks the engine whether there is anything to do (a few
indexed reads) and ends at once when there is not, so ``active`` (reported by
``info``) falls back to 0 as soon as a host's turn needs no compaction; during
a burst that costs one check per request until compaction is due, then the
task waits out the burst as before.
A host that never goes quiet (a tool loop with fast tools and model, a replay,
several writers on one session) would outrun that wait: history the context
cannot hold piles up with no summary to stand for it. So an ``assemble`` that had
to leave history out (a stand-in named it) asks with ``urgent``: the task starts
at once, or stops waiting, and folds back to back while assembles keep finding
history left out (each pass commits alone and the summarizer runs in its own
process, so requests go on between passes).
``request(session, rebuild_only=True)`` (after a ``suppress``) only rebuilds
the summaries it withheld, whatever ``auto`` says; a compaction rebuilds them
first too. ``run`` executes an explicit ``compact`` in the same worker pool.
Compaction threads have their own limiter, so a long sweep never takes the
threads that ``assemble`` and ``ingest`` use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.abc
import anyio.to_thread

from brain import Brain, BrainError
from daemon.logs import log
from daemon.settle import until_quiet

T = TypeVar("T")


class Compactions:
    """Background and explicit compaction for one engine."""

    def __init__(
        self, brain: Brain, *, threads: int = 2, settle_s: float = 0.25, max_wait_s: float = 5.0
    ) -> None:
        self.brain = brain
        self.settle_s = settle_s
        self.max_wait_s = max_wait_s
        self._last: dict[str, float] = {}
        self._limiter = anyio.CapacityLimiter(threads)
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._fold: set[str] = set()  # sessions that asked for compaction, not only rebuilds
        self._urgent: set[str] = set()  # sessions whose assemble left history out
        self._tg: anyio.abc.TaskGroup | None = None
        self.completed = 0

    def attach(self, tg: anyio.abc.TaskGroup) -> None:
        """Run background work in ``tg`` (until then, requests are ignored)."""
        self._tg = tg

    @property
    def active(self) -> int:
        """Sessions with a background compaction running."""
        return len(self._running)

    def request(self, session: str, *, rebuild_only: bool = False, urgent: bool = False) -> None:
        """Make sure the session gets compacted if it is over the threshold (or, with
        ``rebuild_only``, that its withheld summaries get rebuilt); ``urgent``: without
        waiting for the session to go quiet (its context is leaving history out)."""
        if self._tg is None:
            return
        self._last[session] = anyio.current_time()
        if not rebuild_only:
            self._fold.add(session)
        if urgent:
            self._urgent.add(session)
        if session in self._running:
            self._again.add(session)
            return
        self._running.add(session)
        self._tg.start_soon(self._background, session)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a compaction call in a compaction thread (abandoned, not awaited, if cancelled)."""
        call = functools.partial(fn, *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter, abandon_on_cancel=True)

    async def _background(self, session: str) -> None:
        check_first = True
        try:
            while True:
                self._again.discard(session)
                if check_first:
                    # Most turns need no compaction: say so at once.
                    check_first = False
                    if not await self.run(self.brain.compaction_due, session):
                        if session not in self._again:
                            return
                        continue
                # request() records the session's last ingest before starting us. An
                # urgent request skips the wait, or ends it.
                if session not in self._urgent:
                    await until_quiet(
                        lambda: self._last.get(session, 0.0),
                        self.settle_s,
                        self.max_wait_s,
                        stopped=lambda: session in self._urgent,
                    )
                self._urgent.discard(session)
                fold = session in self._fold
                self._fold.discard(session)
                work = self.brain.compact_incremental if fold else self.brain.rebuild_withheld
                report = await self.run(work, session)
                if report.summaries:
                    self.completed += 1
                    log.info(
                        "compacted",
                        session=session,
                        leaf=report.leaf_passes,
                        rebuilt=report.rebuilt,
                        condensed=report.condensed_passes,
                        tokens_before=report.tokens_before,
                        tokens_after=report.tokens_after,
                        took_ms=round(report.took_ms, 1),
                    )
                if session not in self._again:
                    return
        except BrainError as exc:  # expected (a busy database, a provider down): no traceback
            log.warning("background compaction failed", session=session, error=repr(exc))
        except Exception:  # background work must never end the daemon; a bug needs its traceback
            log.exception("background compaction failed", session=session)
        finally:
            self._running.discard(session)
            self._fold.discard(session)
            self._urgent.discard(session)
            self._last.pop(session, None)
