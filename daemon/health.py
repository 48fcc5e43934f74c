"""Whether the engine can still do work: what the systemd watchdog reports.

``ping`` is answered on the event loop, so a loop that answers says nothing
about the database: four requests stuck in worker threads (on a lock another
process holds, on a FIFO, inside a long statement) leave every ``ingest`` and
``info`` unanswered while ``ping`` and the loop's own watchdog pings carry on.
``EngineProbe`` runs a trivial read (``Brain.probe``) through the same worker
limiter and engine lock that requests use, one at a time, every few seconds;
when none has completed for ``stall_s`` the engine counts as stalled and the
notifier withholds ``WATCHDOG=1``, so systemd kills the service and
``Restart=on-failure`` starts a fresh one.
"""

from __future__ import annotations

import anyio

from daemon.context import Context
from daemon.logs import log


class EngineProbe:
    """Tracks when a trivial read through the engine last completed."""

    def __init__(self, context: Context, stall_s: float) -> None:
        self.context = context
        self.stall_s = stall_s
        # Often enough that a healthy engine is never mistaken for a stalled one.
        self.every_s = min(max(stall_s / 4, 0.02), 5.0)
        self._last_ok = anyio.current_time()
        self._stalled = False

    def healthy(self) -> bool:
        """Whether a probe completed within the last ``stall_s`` seconds (logs each change)."""
        stalled = anyio.current_time() - self._last_ok > self.stall_s
        if stalled != self._stalled:
            self._stalled = stalled
            if stalled:
                log.error("engine stalled: no database work completes", stall_s=self.stall_s)
            else:
                log.info("engine answers again")
        return not stalled

    async def run(self) -> None:
        """Probe until cancelled; a probe that blocks simply leaves ``healthy`` to go stale."""
        while True:
            try:
                await self.context.db(self.context.brain.probe)
            except Exception as exc:  # an error is an answer: the engine is not stuck
                log.debug("engine probe failed", error=repr(exc))
            self._last_ok = anyio.current_time()
            await anyio.sleep(self.every_s)
