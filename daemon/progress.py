"""Progress notifications: a long request tells its client how far it got.

A request with ``"progress": true`` (and an id) gets, while it runs,
notifications ``{"method": "progress", "params": {"id", "done", "total",
"phase"}}`` on the same stream, before its answer. Engine work runs in worker
threads, so the reporter handed to it is a plain function: it sends through
the event loop (``anyio.from_thread``) and waits for the write, which keeps
notifications in order and before the answer. Reports come at most every
``INTERVAL_S`` per request, except a phase change or the last step, so a
tight loop cannot flood the client.

Handlers read the current request's reporter from ``current`` (a context
variable the dispatcher sets around each call) and pass it to the engine
method; requests that did not ask get None, and the engine skips reporting.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from brain import Progress
from daemon.logs import log
from protocol.wire import notification_frame

INTERVAL_S: Final = 0.1

current: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "brain_progress", default=None
)


def reporter(request_id: Any, send: Callable[[bytes], Awaitable[None]]) -> Progress:
    """A progress function for one request that sends through the event loop."""
    last_at = [0.0]
    last_phase = [""]

    def report(done: int, total: int | None, phase: str) -> None:
        now = time.monotonic()
        final = total is not None and done >= total
        if phase == last_phase[0] and not final and now - last_at[0] < INTERVAL_S:
            return
        last_at[0], last_phase[0] = now, phase
        frame = notification_frame(
            "progress", {"id": request_id, "done": done, "total": total, "phase": phase}
        )

        async def deliver() -> None:
            await send(frame)

        from anyio import from_thread  # ~7 ms: only requests that report progress need it

        try:
            from_thread.run(deliver)
        except RuntimeError:
            # Not in a worker thread started by the loop: nothing to send through.
            log.debug("progress report outside a worker thread", phase=phase)

    return report


def get() -> Progress | None:
    """The current request's progress function, if it asked for progress."""
    return current.get()
