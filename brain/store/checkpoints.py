"""WAL checkpoints off the writers' commits: a thread of its own copies the WAL into the
database file, so no request's commit waits for that copy and its fsyncs.

SQLite's default checkpoints inside the commit that takes the WAL past
``wal_autocheckpoint`` pages (1,000): one recorded graph query in ~50 waited for
1,000 pages copied and two fsyncs (its round trip 15-25 ms on the loaded test
machine, against ~3 ms). ``Checkpoints.install`` replaces that default on the
engine's write connection (``apsw.Connection.set_wal_hook``, the hook SQLite's own
autocheckpoint uses): a commit past ``soft`` pages only wakes the thread, which
runs a PASSIVE checkpoint on a connection of its own (in WAL mode it copies while
the writer goes on appending; the next write restarts the WAL from its start once
every frame is copied and no reader needs them). Past ``hard`` pages (the thread
stalled, or cannot keep up) the commit checkpoints in line as before, so the WAL
never grows without bound. In a steady stream of writes the thread's passes copy
most frames but never the newest, so the WAL starts over only at ``hard``, whose
in-line pass then copies what is left; with pauses between writes (a host's
requests) the thread's pass copies everything and the next write starts it over.

Other connections (the read pool never writes; a maintenance child, another
process) keep SQLite's default.

Tested in tests/brain/store/test_checkpoints.py.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Final

import apsw

from brain.store.connection import Store

HARD_FACTOR: Final = 4
"""``hard`` is this many times ``soft`` (16 MB of WAL at SQLite's default 1,000 pages)."""


class Checkpoints:
    """Background checkpoints of one database's WAL, off its writer's commits. Thread-safe."""

    def __init__(self, opener: Callable[[], Store], soft: int, hard: int | None = None) -> None:
        """``opener``: a second connection to the database (the thread's own);
        ``soft``: WAL pages past which a commit wakes the thread; ``hard``: past which
        the commit checkpoints in line (default ``HARD_FACTOR x soft``)."""
        self._opener = opener
        self.enabled = soft > 0
        """False for ``soft`` 0 (``wal_autocheckpoint`` off): nothing is installed then."""
        self.soft = max(1, soft)
        self.hard = max(self.soft, hard if hard is not None else HARD_FACTOR * self.soft)
        self._cond = threading.Condition()
        self._running = threading.RLock()
        """Held by the thread while it checkpoints (``paused``)."""
        self._wanted = False
        self._stopped = False
        self._generation = 0  # bumped by ``reset``: the thread's connection is then stale
        self._thread: threading.Thread | None = None
        self.done = 0
        """Checkpoints the thread ran (a test and bench hook)."""
        self.inline = 0
        """Checkpoints run in a commit, past ``hard`` (a test and bench hook)."""

    def install(self, store: Store) -> None:
        """Take over the checkpoints of ``store``'s commits (the engine's write connection)."""
        store.conn.set_wal_hook(self._hook)

    def _hook(self, conn: apsw.Connection, name: str, pages: int) -> int:
        """After every commit of the write connection (SQLite's WAL hook): ``pages`` in the WAL."""
        if pages >= self.hard:
            self.inline += 1
            # After the thread's pass, if one runs: run beside it, this one would find the
            # checkpoint lock taken and copy nothing, and in a steady stream of writes the
            # WAL would never start over.
            with self._running, contextlib.suppress(apsw.BusyError):
                conn.wal_checkpoint(name, apsw.SQLITE_CHECKPOINT_PASSIVE)
        elif pages >= self.soft:
            self._wake()
        return apsw.SQLITE_OK

    def _wake(self) -> None:
        with self._cond:
            if self._stopped:
                return
            self._wanted = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="brain-checkpoints", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        """The thread: a PASSIVE checkpoint per wake, on a connection of its own."""
        store: Store | None = None
        opened_in = -1
        try:
            while True:
                with self._cond:
                    while not self._wanted and not self._stopped:
                        self._cond.wait()
                    if self._stopped:
                        return
                    self._wanted = False
                    generation = self._generation
                try:
                    if store is None or opened_in != generation:
                        _close(store)
                        store, opened_in = self._opener(), generation
                    with self._running:
                        store.checkpoint()
                    self.done += 1
                except Exception:  # busy, or the file lost: the next wake tries again
                    _close(store)
                    store = None
        finally:
            _close(store)

    def paused(self) -> contextlib.AbstractContextManager[object]:
        """Inside, the thread runs no checkpoint: a checkpoint of the caller's own (``save``)
        would otherwise find SQLite's checkpoint lock taken and fail busy. Take it after
        the engine's write lock, never before (a commit's in-line pass takes them in
        that order)."""
        return self._running

    def reset(self) -> None:
        """The database was reopened: the thread's next checkpoint opens a new connection."""
        with self._cond:
            self._generation += 1

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread, letting a running checkpoint finish; it closes its connection."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)


def _close(store: Store | None) -> None:
    if store is not None:
        with contextlib.suppress(Exception):
            store.close()
