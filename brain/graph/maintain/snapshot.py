"""The graph as one maintenance run sees it: nodes and edges read once, then changed by each task.

Tasks plan against the snapshot and apply their plan to it, so later tasks see earlier
ones and a dry run reports what a real run would do. While a snapshot is in memory the
garbage collector's full collections are held off (``FULL_COLLECTIONS``). Tested through
every task's tests in tests/brain/graph/maintain/ and, for the collections,
tests/brain/graph/maintain/test_run.py.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any, Final, NamedTuple

from brain.store.connection import Store

__all__ = ["FULL_COLLECTIONS", "LEARNING_KINDS", "Edge", "FullCollections", "Node", "Snapshot"]


_FIRST: Final = itemgetter(0)

LEARNING_KINDS: Final = ("teaching", "correction", "directive")
"""The kinds of node learning makes (merge, prune and connect work on these)."""


@dataclass(slots=True)
class Node:
    """A node as the run sees it (the columns the tasks decide on)."""

    row_id: int
    node_id: str
    kind: str
    authority: str
    source: str | None
    created_at: str
    last_fired_at: str | None


class Edge(NamedTuple):
    """An edge as the run sees it; ``updated_at`` is the condition its writes check.

    A tuple, not a dataclass: a snapshot holds a million of them at 100k nodes, made
    straight from the rows SQLite returns (a dataclass ``__init__`` per edge was a
    fifth of reading the graph), and never changed (a task puts a new one).
    """

    weight: float
    kind: str
    updated_at: str


@dataclass(slots=True)
class Snapshot:
    """Nodes and edges as read at the start, then as the tasks left them."""

    nodes: dict[int, Node]
    edges: dict[tuple[int, int], Edge]
    out: dict[int, set[int]] = field(default_factory=dict)
    inc: dict[int, set[int]] = field(default_factory=dict)
    traces: int = 0

    @classmethod
    def load(cls, store: Store) -> Snapshot:
        """Read every node and edge, and count the traces (one read transaction)."""
        if store.conn.in_transaction:
            return cls._read(store)
        store.execute("BEGIN")  # deferred: the edges read twice are the same edges
        try:
            return cls._read(store)
        finally:
            store.execute("COMMIT")

    @classmethod
    def _read(cls, store: Store) -> Snapshot:
        nodes = {
            int(r[0]): Node(int(r[0]), str(r[1]), str(r[2]), str(r[3]), r[4], str(r[5]), r[6])
            for r in store.execute(
                "SELECT id, node_id, kind, authority, source, created_at, last_fired_at FROM nodes"
            )
        }
        # Whole columns at once: the rows, then the edges from them, ``out`` grouped in
        # the table's (source, target) order and ``inc`` from the target index in its
        # (target, source) order. An edge at a time (a dict and two set updates) was
        # 2.4 s of CPU at 100k nodes and a million edges; this is 1.6 s.
        make = tuple.__new__
        rows: list[tuple[Any, ...]] = store.execute(
            "SELECT source, target, weight, kind, updated_at FROM edges ORDER BY source, target"
        ).fetchall()
        keys: list[tuple[int, int]] = [(r[0], r[1]) for r in rows]
        edges = dict(zip(keys, [make(Edge, r[2:]) for r in rows], strict=True))
        del rows
        out = {source: {t for _, t in group} for source, group in groupby(keys, _FIRST)}
        del keys
        inc = {
            target: {s for _, s in group}
            for target, group in groupby(
                store.execute("SELECT target, source FROM edges ORDER BY target, source"), _FIRST
            )
        }
        snap = cls(nodes, edges, out, inc)
        snap.traces = int(store.scalar("SELECT count(*) FROM traces"))
        return snap

    def put(self, source: int, target: int, edge: Edge) -> None:
        """Add or replace an edge."""
        self.edges[(source, target)] = edge
        self.out.setdefault(source, set()).add(target)
        self.inc.setdefault(target, set()).add(source)

    def drop(self, source: int, target: int) -> None:
        """Remove an edge (if there)."""
        self.edges.pop((source, target), None)
        self.out.get(source, set()).discard(target)
        self.inc.get(target, set()).discard(source)

    def drop_many(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Remove edges (those there): ``drop`` inlined, for a prune's 300k at 100k nodes."""
        pop, out, inc = self.edges.pop, self.out, self.inc
        for source, target in pairs:
            if pop((source, target), None) is not None:
                out[source].discard(target)
                inc[target].discard(source)

    def drop_node(self, row_id: int) -> None:
        """Remove a node and every edge touching it."""
        for target in list(self.out.get(row_id, ())):
            self.drop(row_id, target)
        for source in list(self.inc.get(row_id, ())):
            self.drop(source, row_id)
        self.out.pop(row_id, None)
        self.inc.pop(row_id, None)
        self.nodes.pop(row_id, None)

    def with_authority(self, authority: str) -> set[int]:
        """The nodes of ``authority`` now (a set for the tasks' per-edge loops)."""
        return {n.row_id for n in self.nodes.values() if n.authority == authority}

    def constitutional(self, row_id: int) -> bool:
        """Whether the node is constitutional (never changed by any task)."""
        node = self.nodes.get(row_id)
        return node is not None and node.authority == "constitutional"

    def touches_constitutional(self, source: int, target: int) -> bool:
        """Whether either end of the edge is constitutional."""
        return self.constitutional(source) or self.constitutional(target)

    def source_ranges(self, size: int) -> list[tuple[int, int]]:
        """The sources with outgoing edges as inclusive (first, last) ranges of about
        ``size`` edges each (a source with more is a range of its own), in order.

        A set-based pass (``Writer.sweep``) covers one range per transaction: a
        statement over a span of the primary key, in place of a statement per row.
        """
        ranges: list[tuple[int, int]] = []
        first: int | None = None
        last = held = 0
        for source in sorted(k for k, row in self.out.items() if row):
            degree = len(self.out[source])
            if first is not None and held + degree > size:
                ranges.append((first, last))
                first = None
            if first is None:
                first, held = source, 0
            last = source
            held += degree
        if first is not None:
            ranges.append((first, last))
        return ranges

    def degree(self, row_id: int) -> int:
        """Edges in and out of the node."""
        return len(self.out.get(row_id, ())) + len(self.inc.get(row_id, ()))


class FullCollections:
    """Holds off the garbage collector's full collections while snapshots are in memory.

    A snapshot is millions of small objects, and every full collection walks
    all of them while holding the GIL: 12 of them took 4.5 s of a 13 s dry run
    at 300k edges, up to 0.7 s each, and in a daemon every other thread (the
    event loop, the requests' workers) stood still meanwhile; at 1M edges an
    ``info`` waited 4.4 s. Young-generation collections still run, so cyclic
    garbage made meanwhile is collected; the process-wide threshold comes back
    when the last concurrent run ends.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs = 0
        self._threshold = gc.get_threshold()

    @contextlib.contextmanager
    def held_off(self) -> Iterator[None]:
        """Within the block (and any overlapping one) no full collection starts by itself."""
        with self._lock:
            if self._runs == 0:
                self._threshold = gc.get_threshold()
                young, middle, _ = self._threshold
                gc.set_threshold(young, middle, 1 << 30)
            self._runs += 1
        try:
            yield
        finally:
            with self._lock:
                self._runs -= 1
                if self._runs == 0:
                    gc.set_threshold(*self._threshold)


FULL_COLLECTIONS: Final = FullCollections()
