"""Background compaction (``daemon.compactions``): an urgent request does not wait for
the session to go quiet."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from brain import AssembleOptions, Brain, BrainConfig, CompactionConfig, MessageIn
from daemon.compactions import Compactions

pytestmark = pytest.mark.anyio

BUSY_S = 3.0  # a session written to this long without a pause
SETTLE_S = 600.0  # the quiet a non-urgent compaction waits for: far beyond any test


def _brain(path: Path) -> Brain:
    return Brain(path, config=BrainConfig(compaction=CompactionConfig(fresh_tail_count=4)))


def _turns(n: int, start: int = 0) -> list[MessageIn]:
    return [
        MessageIn("user" if i % 2 == 0 else "assistant", f"turn {i}: " + "words about it " * 40)
        for i in range(start, start + n)
    ]


async def _busy(
    compactions: Compactions, brain: Brain, session: str, urgent: bool, seconds: float
) -> int:
    """Write to the session without a pause, asking for compaction after each write as
    the daemon does, for ``seconds`` or until a compaction completed; how many did."""
    n = 0
    with anyio.move_on_after(seconds):
        while not compactions.completed:
            await anyio.to_thread.run_sync(brain.ingest, session, _turns(2, start=1_000 + n))
            n += 2
            compactions.request(session, urgent=urgent)
            await anyio.sleep(0.01)
    return compactions.completed


async def test_an_urgent_request_compacts_a_session_that_never_goes_quiet(tmp_path: Path) -> None:
    brain = _brain(tmp_path / "b.db")
    try:
        brain.ingest("s", _turns(80))
        # Followed at a small budget, so the history is well over the threshold.
        assert brain.assemble("s", AssembleOptions(budget=1_000)).gaps["messages"] > 0
        async with anyio.create_task_group() as tg:
            compactions = Compactions(brain, settle_s=SETTLE_S, max_wait_s=SETTLE_S)
            compactions.attach(tg)
            assert await _busy(compactions, brain, "s", True, SETTLE_S / 10) >= 1
            tg.cancel_scope.cancel()
    finally:
        brain.close()


async def test_without_urgency_a_busy_session_waits_for_quiet(tmp_path: Path) -> None:
    brain = _brain(tmp_path / "b.db")
    try:
        brain.ingest("s", _turns(80))
        brain.assemble("s", AssembleOptions(budget=1_000))
        async with anyio.create_task_group() as tg:
            compactions = Compactions(brain, settle_s=SETTLE_S, max_wait_s=SETTLE_S)
            compactions.attach(tg)
            assert await _busy(compactions, brain, "s", False, BUSY_S) == 0
            assert compactions.active == 1  # still waiting for the session to go quiet
            tg.cancel_scope.cancel()
    finally:
        brain.close()
