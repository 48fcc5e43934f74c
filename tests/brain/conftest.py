"""Fixtures for engine tests: stores on real database files (never :memory:)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from brain import Brain, BrainConfig, ChatClient, LLMConfig, Store, open_store
from tests.brain.lcm.helpers import SMALL_BRAIN
from tests.openai_server import Clock, OpenAIServer


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    """An open store on a new database file with a small payload threshold."""
    opened = open_store(db_path, BrainConfig(large_payload_tokens=64))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def small(db_path: Path) -> Iterator[Brain]:
    """An engine with small compaction settings (``lcm.SMALL``): a few dozen messages fold."""
    engine = Brain(db_path, SMALL_BRAIN)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """A loopback server speaking the OpenAI API shape."""
    with OpenAIServer() as running:
        yield running


@pytest.fixture
def sleeps() -> list[float]:
    """Durations a provider client asked to sleep; nothing really sleeps."""
    return []


@pytest.fixture
def clock() -> Clock:
    """A monotonic clock the test moves by hand."""
    return Clock()


ClientFactory = Callable[..., ChatClient]


@pytest.fixture
def make_client(server: OpenAIServer, sleeps: list[float], clock: Clock) -> Iterator[ClientFactory]:
    """Clients for the test server with recorded sleeps and a manual clock; closed afterwards."""
    clients: list[ChatClient] = []

    def make(**overrides: Any) -> ChatClient:
        options: dict[str, Any] = {"base_url": server.base_url, "model": "test-model"}
        options.update(overrides)
        client = ChatClient(LLMConfig(**options), sleep=sleeps.append, clock=clock)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
