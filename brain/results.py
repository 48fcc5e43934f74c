"""The small values engine calls hand back: a save's result, and what a call split
into stages (the daemon waits on a provider apart from database work) hands from
one stage to the next.

Kept apart from ``brain.engine`` so that opening a database builds none of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from brain.graph.sync import SyncReport
    from brain.recall.expand import Gathered


@dataclass(frozen=True, slots=True)
class SaveResult:
    """What a save did: WAL frames before and checkpointed, and how long it took."""

    wal_frames: int
    checkpointed_frames: int
    took_ms: float


@dataclass(frozen=True, slots=True)
class EmbeddedQuery:
    """A text and its vector, embedded ahead of the database work that uses it.

    ``Brain.embed_query`` makes one; ``grep``, ``query``, ``teach`` and ``assemble``
    take it instead of embedding themselves, so a caller can wait on a slow embeddings
    provider apart from the threads that do database work (the daemon does).
    """

    text: str
    vector: npt.NDArray[np.float32]
    ms: float


@dataclass(frozen=True, slots=True)
class SyncIndexed:
    """A sync before embedding: its report so far, the nodes it added, when it started."""

    indexed: SyncReport
    new_rows: tuple[int, ...]
    started: float

    def report(self, embedded: int) -> SyncReport:
        """The sync's report once ``embedded`` of the new nodes got their vectors."""
        took_ms = round((time.perf_counter() - self.started) * 1000, 3)
        pending = len(self.new_rows) - embedded
        return replace(self.indexed, embedded=embedded, pending=pending, took_ms=took_ms)


@dataclass(frozen=True, slots=True)
class Draft:
    """``expand_query`` before the model: what the database gave, and the extractive answer."""

    gathered: Gathered
    extractive: dict[str, Any]
    max_tokens: int
