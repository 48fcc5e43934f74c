"""Who waits for the write lock: a busy handler that says so, and a long writer that hears it.

A maintenance run writes in many short transactions back to back (the sweeps of
``brain.graph.maintain.writer``). A writer of another process (a daemon's ingest)
waiting for the lock in SQLite's busy handler polls it now and then, and missed
every gap between two such transactions: it was answered only after the whole
run. The sweeps used to rest 10-50 ms after every transaction whether anyone
waited or not (5 s of a 100k-node run). Now a waiting writer *says* it waits: its
busy handler holds a shared ``flock`` on a file beside the database
(``<db>-waiting``) from its first busy answer until its statement returns, and a
long writer checks that file after each commit (one non-blocking ``flock``,
about a microsecond) and holds back only while someone holds it.

``flock`` locks belong to an open file description, so two connections of one
process see each other as well as other processes. The file is made by the
first writer that waits or the first long writer that checks. When it cannot be
made (a directory this process may not write) a waiting writer waits as SQLite
would, unheard, and ``Waiting.usable`` tells the long writer to rest instead.

Tested in tests/brain/store/test_waiting.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Final

__all__ = ["IGNORE_AFTER_STUCK_S", "LET_THROUGH_MAX_S", "POLL_S", "Waiting", "waiting_path"]

POLL_S: Final = (0.0005, 0.001, 0.002, 0.005)
"""How long a waiting writer sleeps between tries of the lock: short at first (a long
writer's gap is short), then every 5 ms (SQLite's own handler slept up to 100 ms)."""
LET_THROUGH_MAX_S: Final = 1.0
"""The longest a long writer holds back for the waiting ones after a commit..."""
IGNORE_AFTER_STUCK_S: Final = 10.0
"""...and for this long after it held back that long in vain, it does not hold back:
a waiter that never takes the lock (its process stopped in the busy handler) costs
a long writer a tenth of its time at most."""


def waiting_path(db_path: Path) -> Path:
    """The file a waiting writer locks: ``<db>-waiting`` beside the database."""
    return db_path.with_name(db_path.name + "-waiting")


class Waiting:
    """One connection's side of the ``<db>-waiting`` file (not shared between threads)."""

    def __init__(self, db_path: Path, timeout_ms: int) -> None:
        self.path = waiting_path(db_path)
        self.timeout_s = timeout_ms / 1000
        self.flagged = False
        """Whether this connection holds the shared lock (it said it waits)."""
        self._fd: int | None = None
        self._started = 0.0
        self._ignore_until = 0.0
        self.usable = True
        """False once the file could not be made: waits are not heard."""

    # -- the waiting writer --------------------------------------------------

    def busy(self, calls: int) -> bool:
        """SQLite's busy handler: say we wait, sleep a little, try again until the timeout."""
        if calls == 0:
            self._started = time.monotonic()
        elif time.monotonic() - self._started >= self.timeout_s:
            return False
        if not self.flagged:  # again after a try that met a long writer's check
            self._flag()
        time.sleep(POLL_S[min(calls, len(POLL_S) - 1)])
        return True

    def _flag(self) -> None:
        fd = self._open()
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return  # a long writer is checking this instant: the next wait says it
        self.flagged = True

    def done(self) -> None:
        """The statement that waited returned (the lock taken, or given up on)."""
        if self.flagged and self._fd is not None:
            self.flagged = False
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    # -- the long writer ------------------------------------------------------

    def anyone(self) -> bool:
        """Whether another connection is waiting for the write lock now."""
        fd = self._open()
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def let_through(self) -> bool:
        """After a commit: hold back until nobody waits any more (each waiter has taken
        the lock), at most ``LET_THROUGH_MAX_S``; whether anyone waited."""
        if not self.anyone():
            return False
        now = time.monotonic()
        if now < self._ignore_until:
            return True
        deadline = now + LET_THROUGH_MAX_S
        pause = POLL_S[0]
        while self.anyone():
            if time.monotonic() >= deadline:
                self._ignore_until = time.monotonic() + IGNORE_AFTER_STUCK_S
                break
            time.sleep(pause)
            pause = min(pause * 2, POLL_S[-1])
        return True

    # -- the file ---------------------------------------------------------------

    def _open(self) -> int | None:
        if self._fd is not None or not self.usable:
            return self._fd
        flags = os.O_RDWR | os.O_CLOEXEC | os.O_CREAT
        try:
            self._fd = os.open(self.path, flags, 0o644)
        except OSError:
            self.usable = False
            return None
        return self._fd

    def close(self) -> None:
        """Release and close the file (safe to call twice)."""
        self.done()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
