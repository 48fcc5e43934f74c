"""The bound on stopping: one deadline for everything a stopping daemon still does.

When the daemon stops (end of input, ``shutdown``, SIGTERM/SIGINT) it has
``shutdown_timeout_s`` to finish in-flight requests. Past that it gives up on
them (their worker threads may be stuck for good: on another process's write
lock, on a hung provider), answers ``shutdown``, closes the engine and exits.
Each final step (the flush that ``shutdown`` reports, the close, writing the
last answers) still gets at least ``grace_s``, so work that overran does not
also cost the checkpoint; the process is gone ``shutdown_timeout_s`` plus a
few ``grace_s`` after the stop began, whatever is in flight.

Committed work needs none of this: every acknowledged write is already in the
WAL, which SQLite replays at the next open. A thread abandoned mid-transaction
is no different from a ``kill -9``, which the durability tests cover.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Final

import anyio

from daemon.logs import log

GRACE_S: Final = 1.0
"""Least time each final step gets once the deadline has passed."""

_FINAL_STEPS: Final = 3
"""Flush for ``shutdown``, engine close, last answers to the client: each bounded by the grace."""


class Shutdown:
    """When the stop began, how long is left, and what was given up."""

    def __init__(self, timeout_s: float, *, grace_s: float = GRACE_S, backstop: bool = False):
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.abandoned = 0
        """Requests still running when the bound ran out (answered -32006, never waited for)."""
        self._began: float | None = None
        self._backstop = backstop

    @property
    def begun(self) -> bool:
        """Whether the daemon is stopping."""
        return self._began is not None

    def begin(self) -> None:
        """Start the clock (once; later calls keep the first start).

        With ``backstop`` (only the real process: never a test's interpreter), a
        daemon thread ends the process if the bounded steps themselves hang, so
        the limit holds even against a step nobody thought of.
        """
        if self._began is not None:
            return
        self._began = anyio.current_time()
        if self._backstop:
            limit = self.timeout_s + _FINAL_STEPS * self.grace_s + 2.0
            timer = threading.Timer(limit, _overran, args=(limit,))
            timer.name = "brain-shutdown-backstop"
            timer.daemon = True
            timer.start()

    def remaining(self) -> float:
        """Seconds left for in-flight work (infinite before the stop, never negative)."""
        if self._began is None:
            return float("inf")
        return max(0.0, self._began + self.timeout_s - anyio.current_time())

    def bound(self) -> float:
        """How long a final step may take: what is left, but at least the grace."""
        return max(self.remaining(), self.grace_s) if self._began is not None else self.timeout_s


def _overran(limit: float) -> None:
    log.error("shutdown overran its bound: exiting with work abandoned", limit_s=limit)
    sys.stderr.flush()
    os._exit(1)


def stuck_threads() -> list[str]:
    """Names of live non-daemon threads other than this one.

    The interpreter joins every one of them before it exits: a worker thread
    blocked for good (abandoned at shutdown) would keep the process alive.
    """
    me = threading.current_thread()
    return [t.name for t in threading.enumerate() if t is not me and not t.daemon and t.is_alive()]


def exit_now_if_stuck(code: int, wait_s: float = 0.5) -> None:
    """Exit with ``code`` at once if abandoned threads would hold the interpreter open.

    Called after the engine was closed (or its close timed out) and the last
    answers were written: nothing left to save, and waiting would only let
    systemd's ``TimeoutStopSec`` kill us instead. Idle worker threads, told to
    stop when the loop ended, get ``wait_s`` to finish first.
    """
    deadline = time.monotonic() + wait_s
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = stuck_threads()
    if not stuck:
        return
    log.warning("exiting with abandoned worker threads", threads=len(stuck))
    sys.stderr.flush()
    os._exit(code)
