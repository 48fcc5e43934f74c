"""The graph's hot mirror: immutable states swapped whole, moved forward by committed deltas.

``Graph`` mirrors the ``nodes`` and ``edges`` tables as forward and reverse
adjacency maps, so the neighbours of a node in either direction cost O(degree).
It holds one ``GraphState`` at a time, tagged with the ``graph_epoch`` it
reflects. A reader takes the state for its snapshot's epoch (``refresh``) and
uses it throughout; nothing in a published state changes, so a reader sees a
write whole or not at all, without a lock.

Writers of this process move the mirror forward instead of making it reload:
each committed transaction is a ``Step`` (epoch ``before`` -> ``after`` and the
``GraphDelta`` it wrote), and ``advance`` swaps in a copy with the step applied
(outer maps copied, each touched adjacency row copied once). ``teach`` and
``learn`` do so right after their commit; ``maintain`` for every chunk it
commits, from its own thread or from the child process it runs in. Steps may
arrive out of order (a teach that waited for a maintain chunk's write lock
commits right after it, and may apply first): a step ahead of the mirror waits
in ``_early`` until the gap is filled. While such a writer is at work
(``following``), a reader whose snapshot is a step ahead of the mirror waits
briefly for that step rather than reload a million edges; a write from another
process (``brain sync``, another daemon) is never announced, so the mirror
reloads whole for it as before. The last few states stay at hand (``_recent``)
for readers whose snapshot began just before a step was applied.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, cast

from brain.graph.nodes import EdgeWrite, graph_epoch
from brain.store.connection import Store

__all__ = ["Graph", "GraphDelta", "GraphState", "NodeEntry", "Step"]

NodeEntry = tuple[int, str, str, str, int | None]
"""A node as the mirror keeps it: (row id, public id, kind, authority, summary row)."""

HISTORY: Final = 8
"""States kept for readers whose snapshot is a few steps behind the newest one."""
FOLLOW_WAIT_S: Final = 2.0
"""How long a reader ahead of the mirror waits for a following writer's step."""
_EARLY_LIMIT: Final = 100_000
"""Steps ahead of the mirror kept at most (past that a reload is cheaper anyway)."""


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
            _add_nodes(self, [(int(row[0]), str(row[1]), "summary", str(row[2]), summary_row)])
        return int(row[0])


def _add_nodes(state: GraphState, nodes: Sequence[NodeEntry]) -> None:
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


class _Rows(Mapping[int, dict[int, float]]):
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
        if isinstance(rows, _Rows):
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
            return _Rows(self.base, self.top)
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
            _add_nodes(self.node_maps(), delta.nodes)
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


class Graph:
    """The hot mirror of one database's graph; safe to share between threads.

    Readers take a state once (``refresh`` returns it) and use it throughout;
    writers of this process go through ``apply``/``advance`` after their
    transaction commits, which swaps in a copy with the write applied, so a
    reader never sees half of one.
    """

    def __init__(self) -> None:
        # Serialises swaps (and in-place additions with them); readers wait on it for steps.
        self._lock = threading.Condition()
        self._loading = threading.Lock()  # one reload from the tables at a time
        self._state = GraphState()
        self._recent: OrderedDict[int, GraphState] = OrderedDict()
        self._early: dict[int, Step] = {}
        self._followers = 0

    # The current state's maps, for writers (under the engine's write lock) and tests.

    @property
    def out(self) -> Mapping[int, dict[int, float]]:
        """Outgoing edges of the current state: source -> {target: weight}."""
        return self._state.out

    @property
    def inc(self) -> Mapping[int, dict[int, float]]:
        """Incoming edges of the current state: target -> {source: weight}."""
        return self._state.inc

    @property
    def authority(self) -> dict[int, str]:
        """Node row id -> authority, in the current state."""
        return self._state.authority

    @property
    def kind(self) -> dict[int, str]:
        """Node row id -> kind, in the current state."""
        return self._state.kind

    @property
    def public(self) -> dict[int, str]:
        """Node row id -> public id, in the current state."""
        return self._state.public

    @property
    def by_public(self) -> dict[str, int]:
        """Public id -> node row id, in the current state."""
        return self._state.by_public

    @property
    def by_summary(self) -> dict[int, int]:
        """Summary row id -> its node's row id, in the current state."""
        return self._state.by_summary

    @property
    def prior(self) -> dict[int, float]:
        """Learned priors of the current state's nodes that have one (absent: 0)."""
        return self._state.prior

    @property
    def node_count(self) -> int:
        """Nodes in the mirror."""
        return len(self._state.kind)

    @property
    def edge_count(self) -> int:
        """Edges in the mirror."""
        return sum(len(targets) for targets in self._state.out.values())

    def snapshot(self) -> GraphState:
        """The current state (never changed afterwards; see ``GraphState``)."""
        return self._state

    def _at(self, epoch: int) -> GraphState | None:
        """The state at ``epoch`` if at hand (call with ``_lock`` held)."""
        if self._state.epoch == epoch:
            return self._state
        return self._recent.get(epoch)

    def refresh(self, store: Store) -> GraphState:
        """The state matching ``store``'s graph epoch, reloaded from the tables if needed.

        The epoch and the tables are read in the caller's transaction (a read
        connection's snapshot), so a reloaded state is one committed state. A
        snapshot one or more steps ahead of the mirror while a writer of this
        process is ``following`` waits (at most ``FOLLOW_WAIT_S``) for its steps;
        one older than every state kept gets the newest (whole) state: a node it
        finds there that its snapshot lacks is one its row lookups leave out.
        """
        epoch = graph_epoch(store)
        with self._lock:
            deadline: float | None = None
            while True:
                found = self._at(epoch)
                if found is None and self._early:
                    self._chain(until=epoch)  # steps held for a reader that needs them
                    found = self._at(epoch)
                if found is not None:
                    return found
                current = self._state.epoch
                if current is not None and current > epoch:
                    # The snapshot is older than every state kept (the mirror moved on
                    # meanwhile): the newest whole state, rather than reload the past.
                    return self._state
                if current is None or self._followers == 0:
                    break
                deadline = deadline or time.monotonic() + FOLLOW_WAIT_S
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
        # One reload at a time: readers that need the same epoch find it loaded when
        # they get their turn, instead of each reloading the whole graph at once.
        with self._loading:
            with self._lock:
                found = self._at(epoch)
            if found is not None:
                return found
            return self._load(store, epoch)

    def _load(self, store: Store, epoch: int) -> GraphState:
        """Read the whole graph from ``store`` (the snapshot at ``epoch``); publish it if newer."""
        out: dict[int, dict[int, float]] = {}
        inc: dict[int, dict[int, float]] = {}
        for source, target, weight in store.execute("SELECT source, target, weight FROM edges"):
            out.setdefault(source, {})[target] = weight
            inc.setdefault(target, {})[source] = weight
        authority: dict[int, str] = {}
        kind: dict[int, str] = {}
        public: dict[int, str] = {}
        by_summary: dict[int, int] = {}
        prior = {
            int(r[0]): float(r[1])
            for r in store.execute("SELECT id, prior FROM nodes WHERE prior != 0")
        }
        for row_id, node_id, node_kind, node_authority, summary in store.execute(
            "SELECT id, node_id, kind, authority, summary_id FROM nodes"
        ):
            authority[row_id] = node_authority
            kind[row_id] = node_kind
            public[row_id] = node_id
            if summary is not None:
                by_summary[int(summary)] = row_id
        loaded = GraphState(
            epoch,
            out,
            inc,
            authority,
            kind,
            public,
            {v: k for k, v in public.items()},
            by_summary,
            prior,
        )
        with self._lock:
            current = self._state.epoch
            # A reader whose snapshot is older than the mirror gets its own state; the
            # mirror never goes back.
            if current is None or current < epoch:
                self._publish(loaded)
                self._chain()
            self._lock.notify_all()
        return loaded

    def _publish(self, state: GraphState) -> None:
        """Make ``state`` the current one (call with ``_lock`` held)."""
        self._state = state
        if state.epoch is not None:
            self._recent[state.epoch] = state
            while len(self._recent) > HISTORY:
                self._recent.popitem(last=False)

    def _chain(self, until: int | None = None) -> bool:
        """Apply the held steps that follow the current state (up to epoch ``until``)
        in one swap."""
        state = self._state
        epoch = state.epoch
        if epoch is None:
            return False
        chain: list[Step] = []
        while (until is None or epoch < until) and (step := self._early.get(epoch)) is not None:
            del self._early[epoch]
            if step.after <= epoch:
                continue
            chain.append(step)
            epoch = step.after
        for stale in [b for b in self._early if b < epoch]:
            del self._early[stale]
        if not chain:
            return False
        # The copy allocates a row per touched node, and every young collection it
        # triggers would walk the new outer maps (100k entries each at 100k nodes):
        # at a maintain run's rate that was most of the cost. Nothing here is cyclic.
        with _COLLECTOR.paused():
            made = _Next(state)
            for step in chain:
                made.apply(step.delta)
            self._publish(made.state(epoch))
        return True

    @contextlib.contextmanager
    def following(self) -> Iterator[None]:
        """Within the block this process commits graph writes and ``advance``s the mirror
        with each: a reader whose snapshot shows one before its step arrives waits for it."""
        with self._lock:
            self._followers += 1
        try:
            yield
        finally:
            with self._lock:
                self._followers -= 1
                self._lock.notify_all()

    def advance(self, steps: Iterable[Step], *, now: bool = True) -> bool:
        """Apply this process's committed steps (in one swap when they follow the mirror).

        A step the mirror already covers (it reloaded since) is dropped. One ahead of
        it waits for the steps between while a writer is ``following``; otherwise
        another process wrote in between, and the mirror is marked stale (the next
        ``refresh`` reloads). Without ``now`` the steps are only held: the first
        reader that needs them applies them, so a run of many small chunks costs one
        copy of the outer maps per read rather than one per chunk. Returns whether
        the mirror moved.
        """
        with self._lock:
            if self._state.epoch is None:
                return False  # nothing loaded: the next refresh reloads anyway
            current = self._state.epoch
            for step in steps:
                if step.before > current and self._followers == 0:
                    # Nothing of this process will fill the gap: another process wrote.
                    self._state = replace(self._state, epoch=None)
                    self._early.clear()
                    return False
                if step.before >= current:
                    self._early[step.before] = step
            if len(self._early) > _EARLY_LIMIT:
                self._early.clear()
            moved = self._chain() if now else False
            self._lock.notify_all()
            return moved

    def invalidate(self) -> None:
        """Forget the loaded state: the next ``refresh`` reloads."""
        with self._lock:
            self._state = replace(self._state, epoch=None)
            self._recent.clear()
            self._early.clear()
            self._lock.notify_all()

    def apply(
        self,
        before: int,
        after: int,
        *,
        nodes: Sequence[NodeEntry] = (),
        edges: Sequence[EdgeWrite] = (),
        priors: dict[int, float] | None = None,
    ) -> bool:
        """Apply this process's committed write (epoch ``before`` -> ``after``) in one swap.

        ``nodes``: inserted (row id, public id, kind, authority, summary row);
        ``edges``: written weights (weight 0 removes nothing: it is stored); ``priors``:
        written priors. See ``advance``; returns whether the mirror moved.
        """
        delta = GraphDelta(nodes=list(nodes))
        for e in edges:
            delta.set_edge(e.source, e.target, e.weight)
        for row_id, prior in (priors or {}).items():
            delta.set_prior(row_id, prior)
        return self.advance([Step(before, after, delta)])

    def summary_node(self, store: Store, summary_row: int) -> int | None:
        """The current state's ``summary_node`` (see ``GraphState.summary_node``)."""
        return self._state.summary_node(store, summary_row)

    def neighbours(self, row_id: int) -> dict[int, float]:
        """Outgoing edges of a node in the current state."""
        return self._state.out.get(row_id, {})
