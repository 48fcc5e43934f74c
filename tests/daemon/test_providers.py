"""A provider's waits: bounded concurrency, and a deadline that frees the caller and the slot."""

from __future__ import annotations

import threading

import anyio
import pytest

from brain.errors import ProviderError
from daemon.providers import Provider

pytestmark = pytest.mark.anyio


async def test_a_wait_past_the_deadline_raises_provider_error_and_frees_its_slot() -> None:
    provider = Provider("LLM", concurrency=1, deadline_s=0.2)
    hung = threading.Event()
    try:
        with pytest.raises(ProviderError, match=r"LLM provider did not answer within 0\.2s") as e:
            await provider.run(hung.wait)
        assert e.value.data == {"deadline_s": 0.2}
        # The hung thread still waits, yet the one slot is free for the next call.
        assert await provider.run(lambda: 42) == 42
        assert provider.timeouts == 1
    finally:
        hung.set()


async def test_a_call_queued_behind_hung_calls_is_answered_by_its_deadline() -> None:
    provider = Provider("embedding", concurrency=1, deadline_s=0.3)
    hung = threading.Event()
    outcomes: list[str] = []

    async def call(name: str) -> None:
        try:
            await provider.run(hung.wait)
            outcomes.append(f"{name} answered")
        except ProviderError:
            outcomes.append(f"{name} gave up")

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "first")
            await anyio.sleep(0)  # the first takes the only slot
            tg.start_soon(call, "queued")
    finally:
        hung.set()

    assert outcomes == ["first gave up", "queued gave up"]
