"""The tasks ``maintain`` knows, in the order it runs them, and the knobs of each.

Tested in tests/brain/graph/maintain/test_options.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from brain.errors import InvalidInput

__all__ = ["TASKS", "MaintainOptions", "check_tasks"]


TASKS: Final[tuple[str, ...]] = ("health", "decay", "merge", "prune", "connect", "scale")
"""Every task, in the order ``maintain`` runs them (``health`` only measures)."""


def check_tasks(tasks: Sequence[str]) -> None:
    """Refuse (InvalidInput) task names ``maintain`` does not know."""
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise InvalidInput("tasks", f"unknown {', '.join(unknown)}; known: {', '.join(TASKS)}")


@dataclass(frozen=True, slots=True)
class MaintainOptions:
    """Knobs of the tasks (the defaults suit a graph of a few thousand nodes)."""

    half_life_days: float = 14.0
    """Decay halves an edge's weight every this many days since it last changed."""
    min_decay: float = 1e-4
    """A decay smaller than this leaves the edge untouched (its time keeps accruing)."""
    merge_similarity: float = 0.95
    """Overlay nodes of one kind at least this similar are near-duplicates."""
    cofire_traces: int = 5
    """Nodes that fired in exactly the same traces, at least this many, are merged."""
    prune_below: float = 0.05
    """Edges weaker than this (|weight|) are deleted."""
    orphan_days: float = 30.0
    """An edgeless node is deleted only if neither made nor fired for this many days."""
    connect_k: int = 3
    """A learning node with no chunk neighbour is linked to this many chunks..."""
    connect_similarity: float = 0.3
    """...that are at least this similar (edge weight: the similarity, halved)."""
    scale_budget: float = 3.0
    """A node's positive outgoing weights are scaled down to sum to at most this."""
    chunk: int = 500
    """Row writes per transaction."""
    sweep: int = 20_000
    """Edges a set-based pass (decay's, prune's edges) covers per transaction: one
    statement over a span of sources (~20-60 ms of the write lock at this size)."""

    def __post_init__(self) -> None:
        # The engine checks its own ranges: ``brain maintain`` and scripts build
        # options without the protocol's validation, and an out-of-range knob
        # is not a harmless no-op (``prune_below`` 5 deletes every edge).
        for name in ("merge_similarity", "prune_below", "connect_similarity"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise InvalidInput(name, f"must be between 0 and 1, got {value}")
        for name in ("half_life_days", "orphan_days", "scale_budget"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(name, f"must be a positive number, got {value}")
        if not (math.isfinite(self.min_decay) and 0.0 <= self.min_decay <= 1.0):
            raise InvalidInput("min_decay", f"must be between 0 and 1, got {self.min_decay}")
        for name, minimum in (("chunk", 1), ("sweep", 1), ("cofire_traces", 1), ("connect_k", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InvalidInput(name, f"must be an integer of at least {minimum}, got {value}")
