"""The mirror's states and the steps between them: what a committed transaction changed,
and a new state made from the previous one at the cost of what changed.

A ``GraphState`` is one consistent state of the graph's adjacency and node maps,
never changed once published. A ``Step`` is a committed transaction (epoch
``before`` -> ``after``) with its ``GraphDelta``; ``next_state`` applies steps
to a state without touching it: each touched adjacency row is copied once, and
the adjacency maps are a base shared with older states plus the rows changed
since (``Rows``), folded into a new base once they pass an eighth of it.
``brain.graph.mirror.Graph`` holds the states and swaps them. Tested in
tests/brain/graph/test_mirror.py.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from brain.store.connection import Store

__all__ = ["GraphDelta", "GraphState", "NodeEntry", "Rows", "Step", "add_nodes", "next_state"]

NodeEntry = tuple[int, str, str, str, int | None]
"""A node as the mirror keeps it: (row id, public id, kind, authority, summary row)."""


@dataclass(frozen=True, slots=True)
class GraphState:
    """One consistent state of the mirror: what the tables held at ``epoch``.

    Never changed once published, so a reader holding one (a query's traversal)
    sees every write either whole or not at all, without any lock. Writers make
    a new state and swap it in (``Graph.advance``). The one exception is additive:
    a summary node first seen by a search is added in place (``summary_node``);
    it existed in the tables at this epoch already, the mirror only learns of it.
    """

    epoch: int | None = None
    out: Mapping[int, dict[int, float]] = field(default_factory=dict)
    """Outgoing edges: source -> {target: weight}."""
    inc: Mapping[int, dict[int, float]] = field(default_factory=dict)
    """Incoming edges: target -> {source: weight}."""
    authority: dict[int, str] = field(default_factory=dict)
    kind: dict[int, str] = field(default_factory=dict)
    public: dict[int, str] = field(default_factory=dict)
    by_public: dict[str, int] = field(default_factory=dict)
    by_summary: dict[int, int] = field(default_factory=dict)
    """Summary row id -> its node's row id."""
    prior: dict[int, float] = field(default_factory=dict)
    """Learned priors of the nodes that have one (absent: 0)."""
    _adding: threading.Lock = field(default_factory=threading.Lock, compare=False)

    def neighbours(self, row_id: int) -> dict[int, float]:
        """Outgoing edges of a node (never changed: safe to keep for this state's life)."""
        return self.out.get(row_id, {})

    def summary_node(self, store: Store, summary_row: int) -> int | None:
        """The node of a summary; looked up (and remembered) when made since the last load.

        Summary nodes are made by compaction without touching the graph epoch (they
        have no edges yet), so the mirror learns about them here, on first sight.
        """
        found = self.by_summary.get(summary_row)
        if found is not None:
            return found
        row = store.one(
            "SELECT id, node_id, authority FROM nodes WHERE summary_id = ?", (summary_row,)
        )
        if row is None:
            return None
        with self._adding:
            add_nodes(self, [(int(row[0]), str(row[1]), "summary", str(row[2]), summary_row)])
        return int(row[0])


def add_nodes(state: GraphState, nodes: Sequence[NodeEntry]) -> None:
    """Add node entries to ``state``'s maps in place (only to a state not yet published,
    or for nodes that already exist at its epoch)."""
    for row_id, node_id, node_kind, node_authority, summary in nodes:
        state.kind[row_id] = node_kind
        state.authority[row_id] = node_authority
        state.public[row_id] = node_id
        state.by_public[node_id] = row_id
        if summary is not None:
            state.by_summary[summary] = row_id


@dataclass(slots=True)
class GraphDelta:
    """What one transaction wrote to the mirrored columns, in the order it wrote it.

    ``ops``: ("edge", source, target, weight) sets an edge's weight (new or not),
    ("drop", source, target, 0) removes an edge, ("gone", node, 0, 0) removes a
    node with every edge touching it, ("prior", node, 0, prior) sets a prior.
    ``nodes``: nodes inserted (applied before the ops).
    """

    ops: list[tuple[str, int, int, float]] = field(default_factory=list)
    nodes: list[NodeEntry] = field(default_factory=list)

    def set_edge(self, source: int, target: int, weight: float) -> None:
        """The edge now has ``weight`` (as stored)."""
        self.ops.append(("edge", source, target, weight))

    def drop_edge(self, source: int, target: int) -> None:
        """The edge was deleted."""
        self.ops.append(("drop", source, target, 0.0))

    def drop_node(self, row_id: int) -> None:
        """The node was deleted, with its edges."""
        self.ops.append(("gone", row_id, 0, 0.0))

    def set_prior(self, row_id: int, prior: float) -> None:
        """The node's prior is now ``prior``."""
        self.ops.append(("prior", row_id, 0, prior))

    def __len__(self) -> int:
        return len(self.ops) + len(self.nodes)


@dataclass(frozen=True, slots=True)
class Step:
    """A committed transaction that moved the graph epoch from ``before`` to ``after``."""

    before: int
    after: int
    delta: GraphDelta


class _Collector:
    """Pauses the garbage collector while mirror states are made (overlapping pauses nest)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pauses = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No collection starts within the block; the collector's setting comes back after."""
        with self._lock:
            if self._pauses == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._pauses += 1
        try:
            yield
        finally:
            with self._lock:
                self._pauses -= 1
                if self._pauses == 0 and self._was_enabled:
                    gc.enable()


_COLLECTOR: Final = _Collector()


_MISSING: Final = object()
_FLATTEN_MIN: Final = 1_024
"""A state's changed rows are folded into a new base past max(this, an eighth of the base)."""


class Rows(Mapping[int, dict[int, float]]):
    """Adjacency rows: a base map shared with older states, plus the rows changed since.

    A state made from the previous one copies only the changed rows' index
    (``top``; None marks a removed row), not the whole map: at 100k nodes a
    copy of the outer map cost ~7 ms, paid per chunk of a maintain run.
    """

    __slots__ = ("base", "top")

    def __init__(
        self, base: dict[int, dict[int, float]], top: dict[int, dict[int, float] | None]
    ) -> None:
        self.base = base
        self.top = top

    def __getitem__(self, key: int) -> dict[int, float]:
        row = self.top.get(key, _MISSING)
        if row is _MISSING:
            return self.base[key]
        if row is None:
            raise KeyError(key)
        return row  # type: ignore[return-value]

    def get(self, key: int, default: Any = None) -> Any:
        """The row of ``key``, else ``default`` (two lookups at most)."""
        row = self.top.get(key, _MISSING)
        if row is _MISSING:
            return self.base.get(key, default)
        return default if row is None else row

    def __contains__(self, key: object) -> bool:
        row = self.top.get(key, _MISSING)  # type: ignore[call-overload]
        return key in self.base if row is _MISSING else row is not None

    def __iter__(self) -> Iterator[int]:
        top = self.top
        yield from (k for k in self.base if k not in top)
        yield from (k for k, row in top.items() if row is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Side:
    """One adjacency map (outgoing or incoming) of a state being made: rows copied on
    first touch into ``top``."""

    def __init__(self, rows: Mapping[int, dict[int, float]]) -> None:
        if isinstance(rows, Rows):
            self.base, self.top = rows.base, dict(rows.top)
        else:
            self.base, self.top = cast(dict[int, dict[int, float]], rows), {}
        self.own: set[int] = set()

    def current(self, key: int) -> dict[int, float] | None:
        row = self.top.get(key, _MISSING)
        return self.base.get(key) if row is _MISSING else row  # type: ignore[return-value]

    def writable(self, key: int) -> dict[int, float]:
        if key in self.own:
            row = self.top.get(key)
            if row is not None:
                return row
        current = self.current(key)
        made = {} if current is None else dict(current)
        self.top[key] = made
        self.own.add(key)
        return made

    def unset(self, key: int, other: int) -> None:
        current = self.current(key)
        if current is None or other not in current:
            return
        row = self.writable(key)
        del row[other]
        if not row:  # a fresh load has no empty rows either
            self.remove(key)

    def remove(self, key: int) -> None:
        if key in self.base:
            self.top[key] = None
        else:
            self.top.pop(key, None)
        self.own.discard(key)

    def rows(self) -> Mapping[int, dict[int, float]]:
        if not self.top:
            return self.base
        if len(self.top) <= max(_FLATTEN_MIN, len(self.base) // 8):
            return Rows(self.base, self.top)
        flat = dict(self.base)  # fold the changed rows in: lookups stay one probe
        for key, row in self.top.items():
            if row is None:
                flat.pop(key, None)
            else:
                flat[key] = row
        return flat


class _Next:
    """A state being made from ``base`` (unpublished): rows copied on first touch."""

    def __init__(self, base: GraphState) -> None:
        self.base = base
        self.out = _Side(base.out)
        self.inc = _Side(base.inc)
        self._nodes: GraphState | None = None  # node maps, copied on the first node change
        self.prior = base.prior

    def node_maps(self) -> GraphState:
        if self._nodes is None:
            b = self.base
            self._nodes = GraphState(
                None,
                {},
                {},
                dict(b.authority),
                dict(b.kind),
                dict(b.public),
                dict(b.by_public),
                dict(b.by_summary),
            )
        return self._nodes

    def apply(self, delta: GraphDelta) -> None:
        if delta.nodes:
            add_nodes(self.node_maps(), delta.nodes)
        out, inc = self.out, self.inc
        out_top, inc_top, own_out, own_inc = out.top, inc.top, out.own, inc.own
        for op, a, b, value in delta.ops:
            if op == "edge":  # the common case inlined: a maintain run sets a million
                row = out_top.get(a) if a in own_out else None
                (row if row is not None else out.writable(a))[b] = value
                row = inc_top.get(b) if b in own_inc else None
                (row if row is not None else inc.writable(b))[a] = value
            elif op == "drop":
                out.unset(a, b)
                inc.unset(b, a)
            elif op == "gone":
                self._drop_node(a)
            elif op == "prior":
                if self.prior is self.base.prior:
                    self.prior = dict(self.prior)
                self.prior[a] = value

    def _drop_node(self, row_id: int) -> None:
        for target in list(self.out.current(row_id) or ()):
            self.inc.unset(target, row_id)
        for source in list(self.inc.current(row_id) or ()):
            self.out.unset(source, row_id)
        self.out.remove(row_id)
        self.inc.remove(row_id)
        nodes = self.node_maps()
        nodes.authority.pop(row_id, None)
        if nodes.kind.pop(row_id, None) == "summary":
            for summary in [s for s, n in nodes.by_summary.items() if n == row_id]:
                del nodes.by_summary[summary]
        public = nodes.public.pop(row_id, None)
        if public is not None:
            nodes.by_public.pop(public, None)
        if row_id in self.prior:
            if self.prior is self.base.prior:
                self.prior = dict(self.prior)
            del self.prior[row_id]

    def state(self, epoch: int) -> GraphState:
        nodes = self._nodes or self.base
        return GraphState(
            epoch,
            self.out.rows(),
            self.inc.rows(),
            nodes.authority,
            nodes.kind,
            nodes.public,
            nodes.by_public,
            nodes.by_summary,
            self.prior,
        )


def next_state(base: GraphState, deltas: Iterable[GraphDelta], epoch: int) -> GraphState:
    """``base`` with ``deltas`` applied in order, as the state at ``epoch`` (``base`` untouched).

    The collector is paused meanwhile: the copy allocates a row per touched node, and
    every young collection it triggered walked the new outer maps (100k entries each
    at 100k nodes); at a maintain run's rate that was most of the cost. Nothing made
    here is cyclic.
    """
    with _COLLECTOR.paused():
        made = _Next(base)
        for delta in deltas:
            made.apply(delta)
        return made.state(epoch)
