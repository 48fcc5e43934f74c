"""How the engine's layers reach one database: the write connection behind a lock, a
pool of read connections, and second connections for long work.

An apsw connection must not be used by two threads at once, so the write connection
is only used under ``lock``. Reads go to pooled connections of their own
(``brain.store.readpool``), so they never wait for a write (a compaction's, a
bootstrap's, a sync's). Each layer's service (``brain.lcm.service``,
``brain.graph.service``, ...) is given one ``Access`` and reads with ``reading()``,
writes with ``write()`` or ``locked()``, and never holds the ``Brain``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from brain.config import BrainConfig
from brain.errors import DatabaseFileLost, DatabaseMissing, StorageError
from brain.store.checkpoints import Checkpoints
from brain.store.connection import Store, open_store
from brain.store.groupsync import GroupSync, deferred
from brain.store.readpool import ReadPool

T = TypeVar("T")


class Access:
    """One database's connections: the write one (under ``lock``), the read pool, and
    second connections. Thread-safe."""

    def __init__(self, store: Store, config: BrainConfig) -> None:
        """``store``: the write connection, already open; ``config``: its settings
        (``read_connections``: the pool's size, 0 for none)."""
        self.config = config
        self.lock = threading.RLock()
        """Held while the write connection is in use (re-entrant: a write may read)."""
        self._store = store
        self.path: Path = store.path
        self.group: GroupSync | None = None
        """Shared WAL fsyncs when ``config.group_commit`` (and ``synchronous`` is not
        already NORMAL or OFF): the write connection then commits at NORMAL and every
        lease that changed rows ends with ``group.wait()``."""
        if config.group_commit and config.synchronous in ("FULL", "EXTRA"):
            self.group = GroupSync(self.path.with_name(self.path.name + "-wal"))
            _commit_unsynced(store)
        self.checkpoints = Checkpoints(
            self.open_second, soft=int(store.scalar("PRAGMA wal_autocheckpoint"))
        )
        """The write connection's WAL checkpoints, in a thread of their own (none
        when ``wal_autocheckpoint`` is 0: then nothing checkpoints by itself)."""
        if self.checkpoints.enabled:
            self.checkpoints.install(store)
        self._readers = (
            ReadPool(self.open_second, config.read_connections)
            if config.read_connections > 0
            else None
        )

    @property
    def store(self) -> Store:
        """The write connection (use it only under ``lock``)."""
        return self._store

    @contextlib.contextmanager
    def locked(self) -> Iterator[Store]:
        """The write connection, lent under the lock (a ``StoreLease``).

        With group commit, a lease that changed rows returns only once they are
        durable: after the lock is released, so the next writer commits meanwhile
        and shares the fsync. Inside ``deferring()`` the wait is the caller's.
        """
        if self.group is None:
            with self.lock:
                yield self._store
            return
        try:
            with self.lock:
                store = self._store
                before = _changes(store)
                yield store
                changed = _changes(store) != before
        except BaseException:
            self._durable()  # whatever it committed before failing is durable too
            raise
        if changed:
            self._durable()

    def _durable(self) -> None:
        """Wait for a shared fsync, or leave it to a caller that is ``deferring()``."""
        assert self.group is not None
        pending = deferred()
        if pending is not None:
            pending.needed = True
        else:
            self.group.wait()

    def write(self, work: Callable[[Store], T], /) -> T:
        """Run ``work`` on the write connection under the lock (a ``WritePath``)."""
        with self.locked() as store:
            return work(store)

    def write_unsynced(self, work: Callable[[Store], T], /) -> T:
        """``write`` whose commit waits for no fsync of its own (a ``WritePath``).

        For records a power cut may lose without harm (a query's trace): committed at
        ``synchronous=NORMAL``, the frames are in the WAL file at once, so a killed
        process loses nothing; only an OS crash or power cut can lose them, and then
        only with every commit after them (the WAL is appended in order, and the next
        durable commit's fsync covers every frame before it). With group commit the
        lease skips the shared fsync wait for the same reason.
        """
        with self.lock:
            return self._unsynced(work)

    def try_write_unsynced(self, work: Callable[[Store], T], /) -> T | None:
        """``write_unsynced`` when the lock is free at once; None (``work`` not run) when
        another write holds it. For a mark a request may leave to a later request rather
        than wait behind a long write (a compaction pass committing)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            return self._unsynced(work)
        finally:
            self.lock.release()

    def _unsynced(self, work: Callable[[Store], T]) -> T:
        store = self._store
        if self.group is not None or self.config.synchronous not in ("FULL", "EXTRA"):
            return work(store)  # commits at NORMAL (or less) already
        store.execute("PRAGMA synchronous = NORMAL")
        try:
            return work(store)
        finally:
            store.execute(f"PRAGMA synchronous = {self.config.synchronous}")

    @contextlib.contextmanager
    def reading(self) -> Iterator[Store]:
        """A store to read on: a pooled connection inside one read transaction.

        Its snapshot is one committed state, whatever the write connection is doing.
        Without a pool, or when no second connection can be opened (the file was
        moved or deleted: the connection opened before keeps serving reads), the
        read takes the write connection under the lock, as every read once did.
        """
        loan = None
        if self._readers is not None and not self._store.lost:
            with contextlib.suppress(StorageError, RuntimeError):
                loan = self._readers.read()
        if loan is None:
            with self.lock:
                yield self._store
            return
        with loan as store:
            yield store

    def reading_now(self) -> contextlib.AbstractContextManager[Store] | None:
        """``reading()`` on an idle pooled connection, or None when that would wait.

        None without a pool, with none of its connections idle (each is opened by
        a first ``reading()``), or once the file is lost: then ``reading()`` would
        take the lock or open a connection, which a caller that must not block
        leaves to a thread.
        """
        if self._readers is None or self._store.lost:
            return None
        return self._readers.read_idle()

    @contextlib.contextmanager
    def side(self) -> Iterator[Store]:
        """A second connection to this database for long work done without the lock.

        Work that reads the whole graph cannot share the write connection without
        holding the lock throughout; its own connection reads beside it (WAL lets
        readers and one writer go on together), and its writes are ordinary short
        transactions.
        """
        store = self.open_second()
        try:
            yield store
        finally:
            store.close()

    def open_second(self) -> Store:
        """Another connection to the file opened first (``DatabaseFileLost`` if gone)."""
        try:
            store = open_store(self.path, self.config, create=False)
        except DatabaseMissing:
            raise DatabaseFileLost() from None
        if store.identity != self._store.identity:  # another file now: never work on it
            store.close()
            raise DatabaseFileLost()
        return store

    def swap(self, store: Store) -> None:
        """Serve from ``store`` from now on (a reload); the old write connection is closed
        and every read connection retired. The caller holds the lock."""
        if self.group is not None:
            _commit_unsynced(store)
        old, self._store = self._store, store
        if self.checkpoints.enabled:
            self.checkpoints.install(store)
        self.checkpoints.reset()  # its connection read the file opened before
        with contextlib.suppress(Exception):
            old.close()
        if self._readers is not None:
            self._readers.reset()  # they read the file opened before

    def close(self) -> None:
        """Refresh planner statistics, checkpoint and close every connection.

        If the file was moved, replaced or deleted meanwhile, every frame of the WAL
        goes into the file this process opened (where acknowledged writes belong) and
        the WAL file, still at the old path, is emptied: SQLite does not remove it for
        a moved database, and whatever database is opened at that path next would
        otherwise read this one's pages from it.
        """
        self.checkpoints.close()
        if self._readers is not None:
            self._readers.close()
        with self.lock:
            with contextlib.suppress(Exception):
                if self._store.at_path():
                    # SQLite's advice: run optimize before closing a long-lived connection.
                    self._store.optimize()
                    self._store.checkpoint()
                else:
                    self._store.checkpoint(truncate=True)
            self._store.close()


def _commit_unsynced(store: Store) -> None:
    """The write connection's commits skip their fsync: ``GroupSync`` makes them durable."""
    store.execute("PRAGMA synchronous = NORMAL")


def _changes(store: Store) -> int:
    """Rows the connection has changed since it opened (-1 once it is closed)."""
    try:
        return int(store.conn.total_changes())
    except Exception:  # closed by a reload meanwhile: count it as changed
        return -1
