"""Shared fixtures: fresh databases on disk (real SQLite files, never :memory:)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brain import Brain, BrainConfig


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a database that does not exist yet."""
    return tmp_path / "brain.db"


@pytest.fixture
def fresh_brain(db_path: Path) -> Iterator[Brain]:
    """An open engine on a new database file, closed after the test."""
    engine = Brain(db_path, BrainConfig(large_payload_tokens=1_000))
    try:
        yield engine
    finally:
        engine.close()
