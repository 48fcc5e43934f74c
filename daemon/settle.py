"""Waiting for a burst of writes to end before starting background work."""

from __future__ import annotations

from collections.abc import Callable

import anyio


async def until_quiet(
    last_activity: Callable[[], float],
    settle_s: float,
    max_wait_s: float,
    stopped: Callable[[], bool] = lambda: False,
) -> None:
    """Return once ``last_activity()`` (an anyio clock time) is ``settle_s`` old, at most
    ``max_wait_s`` after the call (so a steady stream still gets served), or when
    ``stopped()`` says so."""
    started = anyio.current_time()
    while not stopped():
        now = anyio.current_time()
        quiet_for = now - last_activity()
        if quiet_for >= settle_s or now - started >= max_wait_s:
            return
        await anyio.sleep(min(settle_s - quiet_for, max_wait_s - (now - started)))
