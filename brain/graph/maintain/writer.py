"""Writing a task's plan: conditional row writes in short transactions, each bumping the epoch.

Each transaction also records what it changed in the mirrored columns (a
``GraphDelta``: only the writes that found their row as the snapshot saw it),
and after its commit hands it to ``on_commit`` as a ``Step``, so the process's
mirror moves forward chunk by chunk instead of reloading the whole graph.

Tested in tests/brain/graph/maintain/test_run.py (every chunk is its own transaction,
the mirror follows the chunks) and by each task's tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from brain.graph.mirror import GraphDelta, Step
from brain.graph.nodes import bump_epoch
from brain.store.connection import Store
from brain.vectors.index import note_vectors_changed

__all__ = ["Effect", "Write", "Writer"]


Write = tuple[str, tuple[Any, ...]]
Effect = tuple[str, int, int, float]
"""What a write does to the mirrored columns when it changes its row (a ``GraphDelta`` op)."""


class Writer:
    """Runs conditional row writes in short transactions, each bumping the graph epoch."""

    def __init__(
        self,
        store: Store,
        chunk: int,
        dry_run: bool,
        on_commit: Callable[[Step], None] | None = None,
    ) -> None:
        self.store = store
        self.chunk = chunk
        self.dry_run = dry_run
        self.transactions = 0
        self.on_commit = on_commit
        self.delta = GraphDelta()
        """The open transaction's changes to the mirrored columns (tasks add to it)."""

    def run(
        self,
        writes: Sequence[Write],
        vectors: bool = False,
        graph: bool = True,
        effects: Sequence[Effect] | None = None,
    ) -> int:
        """Run ``writes``; how many changed a row (the rest found it changed meanwhile).

        ``graph``: the writes change nodes or edges, so each chunk bumps the epoch.
        ``effects`` (one per write): what each does to the mirror when it changed its row.
        """
        if self.dry_run:
            return len(writes)
        changed = 0
        for start in range(0, len(writes), self.chunk):
            with self._transaction(graph, vectors):
                for offset, (sql, params) in enumerate(writes[start : start + self.chunk]):
                    self.store.execute(sql, params)
                    if self.store.changes() > 0:
                        changed += 1
                        if effects is not None:
                            self.delta.ops.append(effects[start + offset])
        return changed

    def group(self, work: Callable[[], int], vectors: bool = False) -> int:
        """Run ``work`` (several dependent writes) in one transaction; its count.

        ``work`` records what it changes in ``delta``.
        """
        if self.dry_run:
            return work()
        with self._transaction(True, vectors):
            return work()

    @contextlib.contextmanager
    def _transaction(self, graph: bool, vectors: bool) -> Iterator[None]:
        """One chunk: the epoch bumps inside it, the step goes to ``on_commit`` after it."""
        self.delta = GraphDelta()
        after: int | None = None
        with self.store.transaction():
            yield
            if graph:
                after = bump_epoch(self.store)
            if vectors:
                note_vectors_changed(self.store, ("node",))
        self.transactions += 1
        if after is not None and self.on_commit is not None:
            self.on_commit(Step(after - 1, after, self.delta))
        self.delta = GraphDelta()
