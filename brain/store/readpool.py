"""A small pool of read connections, so reads never wait behind the engine's writes.

SQLite in WAL mode lets any number of connections read while one writes: each
read transaction sees the database as of its first statement, whatever commits
meanwhile. The engine keeps one connection for writes (behind its lock) and lends
these for reads. A lent connection is inside a read transaction for the whole
loan, so a read made of several statements sees one committed state, never half
of a write. Each connection is ``query_only``: a write slipped onto the read path
fails loudly instead of taking the write lock behind the engine's back.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from brain.store.connection import Store

T = TypeVar("T")


class WritePath(Protocol):
    """Runs ``work`` on the write connection, under the engine's write lock.

    A read that has something small to write (``assemble`` remembering a new
    budget, ``query`` recording its trace) hands it over instead of writing on
    its read connection.
    """

    def __call__(self, work: Callable[[Store], T], /) -> T: ...


def on_store(store: Store) -> WritePath:
    """A write path that runs on ``store`` itself (one connection: callers outside the engine)."""

    def run(work: Callable[[Store], T], /) -> T:
        return work(store)

    return run


class ReadPool:
    """Up to ``size`` read connections opened with ``opener`` on first need.

    Thread-safe. ``read`` lends one connection inside a read transaction, opening
    another rather than lending the last idle one while fewer than ``size`` are open
    (that one is kept for ``read_idle``); a caller past ``size`` waits for one to come
    back (reads are short). ``reset``
    (the engine reopened its database) and ``close`` retire every connection:
    idle ones at once, lent ones when they come back.
    """

    def __init__(self, opener: Callable[[], Store], size: int) -> None:
        if size < 1:
            raise ValueError(f"a read pool needs at least one connection, got {size}")
        self._opener = opener
        self._size = size
        self._idle: list[Store] = []
        self._open = 0  # connections that exist: idle plus lent
        self._generation = 0  # bumped by reset: older connections are closed on return
        self._born: dict[int, int] = {}  # id(store) -> generation it was opened in
        self._closed = False
        self._cond = threading.Condition()

    def read(self) -> contextlib.AbstractContextManager[Store]:
        """Lend a connection inside a read transaction (its snapshot: the first statement's).

        The connection is taken (or opened) now, so a failure to open raises here,
        before the caller's ``with``.
        """
        return self._loan(self._take())

    def read_idle(self) -> contextlib.AbstractContextManager[Store] | None:
        """Lend an idle connection as ``read`` does, or None when none is idle.

        Never waits for a loan to come back and never opens a connection, so a
        caller that must not block (the daemon's event loop answering ``info``)
        can fall back to a thread instead.
        """
        with self._cond:
            if self._closed or not self._idle:
                return None
            store = self._idle.pop()
        return self._loan(store)

    @contextlib.contextmanager
    def _loan(self, store: Store) -> Iterator[Store]:
        try:
            store.execute("BEGIN")  # deferred: the snapshot is taken by the first read
        except BaseException:
            self._give_back(store, healthy=False)
            raise
        try:
            yield store
        finally:
            # An error in the read (NotFound, bad input) leaves the connection fine;
            # one that cannot even end its transaction is closed instead of lent again.
            healthy = True
            try:
                if store.conn.in_transaction:
                    store.conn.execute("ROLLBACK")  # nothing to keep: it only read
            except Exception:
                healthy = False
            self._give_back(store, healthy=healthy)

    def reset(self) -> None:
        """Retire every connection (the database was reopened): new reads open new ones."""
        with self._cond:
            self._generation += 1
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for store in idle:
            self._discard(store)

    def close(self) -> None:
        """Close idle connections and refuse new loans; lent ones close when they return."""
        with self._cond:
            self._closed = True
        self.reset()

    def _take(self) -> Store:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the read pool is closed")
                # The last idle connection is left for ``read_idle`` while another can
                # be opened: a background read (the embedding worker looking at the
                # entity and rollup queues) that took it made ``info`` miss it and wait
                # for a worker thread, behind every write (tests/e2e/test_cheap_requests.py
                # failed about 1 run in 20).
                if self._idle and (len(self._idle) > 1 or self._open >= self._size):
                    return self._idle.pop()
                if self._open < self._size:
                    self._open += 1
                    generation = self._generation
                    break
                self._cond.wait()
        try:
            store = self._opener()
            with contextlib.suppress(Exception):
                store.execute("PRAGMA query_only = ON")
        except BaseException:
            with self._cond:
                self._open -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._born[id(store)] = generation
        return store

    def _give_back(self, store: Store, *, healthy: bool) -> None:
        with self._cond:
            keep = healthy and not self._closed and self._born.get(id(store)) == self._generation
            if keep:
                self._idle.append(store)
            else:
                self._open -= 1
            self._cond.notify()
        if not keep:
            self._discard(store)

    def _discard(self, store: Store) -> None:
        with self._cond:
            self._born.pop(id(store), None)
        with contextlib.suppress(Exception):
            store.close()
