"""Fixtures for engine tests: stores on real database files (never :memory:)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brain import Brain, BrainConfig, Store, open_store
from tests.brain.lcm import SMALL_BRAIN


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
