"""The offline summarizer run by a child process (``brain.lcm.summary_child``)."""

from __future__ import annotations

import os
import signal

import pytest

from brain.lcm.offline import OFFLINE_NAMES, offline_summarizer
from brain.lcm.summary_child import ChildSummarizer
from brain.lcm.summary_contract import SourceItem, SummaryRequest


def _request(n: int = 40, seed: int = 0) -> SummaryRequest:
    items = tuple(
        SourceItem(
            f"msg_{i}",
            ("user", "assistant")[i % 2],
            f"Turn {i + seed}: we moved the deploy of service {i % 7} to Friday after the "
            f"review of ticket {1000 + i} and the budget note from Dana about caching.",
            f"2026-11-22T14:{i % 60:02d}:00.000Z",
        )
        for i in range(n)
    )
    return SummaryRequest("leaf", 0, items, 120)


@pytest.mark.parametrize("name", OFFLINE_NAMES)
def test_the_child_gives_the_text_and_the_name_of_the_summarizer_it_runs(name: str) -> None:
    child = ChildSummarizer(name)
    try:
        inner = offline_summarizer(name)
        assert child.name == inner.name
        for seed in (0, 5):
            request = _request(seed=seed)
            assert child.summarize(request) == inner.summarize(request)
    finally:
        child.close()


def test_the_summary_is_made_in_another_process_that_stays_for_the_next_request() -> None:
    child = ChildSummarizer()
    try:
        assert child.pid is None  # nothing started before the first request
        child.summarize(_request())
        first = child.pid
        assert first is not None
        assert first != os.getpid()
        child.summarize(_request(seed=3))
        assert child.pid == first
    finally:
        child.close()


def test_a_dead_child_costs_no_summary_and_a_new_one_takes_the_next_request() -> None:
    child = ChildSummarizer()
    expected = offline_summarizer("default").summarize(_request())
    try:
        child.summarize(_request())
        dead = child.pid
        assert dead is not None
        os.kill(dead, signal.SIGKILL)
        assert child.summarize(_request()) == expected  # made in this process this time
        assert child.summarize(_request()) == expected
        assert child.pid not in (None, dead)
    finally:
        child.close()


def test_closing_ends_the_child_and_later_requests_are_summarised_here() -> None:
    child = ChildSummarizer()
    child.summarize(_request())
    pid = child.pid
    assert pid is not None
    child.close()
    assert child.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # exited and reaped
    assert child.summarize(_request()) == offline_summarizer("default").summarize(_request())
    assert child.pid is None


def test_an_unknown_summarizer_name_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="offline_summarizer must be one of"):
        ChildSummarizer("nope")


def test_a_stopped_child_is_killed_at_its_deadline_and_the_summary_made_in_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from brain.lcm import summary_child

    monkeypatch.setattr(summary_child, "ANSWER_DEADLINE_S", 1.0)
    child = ChildSummarizer()
    expected = offline_summarizer("default").summarize(_request())
    try:
        child.summarize(_request(seed=1))
        stopped = child.pid
        assert stopped is not None
        os.kill(stopped, signal.SIGSTOP)  # as a wedged child looks: alive, never answering
        start = time.monotonic()
        assert child.summarize(_request()) == expected
        assert time.monotonic() - start < 20  # today: never returns
        child.summarize(_request(seed=2))
        assert child.pid not in (None, stopped)  # a new child took the next request
    finally:
        child.close()


def test_closing_with_a_stopped_child_does_not_wait_for_it() -> None:
    import time

    child = ChildSummarizer()
    child.summarize(_request())
    assert child.pid is not None
    os.kill(child.pid, signal.SIGSTOP)
    start = time.monotonic()
    child.close()
    assert time.monotonic() - start < 3  # today: the 5 s exit wait, then a kill
