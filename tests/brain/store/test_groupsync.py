"""Group commit (``brain.store.groupsync``): writers that arrive while a WAL fsync runs
share the next one, and a write returns (or, deferred, is made durable) only after an
fsync that began after its commit."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain import Brain, BrainConfig, MessageIn
from brain.store.groupsync import GroupSync, deferring

WAIT_S = 60.0  # generous: only reached when the behaviour under test is missing


class GatedFsync:
    """``os.fsync`` that blocks until released, counting calls (the real one runs after)."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.gate = threading.Event()
        self.calls = 0
        self._real = os.fsync

    def __call__(self, fd: int) -> None:
        self.calls += 1
        self.entered.release()
        assert self.gate.wait(WAIT_S)
        self._real(fd)


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedFsync]:
    fsync = GatedFsync()
    monkeypatch.setattr(os, "fsync", fsync)
    yield fsync
    fsync.gate.set()


def test_writers_arriving_during_an_fsync_share_the_next_one(
    tmp_path: Path, gated: GatedFsync
) -> None:
    wal = tmp_path / "db-wal"
    wal.write_bytes(b"frames")
    group = GroupSync(wal)
    first = threading.Thread(target=group.wait)
    first.start()
    assert gated.entered.acquire(timeout=WAIT_S)  # the first fsync runs (held)
    later = [threading.Thread(target=group.wait) for _ in range(5)]
    for thread in later:
        thread.start()
    while group.waiting < 1 + len(later):  # every writer waits before the fsync ends
        time.sleep(0.001)
    gated.gate.set()
    for thread in [first, *later]:
        thread.join(WAIT_S)
        assert not thread.is_alive()
    # Five writers committed while the first fsync ran: one more fsync covers them all.
    assert gated.calls == 2
    assert group.syncs == 2


def test_a_waiter_never_returns_on_an_fsync_that_began_before_it(
    tmp_path: Path, gated: GatedFsync
) -> None:
    wal = tmp_path / "db-wal"
    wal.write_bytes(b"frames")
    group = GroupSync(wal)
    first = threading.Thread(target=group.wait)
    first.start()
    assert gated.entered.acquire(timeout=WAIT_S)
    second_done = threading.Event()

    def second() -> None:
        group.wait()
        second_done.set()

    waiter = threading.Thread(target=second)
    waiter.start()
    while group.waiting < 2:  # it waits while the first fsync still runs
        time.sleep(0.001)
    gated.gate.set()
    first.join(WAIT_S)
    waiter.join(WAIT_S)
    assert second_done.is_set()
    assert gated.calls == 2  # its own fsync, begun after the first finished


def test_a_missing_wal_has_nothing_to_make_durable(tmp_path: Path) -> None:
    group = GroupSync(tmp_path / "gone-wal")
    group.wait()
    assert group.syncs == 0


@pytest.fixture
def grouped(db_path: Path) -> Iterator[Brain]:
    engine = Brain(db_path, BrainConfig(group_commit=True))
    try:
        yield engine
    finally:
        engine.close()


def _message(i: int) -> MessageIn:
    return MessageIn("user", f"message {i}", client_id=f"m{i}")


def test_with_group_commit_the_write_connection_commits_unsynced_and_each_write_waits_for_an_fsync(
    grouped: Brain,
) -> None:
    assert grouped.group_commit
    assert grouped.store.scalar("PRAGMA synchronous") == 1  # NORMAL
    group = grouped._access.group
    assert group is not None
    before = group.syncs
    grouped.ingest("s", [_message(0)])
    assert group.syncs == before + 1
    grouped.info()  # a read: no fsync
    assert group.syncs == before + 1


def test_inside_deferring_a_write_leaves_its_fsync_to_durable(grouped: Brain) -> None:
    group = grouped._access.group
    assert group is not None
    before = group.syncs
    with deferring() as pending:
        grouped.ingest("s", [_message(0)])
        grouped.ingest("s", [_message(1)])
    assert pending.needed
    assert group.syncs == before
    grouped.durable()
    assert group.syncs == before + 1


def test_group_commit_is_off_by_default_and_at_synchronous_normal(db_path: Path) -> None:
    for config in (BrainConfig(), BrainConfig(group_commit=True, synchronous="NORMAL")):
        engine = Brain(db_path, config)
        try:
            assert not engine.group_commit
            with deferring() as pending:
                engine.ingest("s", [_message(len(str(config)))])
            assert not pending.needed
        finally:
            engine.close()
