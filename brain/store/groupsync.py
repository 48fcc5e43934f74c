"""Group commit: commits made at ``synchronous=NORMAL`` made durable by fsyncs that every
waiting writer shares.

At ``synchronous=FULL`` each commit waits for its own fsync of the WAL (2-3 ms on
the test machine, where a commit without it takes ~7 us), so concurrent writers
queue behind each other's fsyncs. With ``group_commit`` the engine's write
connection commits at NORMAL (the frames reach the WAL file, surviving a killed
process at once) and each writer, after releasing the engine's lock, waits in
``GroupSync.wait`` for an fsync of the WAL file that *started after* its commit:
one fsync then covers every commit made while the previous one ran. A write is
acknowledged only after that fsync, so an acknowledged write survives power loss
as at FULL. ``fsync`` on a descriptor of our own flushes the file's pages whoever
wrote them (Linux, and POSIX for the inode).

A checkpoint at NORMAL fsyncs the WAL before copying it and the database after, and
a WAL that is gone was checkpointed whole by the last connection that closed it,
so a missing WAL file has nothing left to make durable.

A caller that has something else to do between the commit and the fsync (the
daemon releases the session's lane, so the session's next write commits and joins
the same fsync) runs the write inside ``deferring()``: the lease then only marks
the ``Deferred`` it yields, and the caller waits (``Brain.durable``) before it
answers.

Tested in tests/brain/store/test_groupsync.py and, with real kill -9,
tests/reliability/test_group_commit.py.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from brain.errors import StorageError


class GroupSync:
    """Shared fsyncs of one database's WAL file. Thread-safe."""

    def __init__(self, wal: Path) -> None:
        """``wal``: the WAL file to make durable (``<db>-wal``)."""
        self._wal = wal
        self._cond = threading.Condition()
        self._started = 0  # fsyncs begun
        self._done = 0  # fsyncs finished (the highest number that did)
        self._running = False
        self.syncs = 0
        """fsyncs made (a test and bench hook: fewer than the writes that waited)."""
        self.waiting = 0
        """Threads inside ``wait`` (a test hook)."""

    def wait(self) -> None:
        """Return once an fsync begun after this call has finished (or raise its error).

        The first waiter to find none running runs it in its own thread; waiters
        arriving meanwhile wait for the next one, which the first of them to wake
        runs for all of them.
        """
        with self._cond:
            self.waiting += 1
            try:
                self._wait_for(self._started + 1)
            finally:
                self.waiting -= 1

    def _wait_for(self, target: int) -> None:
        """Under the condition's lock: until fsync number ``target`` has finished."""
        while self._done < target:
            if self._running:
                self._cond.wait()
                continue
            self._running = True
            self._started += 1
            number = self._started
            self._cond.release()
            try:
                self._fsync()
            finally:
                self._cond.acquire()
                self._running = False
                self._cond.notify_all()
            self._done = number

    def _fsync(self) -> None:
        try:
            fd = os.open(self._wal, os.O_RDONLY)
        except FileNotFoundError:
            return  # checkpointed whole and removed: nothing left to make durable
        except OSError as exc:
            raise StorageError(f"cannot open the WAL to make a commit durable: {exc}") from exc
        try:
            os.fsync(fd)
            self.syncs += 1
        except OSError as exc:
            raise StorageError(f"fsync of the WAL failed: {exc}") from exc
        finally:
            os.close(fd)


@dataclass(slots=True)
class Deferred:
    """Writes made inside ``deferring()`` that still wait for their fsync."""

    needed: bool = False


_deferred: ContextVar[Deferred | None] = ContextVar("brain_deferred_sync", default=None)


@contextlib.contextmanager
def deferring() -> Iterator[Deferred]:
    """Writes made in this context (and threads started from it) skip the fsync wait.

    The caller must make them durable (``Brain.durable``) before acknowledging them
    when ``needed`` is set.
    """
    pending = Deferred()
    token = _deferred.set(pending)
    try:
        yield pending
    finally:
        _deferred.reset(token)


def deferred() -> Deferred | None:
    """The ``Deferred`` of the current context, if a caller is deferring."""
    return _deferred.get()
