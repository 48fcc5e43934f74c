"""brain.store.checkpoints: the WAL is copied by a thread of its own, not in a writer's commit,
and stays bounded when that thread cannot run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain import Brain, BrainConfig, MessageIn, open_store
from brain.store.access import Access
from brain.store.checkpoints import Checkpoints
from brain.store.connection import Store

WAIT_S = 60.0  # generous: only reached when the behaviour under test is missing


@pytest.fixture
def access(db_path: Path) -> Iterator[Access]:
    config = BrainConfig(read_connections=1, synchronous="NORMAL")
    opened = Access(open_store(db_path, config), config)
    opened.store.execute("CREATE TABLE pad (x BLOB)")
    opened.store.checkpoint(truncate=True)  # the WAL file stays at its high-water mark
    try:
        yield opened
    finally:
        opened.close()


def _commit_pages(access: Access, commits: int, pages: int = 1) -> None:
    """``commits`` commits of about ``pages`` pages each."""
    for _ in range(commits):
        access.write(
            lambda s: s.executemany("INSERT INTO pad VALUES (randomblob(3000))", [()] * pages)
        )


def _wal_pages(access: Access) -> int:
    page = int(access.store.scalar("PRAGMA page_size"))
    wal = access.path.with_name(access.path.name + "-wal")
    return (wal.stat().st_size - 32) // (page + 24)


def _gated(access: Access, checkpoints: Checkpoints) -> None:
    checkpoints.install(access.store)
    access.checkpoints.close()
    access.checkpoints = checkpoints


def test_a_commit_past_the_soft_bound_leaves_the_checkpoint_to_the_thread(access: Access) -> None:
    gate = threading.Event()

    def opener() -> Store:
        gate.wait(WAIT_S)  # the thread is held here: nothing checkpoints meanwhile
        return access.open_second()

    checkpoints = Checkpoints(opener, soft=10, hard=1_000)
    _gated(access, checkpoints)
    _commit_pages(access, 40)
    # No commit checkpointed in line: the WAL holds every frame since the first.
    assert _wal_pages(access) >= 40
    assert checkpoints.inline == 0
    gate.set()
    deadline = time.monotonic() + WAIT_S
    while checkpoints.done == 0 and time.monotonic() < deadline:
        _commit_pages(access, 1)
        time.sleep(0.01)
    assert checkpoints.done >= 1


def test_the_wal_stays_within_the_hard_bound_when_the_thread_never_checkpoints(
    access: Access,
) -> None:
    never = threading.Event()

    def opener() -> Store:
        never.wait(WAIT_S)
        raise RuntimeError("never opened")

    checkpoints = Checkpoints(opener, soft=5, hard=20)
    _gated(access, checkpoints)
    try:
        _commit_pages(access, 200)
        assert checkpoints.inline >= 1
        assert _wal_pages(access) <= 20 + 5
    finally:
        never.set()


def test_the_engine_checkpoints_past_wal_autocheckpoint_in_its_thread_within_the_bound(
    access: Access,
) -> None:
    # SQLite's wal_autocheckpoint (its hook now ours, the pragma reads 0).
    assert access.checkpoints.soft == 1_000
    _commit_pages(access, access.checkpoints.soft // 10 + 10, pages=10)
    deadline = time.monotonic() + WAIT_S
    while access.checkpoints.done == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert access.checkpoints.done >= 1
    assert _wal_pages(access) <= access.checkpoints.hard + 20


def test_save_between_writes_is_never_refused_busy_by_the_checkpoint_thread(
    db_path: Path,
) -> None:
    brain = Brain(db_path, BrainConfig(synchronous="NORMAL"))
    try:
        access = brain._access
        eager = Checkpoints(access.open_second, soft=1, hard=1_000_000)  # every commit wakes it
        _gated(access, eager)
        for i in range(150):
            brain.ingest("s", [MessageIn("user", f"message {i} " + "word " * 200)])
            brain.save()  # SQLite's checkpoint lock: the thread's pass must not hold it now
        assert eager.done >= 1
    finally:
        brain.close()
