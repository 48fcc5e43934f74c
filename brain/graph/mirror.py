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
(``brain.graph.states.next_state``: it costs what the step changed). ``teach`` and
``learn`` do so right after their commit; ``maintain`` for every chunk it
commits, from its own thread or from the child process it runs in. Steps may
arrive out of order (a teach that waited for a maintain chunk's write lock
commits right after it, and may apply first): a step ahead of the mirror waits
in ``_early`` until the gap is filled. While such a writer is at work
(``following``), a reader whose snapshot is ahead of the mirror never waits for
the step in transit: it gets the newest complete state (the mirror is a cache of
learned weights; its row lookups leave out nodes the state lacks). Only this
process's own ``teach``/``learn`` must be seen by the next query, so ``apply``
returns once the mirror shows the write (the writer waits for a step before it,
not the readers). A write from another process (``brain sync``, another daemon)
is never announced: without a follower the mirror reloads whole for it at once,
and with one, once the mirror has been behind a reader for ``FOLLOW_WAIT_S``
without moving. The last few states stay at hand (``_recent``) for readers whose
snapshot began just before a step was applied.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Final

from brain.graph.nodes import EdgeWrite, graph_epoch
from brain.graph.packed import load_edges
from brain.graph.states import GraphDelta, GraphState, NodeEntry, Step, next_state
from brain.store.connection import Store

__all__ = ["Graph", "GraphDelta", "GraphState", "NodeEntry", "Step"]

HISTORY: Final = 8
"""States kept for readers whose snapshot is a few steps behind the newest one."""
FOLLOW_WAIT_S: Final = 5.0
"""How long the mirror may stay behind a reader while a writer follows (then it reloads),
and how long ``apply`` waits for the steps before its own."""
_EARLY_LIMIT: Final = 100_000
"""Steps ahead of the mirror kept at most (past that a reload is cheaper anyway)."""


class Graph:
    """The hot mirror of one database's graph; safe to share between threads.

    Readers take a state once (``refresh`` returns it) and use it throughout;
    writers of this process go through ``apply``/``advance`` after their
    transaction commits, which swaps in a copy with the write applied, so a
    reader never sees half of one.
    """

    def __init__(self, follow_wait_s: float = FOLLOW_WAIT_S) -> None:
        # Serialises swaps (and in-place additions with them); ``apply`` waits on it.
        self._lock = threading.Condition()
        self._follow_wait_s = follow_wait_s
        # Since when a reader has found the mirror behind its snapshot (None: not since
        # the last swap): a step that never comes (another process wrote) ends in a reload.
        self._behind_since: float | None = None
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
    def authority(self) -> Mapping[int, str]:
        """Node row id -> authority, in the current state."""
        return self._state.authority

    @property
    def kind(self) -> Mapping[int, str]:
        """Node row id -> kind, in the current state."""
        return self._state.kind

    @property
    def public(self) -> Mapping[int, str]:
        """Node row id -> public id, in the current state."""
        return self._state.public

    @property
    def by_public(self) -> Mapping[str, int]:
        """Public id -> node row id, in the current state."""
        return self._state.by_public

    @property
    def by_summary(self) -> Mapping[int, int]:
        """Summary row id -> its node's row id, in the current state."""
        return self._state.by_summary

    @property
    def prior(self) -> Mapping[int, float]:
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
        """The state for ``store``'s graph epoch, reloaded from the tables if needed.

        The epoch and the tables are read in the caller's transaction (a read
        connection's snapshot), so a reloaded state is one committed state. Steps
        held for the snapshot are applied first. A snapshot still ahead of the
        mirror while a writer of this process is ``following`` (its step is in
        transit) gets the newest state at once, as does one older than every
        state kept: nodes the state has and the snapshot lacks, or the reverse,
        are left out by the query's row lookups. Never waits for a writer; it
        reloads when no writer of this process follows (another process wrote),
        or when the mirror has been behind for ``FOLLOW_WAIT_S`` without moving.
        """
        epoch = graph_epoch(store)
        with self._lock:
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
            if current is not None and self._followers > 0:
                now = time.monotonic()
                if self._behind_since is None:
                    self._behind_since = now
                if now - self._behind_since < self._follow_wait_s:
                    # A step in transit (a maintain chunk committed in the child): the
                    # newest complete state rather than wait for it.
                    return self._state
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
        out = load_edges(store)
        inc = out.transposed()
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
        self._behind_since = None
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
        self._publish(next_state(state, [step.delta for step in chain], epoch))
        return True

    @contextlib.contextmanager
    def following(self) -> Iterator[None]:
        """Within the block this process commits graph writes and ``advance``s the mirror
        with each: a reader whose snapshot shows one before its step arrives gets the
        newest state instead of reloading the whole graph."""
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

        Returns once the next ``refresh`` shows the write (the next query must see
        this process's teach or learn, and readers do not wait for steps): a step
        that committed after one still in transit (a maintain chunk's) waits here
        for it, at most ``FOLLOW_WAIT_S``, after which the mirror is marked stale.
        """
        delta = GraphDelta(nodes=list(nodes))
        for e in edges:
            delta.set_edge(e.source, e.target, e.weight)
        for row_id, prior in (priors or {}).items():
            delta.set_prior(row_id, prior)
        moved = self.advance([Step(before, after, delta)])
        with self._lock:
            deadline = time.monotonic() + self._follow_wait_s
            while (current := self._state.epoch) is not None and current < after:
                left = deadline - time.monotonic()
                if left <= 0:
                    # The steps before ours never came: the next refresh reloads.
                    self._state = replace(self._state, epoch=None)
                    self._early.clear()
                    return moved
                self._lock.wait(left)
                moved = True
        return moved

    @property
    def held(self) -> int:
        """Steps received but not applied yet (waiting for those before them, or held)."""
        with self._lock:
            return len(self._early)

    def summary_node(self, store: Store, summary_row: int) -> int | None:
        """The current state's ``summary_node`` (see ``GraphState.summary_node``)."""
        return self._state.summary_node(store, summary_row)

    def neighbours(self, row_id: int) -> dict[int, float]:
        """Outgoing edges of a node in the current state."""
        return self._state.out.get(row_id, {})
