"""A short interpreter-lock switch interval for the serving process.

The daemon answers ``ping`` and ``info`` on its event loop thread while background
threads (the embedding worker: tokenizing, gathering token rows; the entity index:
regexes; the maintenance pump) run Python. A thread that wakes for a request line
needs the interpreter lock; when the worker holds it and does not release it on its
own (a stretch of pure Python), the waiter asks for it only after the switch
interval, 5 ms by default. A cheap request then takes 5 ms instead of 0.06 ms.

``SWITCH_INTERVAL_S`` bounds that wait at 0.5 ms. It costs nothing while only one
thread runs (the interval only matters when a thread waits), and a forced switch costs
a few microseconds, so at most ~2,000 of them a second while a request waits on a
busy worker. Measured in docs/architecture.md (The request loop).

Tested in tests/daemon/test_switching.py.
"""

from __future__ import annotations

import sys
from typing import Final

SWITCH_INTERVAL_S: Final = 0.0005
"""The longest a thread waiting for the interpreter lock waits before it asks for it."""


def shorten_switch_interval() -> None:
    """Set the interpreter's switch interval to ``SWITCH_INTERVAL_S`` (process-wide)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
