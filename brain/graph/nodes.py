"""The retrieval graph: nodes and weighted directed edges in SQLite, hot in memory.

Nodes are retrievable units: taught facts (``teaching``), ``correction`` and
``directive`` nodes, ``chunk`` nodes from workspace files, and ``summary`` nodes,
one per summary the context layer makes (same transaction; a summary node keeps
no text of its own, it reads the summary's). Edges carry a weight in [-1, 1]:
positive edges pass activation on, negative ones inhibit.

Every write bumps ``graph_epoch`` in ``meta`` inside its transaction: the hot
mirror (``brain.graph.mirror``) follows it, so it never serves stale edges.

Authority decides what maintenance and learning may touch: ``constitutional``
nodes never change (no decay, prune, merge or learning on their edges),
``canonical`` nodes decay at half speed and are not pruned, ``overlay`` is the
rest.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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
