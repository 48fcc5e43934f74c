"""brain.store.access: the write connection behind a lock, reads beside it, second connections."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain import BrainConfig, DatabaseFileLost, open_store
from brain.store.access import Access
from brain.store.connection import Store

WAIT_S = 60.0  # generous: only reached when the behaviour under test is missing


@pytest.fixture
def access(db_path: Path) -> Iterator[Access]:
    """Access to a new database file with a read pool of two connections."""
    opened = Access(open_store(db_path, BrainConfig()), BrainConfig(read_connections=2))
    try:
        yield opened
    finally:
        opened.close()


def _holding_the_lock(access: Access) -> tuple[threading.Event, threading.Event]:
    """Another thread takes the write lock and keeps it until the second event is set."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with access.lock:
            held.set()
            release.wait(WAIT_S)

    threading.Thread(target=hold, daemon=True).start()
    assert held.wait(WAIT_S)
    return held, release


def _lock_is_free_elsewhere(access: Access) -> bool:
    """Whether another thread could take the write lock now."""
    free: list[bool] = []

    def attempt() -> None:
        taken = access.lock.acquire(blocking=False)
        if taken:
            access.lock.release()
        free.append(taken)

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join(WAIT_S)
    return free == [True]


def test_a_read_is_answered_while_another_thread_holds_the_write_lock(access: Access) -> None:
    _, release = _holding_the_lock(access)
    try:
        with access.reading() as store:
            assert store is not access.store
            assert store.scalar("SELECT count(*) FROM sqlite_master") > 0
    finally:
        release.set()


def test_without_a_read_pool_a_read_takes_the_write_connection_under_the_lock(
    db_path: Path,
) -> None:
    access = Access(open_store(db_path, BrainConfig()), BrainConfig(read_connections=0))
    try:
        with access.reading() as store:
            assert store is access.store
            assert not _lock_is_free_elsewhere(access)
        assert _lock_is_free_elsewhere(access)
    finally:
        access.close()


def test_a_read_after_the_file_was_moved_falls_back_to_the_connection_opened_first(
    access: Access, db_path: Path
) -> None:
    db_path.rename(db_path.with_name("moved.db"))
    assert not access.store.at_path()
    with access.reading() as store:
        assert store is access.store
        assert store.scalar("SELECT count(*) FROM sqlite_master") > 0


def test_a_write_runs_on_the_write_connection_holding_the_lock(access: Access) -> None:
    def work(store: Store) -> bool:
        assert store is access.store
        return _lock_is_free_elsewhere(access)

    assert access.write(work) is False
    with access.locked() as store:
        assert store is access.store
        assert not _lock_is_free_elsewhere(access)
    assert _lock_is_free_elsewhere(access)


def test_a_side_connection_is_its_own_and_is_closed_after(access: Access) -> None:
    with access.side() as side:
        assert side is not access.store
        assert side.identity == access.store.identity
        side.execute("INSERT INTO meta (key, value) VALUES ('side', 'written')")
    with access.reading() as store:
        assert store.scalar("SELECT value FROM meta WHERE key = 'side'") == "written"
    with pytest.raises(Exception, match="closed"):
        side.scalar("SELECT 1")


def test_a_second_connection_to_another_file_at_the_path_is_refused(
    access: Access, db_path: Path
) -> None:
    moved = db_path.rename(db_path.with_name("moved.db"))
    shutil.copyfile(moved, db_path)  # a copy restored at the path: another file
    with pytest.raises(DatabaseFileLost):
        access.open_second()


def test_a_second_connection_to_a_deleted_file_is_refused(access: Access, db_path: Path) -> None:
    db_path.unlink()
    with pytest.raises(DatabaseFileLost):
        access.open_second()


def test_after_a_swap_reads_and_writes_go_to_the_new_connection(
    access: Access, db_path: Path
) -> None:
    with access.reading() as store:  # a pooled connection of the file opened first
        assert store.scalar("SELECT count(*) FROM meta WHERE key = 'new'") == 0
    old = access.store
    with access.lock:
        access.swap(open_store(db_path, BrainConfig()))
    assert access.store is not old
    with pytest.raises(Exception, match="closed"):
        old.scalar("SELECT 1")
    access.write(lambda s: s.execute("INSERT INTO meta (key, value) VALUES ('new', '1')"))
    with access.reading() as store:
        assert store.scalar("SELECT value FROM meta WHERE key = 'new'") == "1"


def test_closing_twice_is_harmless(access: Access) -> None:
    access.close()
    access.close()


def test_write_unsynced_commits_at_normal_and_puts_the_configured_level_back(
    access: Access,
) -> None:
    def level(store: Store) -> int:
        with store.transaction():
            store.execute("CREATE TABLE IF NOT EXISTS t (x)")
            store.execute("INSERT INTO t VALUES (1)")
        return int(store.scalar("PRAGMA synchronous"))

    assert access.write_unsynced(level) == 1  # NORMAL: no fsync at the commit
    assert access.write(level) == 2  # FULL again for every other write
    with access.reading() as store:
        assert store.scalar("SELECT count(*) FROM t") == 2
