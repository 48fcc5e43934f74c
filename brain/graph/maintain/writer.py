"""Writing a task's plan: conditional row writes in short transactions, each bumping the epoch.

Tested in tests/brain/graph/maintain/test_run.py (every chunk is its own transaction)
and by each task's tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from brain.graph.nodes import bump_epoch
from brain.store.connection import Store
from brain.vectors.index import note_vectors_changed

__all__ = ["Write", "Writer"]


Write = tuple[str, tuple[Any, ...]]


class Writer:
    """Runs conditional row writes in short transactions, each bumping the graph epoch."""

    def __init__(self, store: Store, chunk: int, dry_run: bool) -> None:
        self.store = store
        self.chunk = chunk
        self.dry_run = dry_run
        self.transactions = 0

    def run(self, writes: Sequence[Write], vectors: bool = False, graph: bool = True) -> int:
        """Run ``writes``; how many changed a row (the rest found it changed meanwhile).

        ``graph``: the writes change nodes or edges, so each chunk bumps the epoch.
        """
        if self.dry_run:
            return len(writes)
        changed = 0
        for start in range(0, len(writes), self.chunk):
            with self.store.transaction():
                for sql, params in writes[start : start + self.chunk]:
                    self.store.execute(sql, params)
                    changed += int(self.store.changes() > 0)
                if graph:
                    bump_epoch(self.store)
                if vectors:
                    note_vectors_changed(self.store, ("node",))
            self.transactions += 1
        return changed

    def group(self, work: Callable[[], int], vectors: bool = False) -> int:
        """Run ``work`` (several dependent writes) in one transaction; its count."""
        if self.dry_run:
            return work()
        with self.store.transaction():
            done = work()
            bump_epoch(self.store)
            if vectors:
                note_vectors_changed(self.store, ("node",))
        self.transactions += 1
        return done
