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
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from brain.graph.mirror import GraphDelta, Step
from brain.graph.nodes import bump_epoch
from brain.store.connection import Store
from brain.vectors.index import note_vectors_changed

__all__ = ["SWEEP_REST_MAX_S", "SWEEP_REST_MIN_S", "Effect", "Write", "Writer", "sweep_rest"]

SWEEP_REST_MIN_S = 0.01
"""The least a run rests after each transaction when it cannot hear who waits (see
``sweep_rest``): a writer waiting in SQLite's busy handler polls 1, 2, 5, 10 ms apart
at first, so it finds the lock free."""
SWEEP_REST_MAX_S = 0.05
"""The most: a sweep span held the lock longer, but resting as long would double it."""


Write = tuple[str, tuple[Any, ...]]
"""A statement and its bindings; one given ``effects`` must change at most one row."""
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
        self.bumps = 0
        """Committed transactions that bumped the graph epoch."""
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
            chunk = writes[start : start + self.chunk]
            if effects is not None and self._all_at_once(
                chunk, effects[start : start + len(chunk)], graph, vectors
            ):
                changed += len(chunk)
                continue
            with self._transaction(graph, vectors):
                for offset, (sql, params) in enumerate(chunk):
                    self.store.execute(sql, params)
                    if self.store.changes() > 0:
                        changed += 1
                        if effects is not None:
                            self.delta.ops.append(effects[start + offset])
        return changed

    def _all_at_once(
        self, chunk: Sequence[Write], effects: Sequence[Effect], graph: bool, vectors: bool
    ) -> bool:
        """Run a chunk of one single-row statement as one ``executemany``; whether every
        write found its row (committed), or not (rolled back: the caller runs it row by row).

        A write per row through ``execute`` was most of a maintain run at 100k nodes
        (a million decayed edges: ~8 us of Python each). ``RETURNING 1`` counts the rows
        changed; only when all were is the chunk kept, so which effects apply is known.
        """
        sql = chunk[0][0]
        if any(other != sql for other, _ in chunk) or "RETURNING" in sql.upper():
            return False
        try:
            with self._transaction(graph, vectors):
                found = sum(
                    1 for _ in self.store.executemany(sql + " RETURNING 1", [p for _, p in chunk])
                )
                if found != len(chunk):
                    raise _Partial()
                self.delta.ops.extend(effects)
        except _Partial:
            return False
        return True

    def sweep(
        self,
        sql: str,
        params: Sequence[tuple[Any, ...]],
        on_rows: Callable[[list[tuple[Any, ...]]], None],
    ) -> int:
        """Run the set-based ``sql`` once per ``params`` (a span of rows each: see
        ``Snapshot.source_ranges``), each in its own transaction bumping the epoch;
        how many rows its ``RETURNING`` gave.

        ``on_rows`` hears each run's returned rows inside its transaction, and records
        what they changed in ``delta``. A statement per row was most of a run at 100k
        nodes (a million decayed edges, each a primary-key search, and 500-row
        transactions: 2,000 commits, and deletions at random places of the target
        index rewrote most of its pages in every one, a gigabyte of WAL).
        """
        if self.dry_run:
            raise ValueError("a dry run plans against the snapshot: it sweeps nothing")
        found = 0
        for bindings in params:
            with self._transaction(True, False):
                rows = list(self.store.execute(sql, bindings))
                on_rows(rows)
            found += len(rows)
        return found

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
        started = time.monotonic()
        with self.store.transaction():
            yield
            if graph:
                after = bump_epoch(self.store)
            if vectors:
                note_vectors_changed(self.store, ("node",))
        self.transactions += 1
        if after is not None:
            self.bumps += 1
        if after is not None and self.on_commit is not None:
            self.on_commit(Step(after - 1, after, self.delta))
        self.delta = GraphDelta()
        self._make_way(time.monotonic() - started)

    def _make_way(self, held: float) -> None:
        """After a commit, let in the writers that wait for the lock (a daemon's ingest).

        Transactions come back to back, each holding the lock for up to a span of
        ~20,000 edges; a writer polling in its busy handler missed every gap and was
        answered only after the whole run. A waiting writer says so (``Waiting``):
        the run holds back until it has the lock, and costs nothing when nobody
        waits (it used to rest after every transaction: 5 s of a 100k-node run).
        Where waits cannot be heard, it rests (``sweep_rest``).
        """
        waiting = self.store.waiting
        waiting.let_through()
        if not waiting.usable:
            time.sleep(sweep_rest(held))


def sweep_rest(held: float) -> float:
    """How long a sweep rests after a transaction that held the write lock ``held`` s.

    Only where waits cannot be heard (``Waiting.usable`` is false): sweep
    transactions come back to back and each holds the lock for a span of ~20,000
    edges; without a gap, a daemon's ingest waiting in the busy handler missed
    every one and was answered only after the whole run (the maintain e2e test).
    As long again as it held the lock, within the bounds above.
    """
    return min(max(held, SWEEP_REST_MIN_S), SWEEP_REST_MAX_S)


class _Partial(Exception):
    """A chunk run at once where some write found its row changed: rolled back."""
