"""The hand-built graph fixture the maintenance tests share."""

from __future__ import annotations

import pytest

from brain import Store
from tests.brain.graph.maintain.helpers import G


@pytest.fixture
def g(store: Store) -> G:
    """An empty graph on the test's store."""
    return G(store, {})
