"""The SQLite store: one ``open_store()``, named connection setup steps, one
nestable transaction primitive.

Every connection the engine opens goes through ``open_store`` so that every
connection gets the same setup (apsw's ``bestpractice`` idea, applied per
connection rather than through global hooks). A ``Store`` is not safe for
concurrent use from several threads; the engine (``brain.engine``) serialises
access to it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import apsw

from brain.config import BrainConfig
from brain.errors import DatabaseFileLost, DatabaseMissing, StorageError, StoreBusy
from brain.store import bm25
from brain.store.schema import migrate
from brain.store.waiting import Waiting

Tracer = Callable[[str, Any], None]
"""Called with (sql, bindings) for every statement the store executes."""

SetupStep = Callable[[apsw.Connection, BrainConfig], None]

StoreLease = Callable[[], contextlib.AbstractContextManager["Store"]]
"""Lends the store for a while (under the engine's lock): work that runs outside
the lock (compaction, bootstrap) takes it for each step."""

_WAL_SIZE_LIMIT: Final = 4 * 1024 * 1024


def _busy_timeout(conn: apsw.Connection, config: BrainConfig) -> None:
    # A bounded wait for another process's write lock instead of an instant
    # "database is locked".
    conn.set_busy_timeout(config.busy_timeout_ms)


def _auto_vacuum(conn: apsw.Connection, config: BrainConfig) -> None:
    # A new database keeps a map of its pages so a retention pass can hand freed
    # pages back to the file system in small steps (``PRAGMA incremental_vacuum``).
    # It can only be chosen before the first page is written (before WAL, whose
    # switch writes the header); an older file switches with one VACUUM
    # (``brain doctor --repair``, the ``vacuum`` check).
    row = conn.execute("PRAGMA page_count").fetchone()
    if row is not None and int(row[0]) == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")


def _wal(conn: apsw.Connection, config: BrainConfig) -> None:
    # WAL lets readers in other processes proceed while we write, and makes a
    # commit a single append. Changing journal mode silently commits, which is
    # why it happens here, before anything else runs on the connection.
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        raise StorageError(f"could not enable WAL journal mode (got {mode!r})")


def _synchronous(conn: apsw.Connection, config: BrainConfig) -> None:
    conn.execute(f"PRAGMA synchronous = {config.synchronous}")


def _foreign_keys(conn: apsw.Connection, config: BrainConfig) -> None:
    conn.execute("PRAGMA foreign_keys = ON")


def _no_double_quoted_strings(conn: apsw.Connection, config: BrainConfig) -> None:
    # "x" must mean an identifier; a typo'd column name should fail loudly.
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)


def _sqlite_vec(conn: apsw.Connection, config: BrainConfig) -> None:
    conn.enable_load_extension(True)
    conn.load_extension(_vec_extension_path())
    conn.enable_load_extension(False)


def _fts_functions(conn: apsw.Connection, config: BrainConfig) -> None:
    # Full-text ranking with document frequencies the search already has (see
    # brain.store.bm25): FTS5's bm25() would count them again over the whole table.
    bm25.register(conn)


def _journal_size_limit(conn: apsw.Connection, config: BrainConfig) -> None:
    # A checkpoint leaves the WAL file at its high-water mark; cap what stays on disk.
    conn.execute(f"PRAGMA journal_size_limit = {_WAL_SIZE_LIMIT}")


@functools.cache
def _vec_extension_path() -> str:
    """Where the sqlite-vec package keeps its loadable library.

    Found without importing the package: its ``__init__`` imports numpy for
    helpers we do not use, which would cost ~45 ms at every start-up.
    """
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:
        raise StorageError("the sqlite-vec package is not installed")
    return str(Path(spec.origin).parent / "vec0")


SETUP_STEPS: Final[tuple[tuple[str, SetupStep], ...]] = (
    ("busy_timeout", _busy_timeout),
    ("auto_vacuum", _auto_vacuum),
    ("wal", _wal),
    ("synchronous", _synchronous),
    ("foreign_keys", _foreign_keys),
    ("no_double_quoted_strings", _no_double_quoted_strings),
    ("journal_size_limit", _journal_size_limit),
    ("sqlite_vec", _sqlite_vec),
    ("fts_functions", _fts_functions),
)
"""Applied in order to every connection ``open_store`` makes."""


@dataclass
class Transaction:
    """Handle for the innermost open transaction level.

    ``on_rollback`` registers an undo for work outside the database (a payload
    file written for a row that is then rolled back).
    """

    _undo: list[Callable[[], None]] = field(default_factory=list)

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` if this level (or an enclosing one) rolls back."""
        self._undo.append(undo)


class Store:
    """An open database plus its files directory.

    The store remembers which file it opened (device and inode). Every write
    transaction checks, just before it commits, that the path still names that
    file: once it does not (moved, replaced or deleted underneath the process)
    the store is *lost* and every later write raises
    :class:`~brain.errors.DatabaseFileLost` before it starts. Reads go on: they
    read the file this process opened, which is still consistent.
    """

    def __init__(self, conn: apsw.Connection, path: Path, config: BrainConfig) -> None:
        self.conn = conn
        self.path = path
        self.config = config
        self.files_dir = files_dir_for(path)
        self._levels: list[Transaction] = []
        self._tracer: Tracer | None = None
        self._identity = _file_identity(path)
        self.lost = False
        """True once the path stopped naming the opened file (sticky)."""
        self.waiting = Waiting(path, config.busy_timeout_ms)
        """This connection's side of ``<db>-waiting``: it says when it waits for the
        write lock (its busy handler), and a long writer hears who else does."""
        conn.set_busy_handler(self.waiting.busy)

    # -- statements ---------------------------------------------------------

    def execute(self, sql: str, bindings: Any = None) -> apsw.Cursor:
        """Run one statement with bindings; translate lock timeouts."""
        try:
            return self.conn.execute(sql, bindings)
        except apsw.BusyError as exc:
            raise StoreBusy("database stayed locked by another process") from exc
        finally:
            if self.waiting.flagged:  # it waited: the lock is taken (or given up on)
                self.waiting.done()

    def one(self, sql: str, bindings: Any = None) -> tuple[Any, ...] | None:
        """Return the first row of a statement, or None (the statement is finished either way,
        so an ``UPDATE ... RETURNING`` never stays pending into a commit)."""
        cursor = self.execute(sql, bindings)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return None if row is None else tuple(row)

    def scalar(self, sql: str, bindings: Any = None) -> Any:
        """Return the first column of the first row (None when there is no row)."""
        row = self.one(sql, bindings)
        return None if row is None else row[0]

    def executemany(self, sql: str, rows: Iterable[Any]) -> apsw.Cursor:
        """Run one statement once per bindings in ``rows``; translate lock timeouts."""
        try:
            return self.conn.executemany(sql, rows)
        except apsw.BusyError as exc:
            raise StoreBusy("database stayed locked by another process") from exc
        finally:
            if self.waiting.flagged:
                self.waiting.done()

    def last_rowid(self) -> int:
        """The rowid of the last row this connection inserted."""
        return int(self.conn.last_insert_rowid())

    def changes(self) -> int:
        """Rows changed by the last INSERT, UPDATE or DELETE on this connection."""
        return int(self.conn.changes())

    def total_changes(self) -> int:
        """Rows changed on this connection since it opened (differences count a batch)."""
        return int(self.conn.total_changes())

    def set_tracer(self, tracer: Tracer | None) -> None:
        """Call ``tracer(sql, bindings)`` for every statement (None removes it)."""
        self._tracer = tracer
        if tracer is None:
            self.conn.exec_trace = None
            return

        def trace(_cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            tracer(sql, bindings)
            return True

        self.conn.exec_trace = trace

    # -- the file -------------------------------------------------------------

    @property
    def identity(self) -> tuple[int, int]:
        """(device, inode) of the file this store opened."""
        return self._identity

    def at_path(self) -> bool:
        """Whether the path still names the file this store opened (one ``stat``).

        A file that is gone, or another file (another inode or device) at the
        path, makes the store lost for good: a write acknowledged into the old
        file would be missing from the database everyone else opens.
        """
        if not self.lost:
            try:
                self.lost = _file_identity(self.path) != self._identity
            except (FileNotFoundError, NotADirectoryError):
                self.lost = True
        return not self.lost

    def check_file(self) -> None:
        """Raise :class:`DatabaseFileLost` unless the path still names the opened file.

        About a microsecond; run before every outermost commit.
        """
        if not self.at_path():
            raise DatabaseFileLost()

    # -- transactions -------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Open a transaction, or a savepoint inside an open one.

        The outermost level is ``BEGIN IMMEDIATE``: it takes the write lock up
        front (waiting up to the busy timeout) instead of upgrading a read
        lock later, which in WAL mode can fail at once with "database is
        locked" whatever the timeout. Leaving the block normally commits;
        an exception rolls back this level only and runs its undo hooks.
        """
        level = Transaction()
        outermost = not self._levels
        if outermost and self.lost:
            raise DatabaseFileLost()
        savepoint = f"sp{len(self._levels)}"
        self.execute("BEGIN IMMEDIATE" if outermost else f"SAVEPOINT {savepoint}")
        self._levels.append(level)
        try:
            yield level
        except BaseException:
            self._levels.pop()
            try:
                # SQLite may already have rolled the whole transaction back by
                # itself (disk full, I/O error): then there is nothing to undo
                # here, and the original error must surface, not "no such savepoint".
                if self.conn.in_transaction:
                    if outermost:
                        self.conn.execute("ROLLBACK")
                    else:
                        self.conn.execute(f"ROLLBACK TO {savepoint}")
                        self.conn.execute(f"RELEASE {savepoint}")
            finally:
                for undo in reversed(level._undo):
                    with contextlib.suppress(Exception):
                        undo()
            raise
        self._levels.pop()
        if outermost:
            try:
                self.check_file()
                self.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                for undo in reversed(level._undo):
                    with contextlib.suppress(Exception):
                        undo()
                raise
        else:
            self.execute(f"RELEASE {savepoint}")
            self._levels[-1]._undo.extend(level._undo)

    # -- maintenance --------------------------------------------------------

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes when another connection commits."""
        return int(self.scalar("PRAGMA data_version"))

    def checkpoint(self, *, truncate: bool = False) -> tuple[int, int]:
        """Passive WAL checkpoint; return (frames in WAL, frames checkpointed).

        ``truncate``: wait for readers, copy every frame and empty the WAL file.
        """
        mode = apsw.SQLITE_CHECKPOINT_TRUNCATE if truncate else apsw.SQLITE_CHECKPOINT_PASSIVE
        try:
            log, done = self.conn.wal_checkpoint(mode=mode)
        except apsw.BusyError as exc:
            raise StoreBusy("checkpoint blocked by another process") from exc
        finally:
            if self.waiting.flagged:  # a truncating checkpoint waits in the busy handler
                self.waiting.done()
        return int(log), int(done)

    def probe(self) -> None:
        """The cheapest read that needs the file: one page of ``meta``."""
        self.scalar("SELECT count(*) FROM (SELECT 1 FROM meta LIMIT 1)")

    def optimize(self) -> None:
        """Refresh the planner's statistics (SQLite's advice before closing a long-lived
        connection)."""
        self.execute("PRAGMA optimize")

    def schema_version(self) -> int:
        """The database's ``PRAGMA user_version``."""
        return int(self.scalar("PRAGMA user_version"))

    def close(self) -> None:
        """Close the connection (safe to call twice)."""
        self.conn.close()
        self.waiting.close()


def _set_up(conn: apsw.Connection, config: BrainConfig) -> None:
    """Apply the setup steps and migrations, retrying while another process holds a lock.

    Some of it cannot use the busy handler: switching a new database to WAL,
    or opening while another connection is creating or recovering the WAL,
    answers "busy" at once. Every step is idempotent, so the whole setup is
    retried with a short backoff until the busy timeout has passed.
    """
    deadline = time.monotonic() + config.busy_timeout_ms / 1000
    pause = 0.005
    while True:
        try:
            for _name, step in SETUP_STEPS:
                step(conn, config)
            migrate(conn)
            return
        except apsw.BusyError:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.1)


def files_dir_for(db_path: Path) -> Path:
    """The payload files directory beside a database: ``<db>-files``."""
    return db_path.with_name(db_path.name + "-files")


def _file_identity(path: Path) -> tuple[int, int]:
    """(device, inode) of the file at ``path``: what a move or replacement changes."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _connect(db_path: Path, create: bool) -> apsw.Connection:
    """Open the database file; create it only when ``create`` and it never existed.

    An existing file is opened without SQLite's create flag, so a file that
    vanishes between a check and the open is an error rather than a new empty
    database. A missing file whose files directory remains had a database
    (moved or deleted since): it is not created again, even with ``create``.
    The database file is created before its files directory, so a concurrent
    first start never sees the directory without the file.
    """
    try:
        return apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.CantOpenError:
        if db_path.exists():
            # Another process's first start created it just after our open failed;
            # if it is there but unreadable, this open raises what is wrong.
            return apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE)
        if not create:
            raise DatabaseMissing(
                f"database {db_path.name} does not exist (this command never creates one; "
                "`brain serve --db PATH` does at its first start)"
            ) from None
    if files_dir_for(db_path).exists():
        try:  # another process may have created both just now
            return apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE)
        except apsw.CantOpenError:
            raise DatabaseMissing(
                f"database {db_path.name} does not exist but its files directory "
                f"{files_dir_for(db_path).name}/ does: the database was moved or deleted. "
                "Put it back, or remove the files directory to start a new one"
            ) from None
    db_path.parent.mkdir(parents=True, exist_ok=True)
    return apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)


def open_store(
    path: str | os.PathLike[str], config: BrainConfig | None = None, *, create: bool = True
) -> Store:
    """Open the database at ``path``, set it up, migrate it.

    With ``create`` a database that never existed at ``path`` is created (with
    its parent directory); without it a missing file raises
    :class:`~brain.errors.DatabaseMissing` and nothing is created. Even with
    ``create``, a missing file whose files directory remains is refused: that
    database was moved or deleted, and a new empty one would hide it. Applies
    ``SETUP_STEPS`` in order, then runs pending schema migrations in one
    transaction. Creates the files directory.
    """
    config = config or BrainConfig()
    db_path = Path(path).expanduser().absolute()
    try:
        conn = _connect(db_path, create)
    except DatabaseMissing:
        raise
    except (OSError, apsw.Error) as exc:
        raise StorageError(f"cannot open database {db_path}: {exc}") from exc
    try:
        files_dir_for(db_path).mkdir(exist_ok=True)
    except OSError as exc:
        conn.close()
        raise StorageError(f"cannot open database {db_path}: {exc}") from exc
    try:
        _set_up(conn, config)
    except apsw.BusyError as exc:
        conn.close()
        raise StoreBusy(f"database {db_path} stayed locked during setup") from exc
    except apsw.Error as exc:
        conn.close()
        raise StorageError(f"cannot set up database {db_path}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
    try:
        store = Store(conn, db_path, config)
    except OSError as exc:  # gone again since it was opened
        conn.close()
        raise StorageError(f"cannot open database {db_path}: {exc}") from exc
    return store
