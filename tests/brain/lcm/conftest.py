"""Fixtures shared by the lcm tests (the helpers they call are in ``helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brain import Brain, BrainConfig


@pytest.fixture
def brain(db_path: Path) -> Iterator[Brain]:
    """An engine with the default settings (compaction's threshold alone: 20,000 tokens)."""
    engine = Brain(db_path, BrainConfig())
    try:
        yield engine
    finally:
        engine.close()
