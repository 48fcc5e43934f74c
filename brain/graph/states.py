"""The mirror's states and the steps between them: what a committed transaction changed,
and a new state made from the previous one at the cost of what changed.

A ``GraphState`` is one consistent state of the graph's adjacency and node maps,
never changed once published. A ``Step`` is a committed transaction (epoch
``before`` -> ``after``) with its ``GraphDelta``; ``next_state`` applies steps
to a state without touching it: each touched adjacency row is copied once, and
every map (adjacency, node maps, priors) is a base shared with older states
plus the entries changed since (``Layered``), folded into a new base once they
pass an eighth of it, so a step costs what it changed, not the graph's size.
``brain.graph.mirror.Graph`` holds the states and swaps them. Tested in
tests/brain/graph/test_mirror.py.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Generic, TypeVar, cast

import numpy as np

from brain.graph.packed import PackedRows
from brain.store.connection import Store

__all__ = [
    "GraphDelta",
    "GraphState",
    "Layered",
    "NodeEntry",
    "Rows",
    "Step",
    "add_nodes",
    "next_state",
]

K = TypeVar("K")
V = TypeVar("V")

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
    authority: Mapping[int, str] = field(default_factory=dict)
    kind: Mapping[int, str] = field(default_factory=dict)
    public: Mapping[int, str] = field(default_factory=dict)
    by_public: Mapping[str, int] = field(default_factory=dict)
    by_summary: Mapping[int, int] = field(default_factory=dict)
    """Summary row id -> its node's row id."""
    prior: Mapping[int, float] = field(default_factory=dict)
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
    """Add node entries to ``state``'s maps in place (only for nodes that already exist
    at its epoch: a published state's entries never change)."""
    for row_id, node_id, node_kind, node_authority, summary in nodes:
        _put(state.kind, row_id, node_kind)
        _put(state.authority, row_id, node_authority)
        _put(state.public, row_id, node_id)
        _put(state.by_public, node_id, row_id)
        if summary is not None:
            _put(state.by_summary, summary, row_id)


def _put(target: Mapping[K, V], key: K, value: V) -> None:
    """Set ``key`` in a state's map in place: a plain dict, or a ``Layered`` map's own top."""
    if isinstance(target, Layered):
        target.top[key] = value
    else:
        cast(dict[K, V], target)[key] = value


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
_GONE: Final = object()
"""In a ``Layered`` map's top: the key was removed since the base."""
_FLATTEN_MIN: Final = 1_024
"""A state's changed entries are folded into a new base past max(this, an eighth of the base)."""


class Layered(Mapping[K, V], Generic[K, V]):
    """A map made of a base shared with older states, plus the entries changed since.

    A state made from the previous one copies only the changed entries (``top``;
    ``_GONE`` marks a removed one), not the whole map: at 100k nodes a copy of an
    outer adjacency map cost ~7 ms, paid per chunk of a maintain run, and a copy of
    the five node maps ~7 ms, paid per taught node.
    """

    __slots__ = ("base", "top")

    def __init__(self, base: Mapping[K, V], top: dict[K, Any]) -> None:
        self.base = base
        self.top = top

    def __getitem__(self, key: K) -> V:
        value = self.top.get(key, _MISSING)
        if value is _MISSING:
            return self.base[key]
        if value is _GONE:
            raise KeyError(key)
        return cast(V, value)

    def get(self, key: K, default: Any = None) -> Any:
        """The value of ``key``, else ``default`` (two lookups at most)."""
        value = self.top.get(key, _MISSING)
        if value is _MISSING:
            return self.base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key: object) -> bool:
        value = self.top.get(cast(K, key), _MISSING)
        return key in self.base if value is _MISSING else value is not _GONE

    def __iter__(self) -> Iterator[K]:
        top = self.top
        yield from (k for k in self.base if k not in top)
        yield from (k for k, value in top.items() if value is not _GONE)

    def __len__(self) -> int:
        top = self.top
        added = sum(1 for k, v in top.items() if v is not _GONE and k not in self.base)
        removed = sum(1 for k, v in top.items() if v is _GONE and k in self.base)
        return len(self.base) + added - removed


Rows = Layered[int, dict[int, float]]
"""Adjacency rows: source (or target) -> {other end: weight}."""


class _Overlay(Generic[K, V]):
    """One map of a state being made: changes go to a ``top`` of its own, the base is
    shared with the state it is made from."""

    def __init__(self, current: Mapping[K, V]) -> None:
        if isinstance(current, Layered):
            self.base: Mapping[K, V] = current.base
            self.top: dict[K, Any] = dict(current.top)
        else:
            self.base, self.top = current, {}

    def get(self, key: K) -> V | None:
        value = self.top.get(key, _MISSING)
        if value is _MISSING:
            return self.base.get(key)
        return None if value is _GONE else cast(V, value)

    def set(self, key: K, value: V) -> None:
        self.top[key] = value

    def pop(self, key: K) -> V | None:
        found = self.get(key)
        if found is not None:
            if key in self.base:
                self.top[key] = _GONE
            else:
                self.top.pop(key, None)
        return found

    def made(self) -> Mapping[K, V]:
        """The map as the new state keeps it: layered, or folded into a new base once the
        changes pass an eighth of it (lookups stay one probe, the top stays small)."""
        if not self.top:
            return self.base
        if len(self.top) <= max(_FLATTEN_MIN, len(self.base) // 8):
            return Layered(self.base, self.top)
        if isinstance(self.base, PackedRows):  # packed arrays stay packed: no dict per row
            return cast(Mapping[K, V], self.base.merged(cast(dict[int, Any], self.top), _GONE))
        flat = dict(self.base)
        for key, value in self.top.items():
            if value is _GONE:
                flat.pop(key, None)
            else:
                flat[key] = value
        return flat


class _Side:
    """One adjacency map (outgoing or incoming) of a state being made: rows copied on
    first touch into ``top``."""

    def __init__(self, rows: Mapping[int, dict[int, float]]) -> None:
        if isinstance(rows, Layered):
            self.base, self.top = rows.base, dict(rows.top)
        else:
            self.base, self.top = rows, {}
        self.own: set[int] = set()

    def current(self, key: int) -> dict[int, float] | None:
        row = self.top.get(key, _MISSING)
        if row is _MISSING:
            return self.base.get(key)
        return None if row is _GONE else cast(dict[int, float], row)

    def writable(self, key: int) -> dict[int, float]:
        if key in self.own:
            return cast(dict[int, float], self.top[key])
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
            self.top[key] = _GONE
        else:
            self.top.pop(key, None)
        self.own.discard(key)

    def rows(self) -> Mapping[int, dict[int, float]]:
        overlay: _Overlay[int, dict[int, float]] = _Overlay({})
        overlay.base, overlay.top = self.base, self.top
        return overlay.made()


class _Next:
    """A state being made from ``base`` (unpublished): entries copied on first touch."""

    def __init__(self, base: GraphState) -> None:
        self.base = base
        self.out = _Side(base.out)
        self.inc = _Side(base.inc)
        self.authority = _Overlay(base.authority)
        self.kind = _Overlay(base.kind)
        self.public = _Overlay(base.public)
        self.by_public = _Overlay(base.by_public)
        self.by_summary = _Overlay(base.by_summary)
        self.prior = _Overlay(base.prior)

    def apply(self, delta: GraphDelta) -> None:
        for row_id, node_id, node_kind, node_authority, summary in delta.nodes:
            self.kind.set(row_id, node_kind)
            self.authority.set(row_id, node_authority)
            self.public.set(row_id, node_id)
            self.by_public.set(node_id, row_id)
            if summary is not None:
                self.by_summary.set(summary, row_id)
        out, inc = self.out, self.inc
        out_top, inc_top, own_out, own_inc = out.top, inc.top, out.own, inc.own
        for op, a, b, value in delta.ops:
            if op == "edge":  # the common case inlined: a maintain run sets a million
                (out_top[a] if a in own_out else out.writable(a))[b] = value
                (inc_top[b] if b in own_inc else inc.writable(b))[a] = value
            elif op == "drop":
                out.unset(a, b)
                inc.unset(b, a)
            elif op == "gone":
                self._drop_node(a)
            elif op == "prior":
                self.prior.set(a, value)

    def _drop_node(self, row_id: int) -> None:
        for target in list(self.out.current(row_id) or ()):
            self.inc.unset(target, row_id)
        for source in list(self.inc.current(row_id) or ()):
            self.out.unset(source, row_id)
        self.out.remove(row_id)
        self.inc.remove(row_id)
        self.authority.pop(row_id)
        if self.kind.pop(row_id) == "summary":
            summaries = self.by_summary.made()
            for summary in [s for s, n in summaries.items() if n == row_id]:
                self.by_summary.pop(summary)
        public = self.public.pop(row_id)
        if public is not None:
            self.by_public.pop(public)
        self.prior.pop(row_id)

    def state(self, epoch: int) -> GraphState:
        return GraphState(
            epoch,
            self.out.rows(),
            self.inc.rows(),
            self.authority.made(),
            self.kind.made(),
            self.public.made(),
            self.by_public.made(),
            self.by_summary.made(),
            self.prior.made(),
        )


def next_state(base: GraphState, deltas: Iterable[GraphDelta], epoch: int) -> GraphState:
    """``base`` with ``deltas`` applied in order, as the state at ``epoch`` (``base`` untouched).

    The collector is paused meanwhile: the copy allocates a row per touched node, and
    every young collection it triggered walked the new outer maps (100k entries each
    at 100k nodes); at a maintain run's rate that was most of the cost. Nothing made
    here is cyclic.

    A run of deltas that only set and drop edges, more of them than a 256th of the
    graph's edges (a maintain run's decay and prune), is applied to packed arrays at
    once (``_bulk``) rather than row by row.
    """
    with _COLLECTOR.paused():
        state = base
        for bulk, run in _runs(list(deltas), _edge_total(base.out) // 256):
            if bulk:
                state = _bulk(state, run, epoch)
            else:
                made = _Next(state)
                for delta in run:
                    made.apply(delta)
                state = made.state(epoch)
        return state if state is not base else replace(base, epoch=epoch)


BULK_MIN: Final = 4_096
"""Edge writes from which a run of edge-only deltas is applied to packed arrays at once."""


def _runs(deltas: list[GraphDelta], least: int) -> Iterator[tuple[bool, list[GraphDelta]]]:
    """``deltas`` cut into runs, in order: (applied in bulk, the run)."""
    run: list[GraphDelta] = []
    edge_only = True
    for delta in deltas:
        this = not delta.nodes and all(op[0] in _EDGE_OPS for op in delta.ops)
        if run and this != edge_only:
            yield _bulky(edge_only, run, least), run
            run = []
        run.append(delta)
        edge_only = this
    if run:
        yield _bulky(edge_only, run, least), run


_EDGE_OPS: Final = frozenset(("edge", "drop"))


def _bulky(edge_only: bool, run: list[GraphDelta], least: int) -> bool:
    return edge_only and sum(len(d.ops) for d in run) >= max(BULK_MIN, least)


def _edge_total(rows: Mapping[int, dict[int, float]]) -> int:
    """About how many edges ``rows`` hold (its packed base's count: no pass over rows)."""
    base = rows.base if isinstance(rows, Layered) else rows
    return base.edge_count if isinstance(base, PackedRows) else 0


def _packed_rows(rows: Mapping[int, dict[int, float]]) -> PackedRows:
    """``rows`` as packed arrays (a layered map's changes folded into its base)."""
    if isinstance(rows, PackedRows):
        return rows
    if isinstance(rows, Layered) and isinstance(rows.base, PackedRows):
        return rows.base.merged(rows.top, _GONE)
    items = [(k, o, w) for k, row in rows.items() for o, w in row.items()]
    return PackedRows.from_edges(
        np.fromiter((i[0] for i in items), dtype=np.int64, count=len(items)),
        np.fromiter((i[1] for i in items), dtype=np.int64, count=len(items)),
        np.fromiter((i[2] for i in items), dtype=np.float64, count=len(items)),
    )


def _bulk(state: GraphState, deltas: list[GraphDelta], epoch: int) -> GraphState:
    """``state`` with edge-only ``deltas`` applied to its outgoing rows as arrays, the
    incoming rows made again from them; the node maps are shared as they are."""
    ops = [op for delta in deltas for op in delta.ops]
    count = len(ops)
    out, inc = _packed_rows(state.out).with_changes(
        np.fromiter((op[1] for op in ops), dtype=np.int64, count=count),
        np.fromiter((op[2] for op in ops), dtype=np.int64, count=count),
        np.fromiter((op[3] for op in ops), dtype=np.float64, count=count),
        np.fromiter((op[0] == "drop" for op in ops), dtype=np.bool_, count=count),
        state.inc,
    )
    return replace(state, epoch=epoch, out=out, inc=inc, _adding=threading.Lock())
