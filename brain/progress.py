"""The progress callback long engine operations accept.

``progress(done, total, phase)``: ``done`` units of ``phase`` finished out of
``total`` (None when not known in advance). Called from the thread doing the
work; it must be cheap or rate-limit itself (the daemon's does).

A type and a no-op: tested through the reports a daemon sends
(``tests/e2e/test_progress.py``).
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int | None, str], None]


def ignore(_done: int, _total: int | None, _phase: str) -> None:
    """The progress callback of callers that did not ask for progress."""
