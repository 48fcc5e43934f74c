"""What a sync did: its report, and the report before embedding (``SyncIndexed``).

Tested through the syncs in tests/brain/graph/sync/test_apply.py, which read the reports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from brain.graph.sync.workspace import Refusal

__all__ = ["SyncIndexed", "SyncReport"]


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What a sync did.

    ``added`` + ``kept`` + ``moved`` is the number of chunks the files have now:
    ``kept`` nodes did not change at all, ``moved`` ones kept their node but got a
    new line range, heading path or authority. ``removed`` nodes were deleted.
    ``embedded`` of the added nodes have a vector on return; ``pending`` wait for
    the background embedder (another process owns the index with another
    embedder, or the provider failed). ``refused`` files were never read and
    have no chunks (any they had are removed).
    """

    workspace: str
    files: int
    added: int
    kept: int
    moved: int
    removed: int
    nodes: int
    edges: int
    embedded: int
    pending: int
    took_ms: float
    refused: tuple[Refusal, ...] = ()
    """Files listed but not read (``{path, reason}``, reasons in ``REFUSALS``)."""


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
