"""The retrieval graph: nodes and weighted directed edges in SQLite, hot in memory.

Nodes are retrievable units: taught facts (``teaching``), ``correction`` and
``directive`` nodes, ``chunk`` nodes from workspace files, and ``summary`` nodes,
one per summary the context layer makes (same transaction; a summary node keeps
no text of its own, it reads the summary's). Edges carry a weight in [-1, 1]:
positive edges pass activation on, negative ones inhibit.

``Graph`` mirrors the tables as forward and reverse adjacency maps, so the
neighbours of a node in either direction cost O(degree). Every write bumps
``graph_epoch`` in ``meta`` inside its transaction; the mirror applies its own
process's writes and reloads whole when the epoch moved any other way (another
process, e.g. ``brain maintain``, wrote), so it never serves stale edges.

Authority decides what maintenance and learning may touch: ``constitutional``
nodes never change (no decay, prune, merge or learning on their edges),
``canonical`` nodes decay at half speed and are not pruned, ``overlay`` is the
rest.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, cast

import orjson

from brain.clock import now_iso
from brain.errors import InvalidInput, NotFound
from brain.store.connection import Store
from brain.vectors.writes import enqueue

NodeKind = Literal["teaching", "correction", "directive", "chunk", "summary"]
Authority = Literal["constitutional", "canonical", "overlay"]
NODE_KINDS: Final[tuple[NodeKind, ...]] = (
    "teaching",
    "correction",
    "directive",
    "chunk",
    "summary",
)
AUTHORITIES: Final[tuple[Authority, ...]] = ("constitutional", "canonical", "overlay")
AUTHORITY_RANK: Final[dict[str, int]] = {a: i for i, a in enumerate(AUTHORITIES)}
"""Context blocks list constitutional nodes first, then canonical, then overlay."""

_EPOCH_KEY: Final = "graph_epoch"


def new_node_id() -> str:
    """A fresh public node id: ``nd_`` + 16 hex characters."""
    return "nd_" + secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class Node:
    """A stored node (``text`` is the summary's text for summary nodes)."""

    row_id: int
    id: str
    kind: NodeKind
    text: str
    authority: Authority
    source: str | None
    line_start: int | None
    line_end: int | None
    metadata: dict[str, Any]
    created_at: str
    last_fired_at: str | None
    fire_count: int
    summary_row: int | None = None
    suppressed: bool = False


@dataclass(frozen=True, slots=True)
class NewNode:
    """A node about to be stored."""

    kind: NodeKind
    text: str
    authority: Authority = "overlay"
    source: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    dedup_key: str | None = None


_NODE_COLUMNS: Final = (
    "n.id, n.node_id, n.kind, coalesce(n.content, s.content, ''), n.authority, n.source, "
    "n.line_start, n.line_end, n.metadata, n.created_at, n.last_fired_at, n.fire_count, "
    "n.summary_id, s.suppressed_at IS NOT NULL OR s.hidden_by IS NOT NULL"
)
_NODE_FROM: Final = "FROM nodes n LEFT JOIN summaries s ON s.id = n.summary_id"


def _node(row: Sequence[Any]) -> Node:
    return Node(
        row_id=int(row[0]),
        id=str(row[1]),
        kind=cast(NodeKind, row[2]),
        text=str(row[3]),
        authority=cast(Authority, row[4]),
        source=row[5],
        line_start=row[6],
        line_end=row[7],
        metadata=orjson.loads(row[8]) if row[8] else {},
        created_at=str(row[9]),
        last_fired_at=row[10],
        fire_count=int(row[11]),
        summary_row=row[12],
        suppressed=bool(row[13]),
    )


def get_nodes(store: Store, row_ids: Iterable[int]) -> dict[int, Node]:
    """Nodes by row id (missing ids are left out)."""
    ids = orjson.dumps(list(row_ids))
    rows = store.execute(
        f"SELECT {_NODE_COLUMNS} {_NODE_FROM} "  # noqa: S608 (constant fragments)
        "WHERE n.id IN (SELECT value FROM json_each(?))",
        (ids,),
    )
    return {int(r[0]): _node(r) for r in rows}


def find_node(store: Store, node_id: str) -> Node:
    """The node with public id ``node_id``; NotFound otherwise."""
    row = store.one(
        f"SELECT {_NODE_COLUMNS} {_NODE_FROM} WHERE n.node_id = ?",
        (node_id,),
    )
    if row is None:
        raise NotFound(f"no node {node_id!r}", id=node_id)
    return _node(row)


def insert_summary_node(store: Store, node_id: str, summary_row_id: int, created_at: str) -> None:
    """The graph node of a new summary (inside the caller's transaction).

    It reads the summary's text and vector, so it costs one row; the summary's
    public id is its node id.
    """
    store.execute(
        "INSERT INTO nodes (node_id, kind, summary_id, created_at) VALUES (?, 'summary', ?, ?)",
        (node_id, summary_row_id, created_at),
    )


def add_missing_summary_nodes(store: Store) -> int:
    """Give each summary with no graph node its node (``brain doctor``'s repair); how many.

    A summary whose id is already some node's id is left alone (that node is not its own).
    """
    store.execute(
        "INSERT INTO nodes (node_id, kind, summary_id, created_at) "
        "SELECT s.summary_id, 'summary', s.id, s.created_at FROM summaries s "
        "WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.summary_id = s.id) "
        "AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.node_id = s.summary_id)"
    )
    return int(store.changes())


def insert_node(store: Store, new: NewNode, *, embed: bool = True) -> tuple[int, str, bool]:
    """Store a node (inside the caller's transaction); (row id, public id, created).

    A node with the same ``dedup_key`` is returned instead of storing a double
    (created False). The node is queued for embedding unless ``embed`` is False.
    """
    if new.kind == "summary":
        raise InvalidInput("kind", "summary nodes are made by compaction")
    if new.authority not in AUTHORITIES:
        raise InvalidInput("authority", f"must be one of {', '.join(AUTHORITIES)}")
    if not new.text.strip():
        raise InvalidInput("content", "must not be empty")
    if new.dedup_key is not None:
        row = store.one("SELECT id, node_id FROM nodes WHERE dedup_key = ?", (new.dedup_key,))
        if row is not None:
            return int(row[0]), str(row[1]), False
    node_id = new_node_id()
    row = store.one(
        "INSERT INTO nodes (node_id, kind, content, authority, source, line_start, line_end, "
        "metadata, dedup_key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            node_id,
            new.kind,
            new.text,
            new.authority,
            new.source,
            new.line_start,
            new.line_end,
            orjson.dumps(new.metadata).decode(),
            new.dedup_key,
            now_iso(),
        ),
    )
    assert row is not None
    row_id = int(row[0])
    if embed:
        enqueue(store, "node", [row_id])
    return row_id, node_id, True


def bump_epoch(store: Store) -> int:
    """Mark the graph changed (inside the writing transaction); the new epoch."""
    row = store.one(
        "INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE "
        "SET value = CAST(value AS INTEGER) + 1 RETURNING value",
        (_EPOCH_KEY,),
    )
    assert row is not None
    return int(row[0])


def graph_epoch(store: Store) -> int:
    """The stored graph epoch (0 before the first write)."""
    value = store.scalar("SELECT value FROM meta WHERE key = ?", (_EPOCH_KEY,))
    return 0 if value is None else int(value)


def clamp_weight(weight: float) -> float:
    """``weight`` bounded to [-1, 1]."""
    return max(-1.0, min(1.0, float(weight)))


@dataclass(frozen=True, slots=True)
class EdgeWrite:
    """An edge to set: its weight replaces any existing one."""

    source: int
    target: int
    weight: float
    kind: str


@dataclass(frozen=True, slots=True)
class GraphState:
    """One consistent state of the mirror: what the tables held at ``epoch``.

    Never changed once published, so a reader holding one (a query's traversal)
    sees every write either whole or not at all, without any lock. Writers make
    a new state and swap it in (``Graph.apply``). The one exception is additive:
    a summary node first seen by a search is added in place (``summary_node``);
    it existed in the tables at this epoch already, the mirror only learns of it.
    """

    epoch: int | None = None
    out: dict[int, dict[int, float]] = field(default_factory=dict)
    """Outgoing edges: source -> {target: weight}."""
    inc: dict[int, dict[int, float]] = field(default_factory=dict)
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


def _add_nodes(state: GraphState, nodes: Sequence[tuple[int, str, str, str, int | None]]) -> None:
    """Add node entries to ``state``'s maps in place (only to a state not yet published,
    or for nodes that already exist at its epoch)."""
    for row_id, node_id, node_kind, node_authority, summary in nodes:
        state.kind[row_id] = node_kind
        state.authority[row_id] = node_authority
        state.public[row_id] = node_id
        state.by_public[node_id] = row_id
        if summary is not None:
            state.by_summary[summary] = row_id


class Graph:
    """The hot mirror of one database's graph; safe to share between threads.

    It holds one ``GraphState`` at a time. Readers take it once (``refresh``
    returns it) and use it throughout; writers go through ``apply`` after their
    transaction commits, which swaps in a copy with the write applied, so a
    reader never sees half of one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # serialises swaps (and in-place additions with them)
        self._loading = threading.Lock()  # one reload from the tables at a time
        self._state = GraphState()

    # The current state's maps, for writers (under the engine's write lock) and tests.

    @property
    def out(self) -> dict[int, dict[int, float]]:
        """Outgoing edges of the current state: source -> {target: weight}."""
        return self._state.out

    @property
    def inc(self) -> dict[int, dict[int, float]]:
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

    def refresh(self, store: Store) -> GraphState:
        """The state matching ``store``'s graph epoch, reloaded from the tables if needed.

        The epoch and the tables are read in the caller's transaction (a read
        connection's snapshot), so a reloaded state is one committed state.
        """
        epoch = graph_epoch(store)
        current = self._state
        if current.epoch == epoch:
            return current
        # One reload at a time: readers that need the same epoch find it loaded when
        # they get their turn, instead of each reloading the whole graph at once.
        with self._loading:
            current = self._state
            if current.epoch == epoch:
                return current
            return self._load(store, epoch)

    def _load(self, store: Store, epoch: int) -> GraphState:
        """Read the whole graph from ``store`` (the snapshot at ``epoch``) and publish it."""
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
            self._state = loaded
        return loaded

    def invalidate(self) -> None:
        """Forget the loaded state: the next ``refresh`` reloads."""
        with self._lock:
            self._state = replace(self._state, epoch=None)

    def apply(
        self,
        before: int,
        after: int,
        *,
        nodes: Sequence[tuple[int, str, str, str, int | None]] = (),
        edges: Sequence[EdgeWrite] = (),
        priors: dict[int, float] | None = None,
    ) -> bool:
        """Apply this process's committed write (epoch ``before`` -> ``after``) in one swap.

        ``nodes``: inserted (row id, public id, kind, authority, summary row);
        ``edges``: written weights (weight 0 removes nothing: it is stored); ``priors``:
        written priors. Applied when the mirror reflected ``before``: a copy with the
        write becomes the state. Otherwise the mirror is marked stale (reload later).
        Returns whether it was applied.
        """
        with self._lock:
            state = self._state
            if state.epoch is None or state.epoch != before or after != before + 1:
                self._state = replace(state, epoch=None)
                return False
            out, inc = dict(state.out), dict(state.inc)
            for e in edges:  # copy each touched row once, then write into the copy
                if out.get(e.source) is state.out.get(e.source):
                    out[e.source] = dict(state.out.get(e.source, {}))
                if inc.get(e.target) is state.inc.get(e.target):
                    inc[e.target] = dict(state.inc.get(e.target, {}))
                out[e.source][e.target] = e.weight
                inc[e.target][e.source] = e.weight
            new = GraphState(
                after,
                out,
                inc,
                dict(state.authority) if nodes else state.authority,
                dict(state.kind) if nodes else state.kind,
                dict(state.public) if nodes else state.public,
                dict(state.by_public) if nodes else state.by_public,
                dict(state.by_summary) if nodes else state.by_summary,
                {**state.prior, **priors} if priors else state.prior,
            )
            _add_nodes(new, nodes)
            self._state = new
            return True

    def summary_node(self, store: Store, summary_row: int) -> int | None:
        """The current state's ``summary_node`` (see ``GraphState.summary_node``)."""
        return self._state.summary_node(store, summary_row)

    def neighbours(self, row_id: int) -> dict[int, float]:
        """Outgoing edges of a node in the current state."""
        return self._state.out.get(row_id, {})


def write_edges(store: Store, edges: Sequence[EdgeWrite]) -> None:
    """Upsert edges (inside the caller's transaction); weights are clamped to [-1, 1].

    Edges touching a node that no longer exists are skipped: callers pick their
    endpoints from a mirror read before the transaction, and another process (``brain
    maintain`` merging or pruning) may have deleted one in between.
    """
    edges = [e for e in edges if e.source != e.target]
    if not edges:
        return
    ends = sorted({e.source for e in edges} | {e.target for e in edges})
    live = {
        int(r[0])
        for r in store.execute(
            "SELECT id FROM nodes WHERE id IN (SELECT value FROM json_each(?))",
            (orjson.dumps(ends).decode(),),
        )
    }
    stamp = now_iso()
    store.executemany(
        "INSERT INTO edges (source, target, weight, kind, updated_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (source, target) DO UPDATE SET weight = excluded.weight, "
        "kind = excluded.kind, updated_at = excluded.updated_at",
        [
            (e.source, e.target, clamp_weight(e.weight), e.kind, stamp)
            for e in edges
            if e.source in live and e.target in live
        ],
    )


def clamped(edges: Sequence[EdgeWrite]) -> list[EdgeWrite]:
    """The edges as stored: weights clamped, self-loops dropped."""
    return [
        EdgeWrite(e.source, e.target, clamp_weight(e.weight), e.kind)
        for e in edges
        if e.source != e.target
    ]
