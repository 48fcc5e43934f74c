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
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

import orjson

from brain.clock import now_iso
from brain.errors import InvalidInput, NotFound
from brain.store.connection import Store

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
        store.execute(
            "INSERT OR IGNORE INTO embed_queue (kind, row_id) VALUES ('node', ?)", (row_id,)
        )
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


class Graph:
    """The hot mirror of one database's graph; safe to share between threads.

    Readers take a consistent snapshot of the maps under the lock only to look
    neighbours up; writers go through ``write_edges``/``note_nodes`` after their
    transaction commits.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._epoch: int | None = None
        self.out: dict[int, dict[int, float]] = {}
        """Outgoing edges: source -> {target: weight}."""
        self.inc: dict[int, dict[int, float]] = {}
        """Incoming edges: target -> {source: weight}."""
        self.authority: dict[int, str] = {}
        self.kind: dict[int, str] = {}
        self.public: dict[int, str] = {}
        self.by_public: dict[str, int] = {}
        self.by_summary: dict[int, int] = {}
        """Summary row id -> its node's row id."""
        self.prior: dict[int, float] = {}
        """Learned priors of the nodes that have one (absent: 0)."""

    @property
    def node_count(self) -> int:
        """Nodes in the mirror."""
        return len(self.kind)

    @property
    def edge_count(self) -> int:
        """Edges in the mirror."""
        return sum(len(targets) for targets in self.out.values())

    def refresh(self, store: Store) -> None:
        """Reload from the tables if anything but this mirror's own writes changed them."""
        epoch = graph_epoch(store)
        with self._lock:
            if self._epoch == epoch:
                return
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
        with self._lock:
            self.out, self.inc = out, inc
            self.authority, self.kind, self.public = authority, kind, public
            self.by_public = {v: k for k, v in public.items()}
            self.by_summary = by_summary
            self.prior = prior
            self._epoch = epoch

    def invalidate(self) -> None:
        """Forget the loaded state: the next ``refresh`` reloads."""
        with self._lock:
            self._epoch = None

    def applied(self, before: int, after: int) -> bool:
        """Whether this mirror may apply its own write (epoch ``before`` -> ``after``).

        True when the mirror reflected ``before``: it then moves to ``after`` and the
        caller updates the maps. Otherwise the mirror is marked stale (reload later).
        """
        with self._lock:
            if self._epoch is not None and self._epoch == before and after == before + 1:
                self._epoch = after
                return True
            self._epoch = None
            return False

    def set_edges(self, edges: Sequence[EdgeWrite]) -> None:
        """Apply committed edge writes to the maps (weight 0 removes nothing: it is stored)."""
        with self._lock:
            for e in edges:
                self.out.setdefault(e.source, {})[e.target] = e.weight
                self.inc.setdefault(e.target, {})[e.source] = e.weight

    def set_priors(self, priors: dict[int, float]) -> None:
        """Apply committed prior writes to the mirror."""
        with self._lock:
            self.prior.update(priors)

    def add_nodes(self, nodes: Sequence[tuple[int, str, str, str, int | None]]) -> None:
        """Apply committed node inserts: (row id, public id, kind, authority, summary row)."""
        with self._lock:
            for row_id, node_id, node_kind, node_authority, summary in nodes:
                self.kind[row_id] = node_kind
                self.authority[row_id] = node_authority
                self.public[row_id] = node_id
                self.by_public[node_id] = row_id
                if summary is not None:
                    self.by_summary[summary] = row_id

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
        self.add_nodes([(int(row[0]), str(row[1]), "summary", str(row[2]), summary_row)])
        return int(row[0])

    def neighbours(self, row_id: int) -> dict[int, float]:
        """Outgoing edges of a node (a live view: do not keep it across writes)."""
        return self.out.get(row_id, {})


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
