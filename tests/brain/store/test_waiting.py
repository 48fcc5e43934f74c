"""Who waits for the write lock: the busy handler says so, a long writer hears it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from brain import BrainConfig, Store, open_store
from brain.errors import StoreBusy
from brain.store.waiting import waiting_path

_DEADLINE_S = 10.0


def _until(check: object, what: str) -> None:
    """Poll ``check()`` until true (the other thread's progress, not a timing)."""
    deadline = time.monotonic() + _DEADLINE_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


def test_a_writer_waiting_for_the_lock_says_so_until_it_has_the_lock(
    store: Store, db_path: Path
) -> None:
    other = open_store(db_path, BrainConfig(busy_timeout_ms=int(_DEADLINE_S * 1000)))
    inside = threading.Event()
    release = threading.Event()

    def write() -> None:
        with other.transaction():
            other.execute("INSERT INTO meta (key, value) VALUES ('theirs', '1')")
            inside.set()
            release.wait(_DEADLINE_S)

    try:
        assert not store.waiting.anyone()
        with store.transaction():
            store.execute("INSERT INTO meta (key, value) VALUES ('mine', '1')")
            writer = threading.Thread(target=write)
            writer.start()
            _until(store.waiting.anyone, "the other writer never said it waits")
            assert not inside.is_set()
        _until(inside.is_set, "the other writer never got the lock")
        assert not store.waiting.anyone()  # it has the lock: nobody waits any more
        release.set()
        writer.join(_DEADLINE_S)
    finally:
        release.set()
        other.close()
    assert store.scalar("SELECT count(*) FROM meta WHERE key IN ('mine', 'theirs')") == 2


def test_a_writer_that_gave_up_waiting_no_longer_says_it_waits(store: Store, db_path: Path) -> None:
    other = open_store(db_path, BrainConfig(busy_timeout_ms=20))
    try:
        with store.transaction(), pytest.raises(StoreBusy), other.transaction():
            pass
        assert not other.waiting.flagged
        assert not store.waiting.anyone()
    finally:
        other.close()


def test_letting_writers_through_with_nobody_waiting_returns_at_once(store: Store) -> None:
    assert store.waiting.let_through() is False
    assert waiting_path(store.path).exists()  # made by the first check, never removed
    assert store.waiting.usable


def test_a_long_writer_holds_back_after_its_commit_until_the_waiting_writer_has_the_lock(
    store: Store, db_path: Path
) -> None:
    other = open_store(db_path, BrainConfig(busy_timeout_ms=int(_DEADLINE_S * 1000)))
    order: list[str] = []

    def write() -> None:
        with other.transaction():
            order.append("theirs")

    try:
        with store.transaction():
            writer = threading.Thread(target=write)
            writer.start()
            _until(store.waiting.anyone, "the other writer never said it waits")
            order.append("mine 1")
        assert store.waiting.let_through() is True
        with store.transaction():  # waits for theirs to commit
            order.append("mine 2")
        writer.join(_DEADLINE_S)
    finally:
        other.close()
    assert order == ["mine 1", "theirs", "mine 2"]


def test_a_directory_where_the_file_cannot_be_made_leaves_waits_unheard(
    tmp_path: Path,
) -> None:
    from brain.store.waiting import Waiting

    waiting = Waiting(tmp_path / "no-such-dir" / "x.db", 100)
    assert waiting.anyone() is False
    assert waiting.usable is False
    assert waiting.busy(0) is True  # still waits as SQLite would
    assert waiting.flagged is False
    waiting.close()


def test_a_waiter_that_never_takes_the_lock_holds_a_long_writer_back_once_not_every_commit(
    store: Store, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("brain.store.waiting.LET_THROUGH_MAX_S", 0.05)
    stuck = open_store(db_path)
    try:
        stuck.waiting.busy(0)  # said it waits, then stopped (a process frozen in its handler)
        assert stuck.waiting.flagged
        slept: list[float] = []
        real_sleep = time.sleep
        monkeypatch.setattr(
            "brain.store.waiting.time.sleep", lambda s: (slept.append(s), real_sleep(s))
        )
        assert store.waiting.let_through() is True  # held back until LET_THROUGH_MAX_S
        held = len(slept)
        assert held > 0
        for _ in range(5):
            assert store.waiting.let_through() is True  # heard, but not waited for again
        assert len(slept) == held
    finally:
        stuck.close()
    assert not store.waiting.anyone()  # closing released it


def test_a_truncating_checkpoint_that_waited_no_longer_says_it_waits(
    store: Store, db_path: Path
) -> None:
    other = open_store(db_path, BrainConfig(busy_timeout_ms=20))
    try:
        store.execute("INSERT INTO meta (key, value) VALUES ('k', 'v')")
        store.execute("BEGIN")
        store.scalar("SELECT count(*) FROM meta")  # a reader holds the WAL's frames
        try:
            with pytest.raises(StoreBusy):
                other.checkpoint(truncate=True)
        finally:
            store.execute("COMMIT")
        assert not other.waiting.flagged
        assert not store.waiting.anyone()
    finally:
        other.close()
