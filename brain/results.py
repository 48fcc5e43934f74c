"""The small values engine calls hand back: a save's result, and a query embedded ahead
of the database work (a call split into stages: the daemon waits on a provider apart
from database work). The values a sync or an ``expand_query`` hands from one stage to
the next live beside them (``brain.graph.sync.SyncIndexed``, ``brain.recall.expand.Draft``).

Kept apart from ``brain.engine`` so that opening a database builds none of them.

Plain values: tested through the calls that return them (``tests/brain/test_engine.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


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
