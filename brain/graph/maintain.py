"""The graph's slow loop: health, decay, merge, prune, connect, scale.

Maintenance is never on the request path: ``brain maintain`` (or the daemon's
``maintain`` method) runs it now and then. It reads one snapshot of the graph
into memory, and each task plans its changes against that snapshot, applies
them to it (so later tasks see earlier ones, and a dry run reports what a real
run would do without writing anything), then writes them in bounded chunks:
each chunk is its own short transaction that bumps the graph epoch, so a daemon
serving the same database waits at most one chunk for the write lock and
reloads its mirror before its next answer.

Writes are conditional on the row being as the snapshot saw it (an edge's
``updated_at``; a node still existing, still without edges): a daemon may
learn, teach or query between two chunks, and maintenance then skips that row
rather than overwrite newer state with a value computed from older state.

Authority (``brain.graph.nodes``): constitutional nodes and every edge touching them
are never changed by any task; canonical nodes decay at half speed (an edge
touching one uses twice the half-life), are never pruned as nodes and never
merged (merging them would need an LLM's judgement); overlay is the rest.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
import orjson

from brain.clock import iso, parse
from brain.errors import InvalidInput
from brain.graph.nodes import Graph, bump_epoch, clamp_weight
from brain.graph.traces import expired_traces
from brain.progress import Progress, ignore
from brain.store.connection import Store
from brain.vectors.index import note_vectors_changed

TASKS: Final[tuple[str, ...]] = ("health", "decay", "merge", "prune", "connect", "scale")
"""Every task, in the order ``maintain`` runs them (``health`` only measures)."""

STRONG: Final = 0.5
"""Edges at or above this |weight| are strong..."""
HABITUAL: Final = 0.15
"""...at or above this habitual, below it dormant (positive edges; negative ones inhibit)."""

_LEARNING_KINDS: Final = ("teaching", "correction", "directive")
_MERGES_PER_TRANSACTION: Final = 50


@dataclass(frozen=True, slots=True)
class MaintainOptions:
    """Knobs of the tasks (the defaults suit a graph of a few thousand nodes)."""

    half_life_days: float = 14.0
    """Decay halves an edge's weight every this many days since it last changed."""
    min_decay: float = 1e-4
    """A decay smaller than this leaves the edge untouched (its time keeps accruing)."""
    merge_similarity: float = 0.95
    """Overlay nodes of one kind at least this similar are near-duplicates."""
    cofire_traces: int = 5
    """Nodes that fired in exactly the same traces, at least this many, are merged."""
    prune_below: float = 0.05
    """Edges weaker than this (|weight|) are deleted."""
    orphan_days: float = 30.0
    """An edgeless node is deleted only if neither made nor fired for this many days."""
    connect_k: int = 3
    """A learning node with no chunk neighbour is linked to this many chunks..."""
    connect_similarity: float = 0.3
    """...that are at least this similar (edge weight: the similarity, halved)."""
    scale_budget: float = 3.0
    """A node's positive outgoing weights are scaled down to sum to at most this."""
    chunk: int = 500
    """Row writes per transaction."""

    def __post_init__(self) -> None:
        # The engine checks its own ranges: ``brain maintain`` and scripts build
        # options without the protocol's validation, and an out-of-range knob
        # is not a harmless no-op (``prune_below`` 5 deletes every edge).
        for name in ("merge_similarity", "prune_below", "connect_similarity"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise InvalidInput(name, f"must be between 0 and 1, got {value}")
        for name in ("half_life_days", "orphan_days", "scale_budget"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidInput(name, f"must be a positive number, got {value}")
        if not (math.isfinite(self.min_decay) and 0.0 <= self.min_decay <= 1.0):
            raise InvalidInput("min_decay", f"must be between 0 and 1, got {self.min_decay}")
        for name, minimum in (("chunk", 1), ("cofire_traces", 1), ("connect_k", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InvalidInput(name, f"must be an integer of at least {minimum}, got {value}")


@dataclass(frozen=True, slots=True)
class Health:
    """The shape of the graph at one moment."""

    nodes: int
    edges: int
    nodes_by_kind: dict[str, int]
    nodes_by_authority: dict[str, int]
    edges_by_kind: dict[str, int]
    tiers: dict[str, int]
    """``strong``, ``habitual`` and ``dormant`` positive edges; ``inhibitory`` negative ones."""
    orphans: int
    """Nodes with no edge in either direction."""
    dormant_share: float
    cross_source_share: float
    """Edges whose ends differ in ``source`` or kind: how much the graph links across."""
    mean_abs_weight: float
    traces: int


@dataclass(frozen=True, slots=True)
class MaintainReport:
    """What a run measured and changed (or, dry, would change)."""

    health_before: Health
    health_after: Health
    tasks: dict[str, dict[str, Any]]
    dry_run: bool
    took_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return asdict(self)


# -- the snapshot ---------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    row_id: int
    node_id: str
    kind: str
    authority: str
    source: str | None
    created_at: str
    last_fired_at: str | None


@dataclass(slots=True)
class _Edge:
    weight: float
    kind: str
    updated_at: str


@dataclass(slots=True)
class _Snapshot:
    """Nodes and edges as read at the start, then as the tasks left them."""

    nodes: dict[int, _Node]
    edges: dict[tuple[int, int], _Edge]
    out: dict[int, set[int]] = field(default_factory=dict)
    inc: dict[int, set[int]] = field(default_factory=dict)
    traces: int = 0

    @classmethod
    def load(cls, store: Store) -> _Snapshot:
        nodes = {
            int(r[0]): _Node(int(r[0]), str(r[1]), str(r[2]), str(r[3]), r[4], str(r[5]), r[6])
            for r in store.execute(
                "SELECT id, node_id, kind, authority, source, created_at, last_fired_at FROM nodes"
            )
        }
        snap = cls(nodes, {})
        for source, target, weight, kind, updated in store.execute(
            "SELECT source, target, weight, kind, updated_at FROM edges"
        ):
            snap.put(int(source), int(target), _Edge(float(weight), str(kind), str(updated)))
        snap.traces = int(store.scalar("SELECT count(*) FROM traces"))
        return snap

    def put(self, source: int, target: int, edge: _Edge) -> None:
        self.edges[(source, target)] = edge
        self.out.setdefault(source, set()).add(target)
        self.inc.setdefault(target, set()).add(source)

    def drop(self, source: int, target: int) -> None:
        self.edges.pop((source, target), None)
        self.out.get(source, set()).discard(target)
        self.inc.get(target, set()).discard(source)

    def drop_node(self, row_id: int) -> None:
        for target in list(self.out.get(row_id, ())):
            self.drop(row_id, target)
        for source in list(self.inc.get(row_id, ())):
            self.drop(source, row_id)
        self.out.pop(row_id, None)
        self.inc.pop(row_id, None)
        self.nodes.pop(row_id, None)

    def constitutional(self, row_id: int) -> bool:
        node = self.nodes.get(row_id)
        return node is not None and node.authority == "constitutional"

    def touches_constitutional(self, source: int, target: int) -> bool:
        return self.constitutional(source) or self.constitutional(target)

    def degree(self, row_id: int) -> int:
        return len(self.out.get(row_id, ())) + len(self.inc.get(row_id, ()))


def _health(snap: _Snapshot) -> Health:
    nodes_by_kind: dict[str, int] = {}
    nodes_by_authority: dict[str, int] = {}
    for node in snap.nodes.values():
        nodes_by_kind[node.kind] = nodes_by_kind.get(node.kind, 0) + 1
        nodes_by_authority[node.authority] = nodes_by_authority.get(node.authority, 0) + 1
    edges_by_kind: dict[str, int] = {}
    tiers = {"strong": 0, "habitual": 0, "dormant": 0, "inhibitory": 0}
    cross = 0
    total_abs = 0.0
    for (source, target), edge in snap.edges.items():
        edges_by_kind[edge.kind] = edges_by_kind.get(edge.kind, 0) + 1
        w = edge.weight
        total_abs += abs(w)
        if w < 0:
            tiers["inhibitory"] += 1
        elif w >= STRONG:
            tiers["strong"] += 1
        elif w >= HABITUAL:
            tiers["habitual"] += 1
        else:
            tiers["dormant"] += 1
        a, b = snap.nodes.get(source), snap.nodes.get(target)
        if a is not None and b is not None and (a.source != b.source or a.kind != b.kind):
            cross += 1
    n_edges = len(snap.edges)
    orphans = sum(1 for n in snap.nodes if snap.degree(n) == 0)
    return Health(
        nodes=len(snap.nodes),
        edges=n_edges,
        nodes_by_kind=dict(sorted(nodes_by_kind.items())),
        nodes_by_authority=dict(sorted(nodes_by_authority.items())),
        edges_by_kind=dict(sorted(edges_by_kind.items())),
        tiers=tiers,
        orphans=orphans,
        dormant_share=round(tiers["dormant"] / n_edges, 6) if n_edges else 0.0,
        cross_source_share=round(cross / n_edges, 6) if n_edges else 0.0,
        mean_abs_weight=round(total_abs / n_edges, 6) if n_edges else 0.0,
        traces=snap.traces,
    )


def health(store: Store) -> Health:
    """Measure the graph as stored now."""
    with _FULL_COLLECTIONS.held_off():
        return _health(_Snapshot.load(store))


class _FullCollections:
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


_FULL_COLLECTIONS: Final = _FullCollections()


# -- writing in chunks ----------------------------------------------------------

_Write = tuple[str, tuple[Any, ...]]


class _Writer:
    """Runs conditional row writes in short transactions, each bumping the graph epoch."""

    def __init__(self, store: Store, chunk: int, dry_run: bool) -> None:
        self.store = store
        self.chunk = chunk
        self.dry_run = dry_run
        self.transactions = 0

    def run(self, writes: Sequence[_Write], vectors: bool = False, graph: bool = True) -> int:
        """Run ``writes``; how many changed a row (the rest found it changed meanwhile).

        ``graph``: the writes change nodes or edges, so each chunk bumps the epoch.
        """
        if self.dry_run:
            return len(writes)
        changed = 0
        for start in range(0, len(writes), self.chunk):
            with self.store.transaction():
                for sql, params in writes[start : start + self.chunk]:
                    self.store.execute(sql, params)
                    changed += int(self.store.changes() > 0)
                if graph:
                    bump_epoch(self.store)
                if vectors:
                    note_vectors_changed(self.store, ("node",))
            self.transactions += 1
        return changed

    def group(self, work: Callable[[], int], vectors: bool = False) -> int:
        """Run ``work`` (several dependent writes) in one transaction; its count."""
        if self.dry_run:
            return work()
        with self.store.transaction():
            done = work()
            bump_epoch(self.store)
            if vectors:
                note_vectors_changed(self.store, ("node",))
        self.transactions += 1
        return done


# -- decay ------------------------------------------------------------------------


def decay(
    snap: _Snapshot, writer: _Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Weaken edges by ``0.5 ** (elapsed / half_life)`` since each last changed.

    The edge's ``updated_at`` moves to ``now`` with it, so runs compose: two
    decays over a week each equal one over two weeks. Edges touching a
    constitutional node keep their weight; touching a canonical one, they use
    twice the half-life.
    """
    half_life = options.half_life_days * 86_400.0
    stamp = iso(now)
    writes: list[_Write] = []
    protected = 0
    for (source, target), edge in list(snap.edges.items()):
        if snap.touches_constitutional(source, target):
            protected += 1
            continue
        canonical = any(
            (n := snap.nodes.get(x)) is not None and n.authority == "canonical"
            for x in (source, target)
        )
        elapsed = (now - parse(edge.updated_at)).total_seconds()
        if elapsed <= 0:
            continue
        weight = edge.weight * 0.5 ** (elapsed / (half_life * (2 if canonical else 1)))
        if abs(edge.weight - weight) < options.min_decay:
            continue
        writes.append(
            (
                "UPDATE edges SET weight = ?, updated_at = ? "
                "WHERE source = ? AND target = ? AND updated_at = ?",
                (weight, stamp, source, target, edge.updated_at),
            )
        )
        snap.edges[(source, target)] = _Edge(weight, edge.kind, stamp)
    changed = writer.run(writes)
    return {"decayed": changed, "skipped": len(writes) - changed, "protected": protected}


# -- merge ------------------------------------------------------------------------


def _vectors(store: Store, rows: Iterable[int]) -> dict[int, npt.NDArray[np.float32]]:
    """Stored node vectors (unit length) of ``rows`` that have one."""
    wanted = orjson.dumps(sorted(rows))
    return {
        int(row_id): np.frombuffer(blob, dtype=np.float32)
        for row_id, blob in store.execute(
            "SELECT row_id, vector FROM vectors WHERE kind = 'node' "
            "AND row_id IN (SELECT value FROM json_each(?))",
            (wanted,),
        )
    }


def _mergeable(snap: _Snapshot, node: _Node) -> bool:
    """Overlay learning nodes, and overlay chunks; never next to a constitutional node.

    A merged node's edges are rewired and then deleted: next to a constitutional
    node that would change the constitutional node's edges.
    """
    if node.authority != "overlay" or node.kind == "summary":
        return False
    neighbours = snap.out.get(node.row_id, set()) | snap.inc.get(node.row_id, set())
    return not any(snap.constitutional(n) for n in neighbours)


def _similar_pairs(snap: _Snapshot, store: Store, threshold: float) -> dict[int, int]:
    """Merged node -> kept node, for near-duplicate vectors (the older node is kept).

    Nodes are compared within one kind, and chunks only within one source file
    (a chunk's node points at its lines). Scores are computed a block of rows at
    a time, so memory stays O(block x group).
    """
    groups: dict[tuple[str, str | None], list[int]] = {}
    for node in snap.nodes.values():
        if _mergeable(snap, node):
            key = (node.kind, node.source if node.kind == "chunk" else None)
            groups.setdefault(key, []).append(node.row_id)
    vectors = _vectors(store, (n for rows in groups.values() for n in rows if len(rows) > 1))
    into: dict[int, int] = {}
    for rows in groups.values():
        ids = sorted(n for n in rows if n in vectors)  # row ids grow with age
        if len(ids) < 2:
            continue
        matrix = np.stack([vectors[n] for n in ids])
        for start in range(0, len(ids), 512):
            scores = matrix[start : start + 512] @ matrix.T
            for offset, row in enumerate(scores):
                i = start + offset
                if ids[i] in into:
                    continue
                for j in np.flatnonzero(row[i + 1 :] >= threshold) + i + 1:
                    other = ids[int(j)]
                    if other not in into:
                        into[other] = ids[i]
    return into


def _cofiring(snap: _Snapshot, store: Store, min_traces: int) -> dict[int, int]:
    """Merged node -> kept node, for learning nodes that always fired together."""
    fired: dict[int, set[int]] = {}
    for trace, node in store.execute(
        "SELECT t.id, j.value ->> 0 FROM traces t, json_each(t.body, '$.fired') j"
    ):
        fired.setdefault(int(node), set()).add(int(trace))
    groups: dict[tuple[str, frozenset[int]], list[int]] = {}
    for row_id, traces in fired.items():
        node = snap.nodes.get(row_id)
        if (
            node is not None
            and node.kind in _LEARNING_KINDS
            and len(traces) >= min_traces
            and _mergeable(snap, node)
        ):
            groups.setdefault((node.kind, frozenset(traces)), []).append(row_id)
    into: dict[int, int] = {}
    for rows in groups.values():
        kept, *rest = sorted(rows)
        for other in rest:
            into[other] = kept
    return into


def _combine(existing: float | None, incoming: float) -> float:
    """The stronger of two weights by magnitude, sign kept (ties keep the existing one)."""
    if existing is None or abs(incoming) > abs(existing):
        return incoming
    return existing


def merge(
    snap: _Snapshot, writer: _Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Fold near-duplicate and always-co-firing overlay nodes into the older one.

    The merged node's edges move to the kept node (the stronger weight wins
    where both had an edge; self-loops are dropped); the merged node, its
    vector and any queued embedding are deleted, and the kept node's metadata
    lists the merged public ids. A co-firing node that is not a near-duplicate
    also brings its text, appended to the kept node's, which is queued to be
    embedded again.
    """
    store = writer.store
    similar = _similar_pairs(snap, store, options.merge_similarity)
    cofire = {
        m: k
        for m, k in _cofiring(snap, store, options.cofire_traces).items()
        # A node that keeps near-duplicates is not folded away itself in the same run.
        if m not in similar and k not in similar and m not in similar.values()
    }
    plan = [
        (gone, kept) for gone, kept in sorted({**similar, **cofire}.items()) if gone in snap.nodes
    ]
    stamp = iso(now)
    merged: list[str] = []

    def batch(pairs: list[tuple[int, int]]) -> int:
        done = 0
        for gone, kept in pairs:
            if gone not in snap.nodes or kept not in snap.nodes:
                continue
            if not writer.dry_run:
                alive = store.scalar("SELECT count(*) FROM nodes WHERE id IN (?, ?)", (gone, kept))
                if int(alive) != 2:  # deleted meanwhile by another process
                    continue
                _merge_rows(store, gone, kept, gone in cofire, stamp)
            merged.append(snap.nodes[gone].node_id)
            _merge_snapshot(snap, gone, kept, stamp)
            done += 1
        return done

    # Each merge rewires a handful of edges: a few dozen per transaction stay short.
    done = 0
    for start in range(0, len(plan), _MERGES_PER_TRANSACTION):
        pairs = plan[start : start + _MERGES_PER_TRANSACTION]
        done += writer.group(functools.partial(batch, pairs), vectors=True)
    return {
        "merged": done,
        "near_duplicates": len(similar),
        "cofiring": len(cofire),
        "ids": merged,
    }


def _merge_snapshot(snap: _Snapshot, gone: int, kept: int, stamp: str) -> None:
    for target in list(snap.out.get(gone, ())):
        edge = snap.edges[(gone, target)]
        if target != kept:
            old = snap.edges.get((kept, target))
            weight = _combine(None if old is None else old.weight, edge.weight)
            snap.put(kept, target, _Edge(weight, old.kind if old else edge.kind, stamp))
    for source in list(snap.inc.get(gone, ())):
        edge = snap.edges[(source, gone)]
        if source != kept:
            old = snap.edges.get((source, kept))
            weight = _combine(None if old is None else old.weight, edge.weight)
            snap.put(source, kept, _Edge(weight, old.kind if old else edge.kind, stamp))
    snap.drop_node(gone)


def _merge_rows(store: Store, gone: int, kept: int, append_text: bool, stamp: str) -> None:
    """Rewire, record and delete in the open transaction (reading the rows fresh)."""
    for direction in ("out", "in"):
        mine, other = ("source", "target") if direction == "out" else ("target", "source")
        rows = store.execute(
            f"SELECT {other}, weight, kind FROM edges WHERE {mine} = ?",  # noqa: S608
            (gone,),
        ).fetchall()
        for neighbour, weight, kind in cast(list[tuple[int, float, str]], rows):
            if neighbour == kept:
                continue
            pair = (kept, neighbour) if direction == "out" else (neighbour, kept)
            old: tuple[Any, ...] | None = store.one(
                "SELECT weight, kind FROM edges WHERE source = ? AND target = ?", pair
            )
            combined = clamp_weight(_combine(None if old is None else float(old[0]), weight))
            store.execute(
                "INSERT INTO edges (source, target, weight, kind, updated_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (source, target) DO UPDATE SET "
                "weight = excluded.weight, updated_at = excluded.updated_at",
                (*pair, combined, kind if old is None else old[1], stamp),
            )
    row = store.one(
        "SELECT g.node_id, g.content, g.fire_count, g.last_fired_at, k.metadata "
        "FROM nodes g, nodes k WHERE g.id = ? AND k.id = ?",
        (gone, kept),
    )
    assert row is not None
    metadata = orjson.loads(row[4]) if row[4] else {}
    metadata["merged"] = [*metadata.get("merged", []), str(row[0])]
    store.execute(
        "UPDATE nodes SET metadata = ?1, fire_count = fire_count + ?2, "
        "last_fired_at = CASE WHEN ?3 > coalesce(last_fired_at, '') THEN ?3 "
        "ELSE last_fired_at END WHERE id = ?4",
        (orjson.dumps(metadata).decode(), int(row[2]), row[3], kept),
    )
    if append_text and row[1]:
        store.execute(
            "UPDATE nodes SET content = content || char(10) || ? WHERE id = ?", (row[1], kept)
        )
        store.execute(
            "INSERT OR IGNORE INTO embed_queue (kind, row_id) VALUES ('node', ?)", (kept,)
        )
    _delete_node(store, gone)


def _delete_node(store: Store, row_id: int) -> None:
    """A node with its edges, its vector and its queued embedding: no ghost vectors."""
    store.execute("DELETE FROM edges WHERE source = ? OR target = ?", (row_id, row_id))
    store.execute("DELETE FROM vectors WHERE kind = 'node' AND row_id = ?", (row_id,))
    store.execute("DELETE FROM embed_queue WHERE kind = 'node' AND row_id = ?", (row_id,))
    store.execute("DELETE FROM nodes WHERE id = ?", (row_id,))


# -- prune ------------------------------------------------------------------------


def prune(
    snap: _Snapshot, writer: _Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Delete weak edges, then long-idle edgeless learning nodes.

    Edges weaker than ``prune_below`` go unless they touch a constitutional
    node. A node goes only if it is overlay, a teaching, correction or
    directive (chunks belong to their file's sync and summary nodes to their
    summary), has no edge either way, and was neither made nor fired within
    ``orphan_days``: a fresh node with no neighbours yet is kept, and so is an
    edgeless node that queries still find by its vector. Query traces past
    their retention (``BrainConfig.trace_max_age_days`` / ``trace_max_count``)
    go too.
    """
    edge_writes: list[_Write] = []
    protected = 0
    for (source, target), edge in list(snap.edges.items()):
        if abs(edge.weight) >= options.prune_below:
            continue
        if snap.touches_constitutional(source, target):
            protected += 1
            continue
        edge_writes.append(
            (
                "DELETE FROM edges WHERE source = ? AND target = ? AND updated_at = ?",
                (source, target, edge.updated_at),
            )
        )
        snap.drop(source, target)
    edges = writer.run(edge_writes)
    cutoff = iso(now - timedelta(days=options.orphan_days))
    orphans = [
        node
        for node in snap.nodes.values()
        if node.authority == "overlay"
        and node.kind in _LEARNING_KINDS
        and snap.degree(node.row_id) == 0
        and node.created_at < cutoff
        and (node.last_fired_at is None or node.last_fired_at < cutoff)
    ]
    removed: list[str] = []

    def drop(node: _Node) -> int:
        if not writer.dry_run:
            still = store_orphan(writer.store, node.row_id, cutoff)
            if not still:
                return 0
            _delete_node(writer.store, node.row_id)
        snap.drop_node(node.row_id)
        return 1

    # Nodes go a chunk per transaction: each deletion re-checks the node inside it.
    for start in range(0, len(orphans), options.chunk):
        batch = orphans[start : start + options.chunk]

        def work(batch: list[_Node] = batch) -> int:
            done = 0
            for node in batch:
                if drop(node):
                    removed.append(node.node_id)
                    done += 1
            return done

        writer.group(work, vectors=True)
    traces = _prune_traces(snap, writer, now)
    return {
        "edges": edges,
        "edges_skipped": len(edge_writes) - edges,
        "edges_protected": protected,
        "nodes": len(removed),
        "ids": removed,
        "traces": traces,
    }


def _prune_traces(snap: _Snapshot, writer: _Writer, now: datetime) -> int:
    """Delete traces older than ``trace_max_age_days`` or beyond the newest ``trace_max_count``.

    Storing a trace already keeps the count bounded; this also applies the age
    limit, and a count lowered since. Traces are not graph state: no epoch moves.
    """
    config = writer.store.config
    cutoff = iso(now - timedelta(days=config.trace_max_age_days))
    expired = expired_traces(writer.store, cutoff, config.trace_max_count)
    writes = [("DELETE FROM traces WHERE id = ?", (row_id,)) for row_id in expired]
    deleted = writer.run(writes, graph=False)
    snap.traces -= deleted
    return deleted


def store_orphan(store: Store, row_id: int, cutoff: str) -> bool:
    """Whether the stored node is still an idle, edgeless overlay learning node."""
    row = store.one(
        "SELECT 1 FROM nodes n WHERE n.id = ? AND n.authority = 'overlay' "
        "AND n.kind IN ('teaching', 'correction', 'directive') AND n.created_at < ? "
        "AND (n.last_fired_at IS NULL OR n.last_fired_at < ?) "
        "AND NOT EXISTS (SELECT 1 FROM edges WHERE source = n.id) "
        "AND NOT EXISTS (SELECT 1 FROM edges WHERE target = n.id)",
        (row_id, cutoff, cutoff),
    )
    return row is not None


# -- connect ----------------------------------------------------------------------


def connect(
    snap: _Snapshot, writer: _Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Link learning nodes with no chunk neighbour to their nearest chunks, both ways.

    Constitutional nodes on either side are left alone (their edges never
    change). An edge that exists by the time it is written is kept as it is.
    """
    chunks = [
        n.row_id
        for n in snap.nodes.values()
        if n.kind == "chunk" and n.authority != "constitutional"
    ]
    lonely = [
        n.row_id
        for n in snap.nodes.values()
        if n.kind in _LEARNING_KINDS
        and n.authority != "constitutional"
        and not any(
            (m := snap.nodes.get(x)) is not None and m.kind == "chunk"
            for x in snap.out.get(n.row_id, set()) | snap.inc.get(n.row_id, set())
        )
    ]
    if not chunks or not lonely or options.connect_k == 0:
        return {"nodes": 0, "edges": 0}
    vectors = _vectors(writer.store, [*chunks, *lonely])
    chunk_ids = [c for c in chunks if c in vectors]
    lonely_ids = [n for n in lonely if n in vectors]
    if not chunk_ids or not lonely_ids:
        return {"nodes": 0, "edges": 0}
    chunk_matrix = np.stack([vectors[c] for c in chunk_ids])
    stamp = iso(now)
    writes: list[_Write] = []
    linked = 0
    for start in range(0, len(lonely_ids), 512):
        block = lonely_ids[start : start + 512]
        scores = np.stack([vectors[n] for n in block]) @ chunk_matrix.T
        for node, row in zip(block, scores, strict=True):
            best = np.argsort(-row)[: options.connect_k]
            picked = [(chunk_ids[int(j)], float(row[j])) for j in best]
            picked = [(c, s) for c, s in picked if s >= options.connect_similarity]
            linked += bool(picked)
            for chunk, score in picked:
                weight = clamp_weight(score / 2)
                for pair in ((node, chunk), (chunk, node)):
                    if pair in snap.edges:
                        continue
                    writes.append(
                        (
                            "INSERT INTO edges (source, target, weight, kind, updated_at) "
                            "SELECT ?, ?, ?, 'similar', ? WHERE EXISTS "
                            "(SELECT 1 FROM nodes WHERE id = ?) AND EXISTS "
                            "(SELECT 1 FROM nodes WHERE id = ?) "
                            "ON CONFLICT (source, target) DO NOTHING",
                            (*pair, weight, stamp, *pair),
                        )
                    )
                    snap.put(*pair, _Edge(weight, "similar", stamp))
    edges = writer.run(writes)
    return {"nodes": linked, "edges": edges}


# -- scale ------------------------------------------------------------------------


def scale(
    snap: _Snapshot, writer: _Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Synaptic scaling: cap each node's positive outgoing weight at ``scale_budget``.

    A node over budget has its positive outgoing edges multiplied by
    ``budget / sum``; constitutional nodes and edges into them are left as they
    are (they still count towards the sum).
    """
    stamp = iso(now)
    writes: list[_Write] = []
    nodes = 0
    for source, targets in snap.out.items():
        if snap.constitutional(source):
            continue
        positive = [
            (t, snap.edges[(source, t)]) for t in targets if snap.edges[(source, t)].weight > 0
        ]
        total = sum(e.weight for _, e in positive)
        if total <= options.scale_budget:
            continue
        factor = options.scale_budget / total
        nodes += 1
        for target, edge in positive:
            if snap.constitutional(target):
                continue
            writes.append(
                (
                    "UPDATE edges SET weight = ?, updated_at = ? "
                    "WHERE source = ? AND target = ? AND updated_at = ?",
                    (edge.weight * factor, stamp, source, target, edge.updated_at),
                )
            )
            snap.edges[(source, target)] = _Edge(edge.weight * factor, edge.kind, stamp)
    changed = writer.run(writes)
    return {"nodes": nodes, "edges": changed, "skipped": len(writes) - changed}


# -- the run ----------------------------------------------------------------------

_TaskFn = Callable[[_Snapshot, _Writer, MaintainOptions, datetime], dict[str, Any]]
_RUNNERS: Final[dict[str, _TaskFn]] = {
    "decay": decay,
    "merge": merge,
    "prune": prune,
    "connect": connect,
    "scale": scale,
}


def maintain(
    store: Store,
    graph: Graph | None = None,
    tasks: Sequence[str] = TASKS,
    *,
    dry_run: bool = False,
    options: MaintainOptions | None = None,
    now: datetime | None = None,
    progress: Progress = ignore,
) -> MaintainReport:
    """Run ``tasks`` (always in ``TASKS`` order); ``dry_run`` reports without writing.

    ``progress`` hears each task as it starts (done = tasks finished), then "done".

    ``graph`` (this process's mirror) is marked stale afterwards; other
    processes' mirrors reload on their own, since every chunk bumps the epoch.
    """
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise InvalidInput("tasks", f"unknown {', '.join(unknown)}; known: {', '.join(TASKS)}")
    options = options or MaintainOptions()
    with _FULL_COLLECTIONS.held_off():
        return _run(store, graph, tasks, dry_run, options, now or datetime.now(UTC), progress)


def _run(
    store: Store,
    graph: Graph | None,
    tasks: Sequence[str],
    dry_run: bool,
    options: MaintainOptions,
    moment: datetime,
    progress: Progress,
) -> MaintainReport:
    started = time.perf_counter()
    snap = _Snapshot.load(store)
    before = _health(snap)
    writer = _Writer(store, options.chunk, dry_run)
    reports: dict[str, dict[str, Any]] = {}
    try:
        wanted = [name for name in TASKS if name in tasks and name in _RUNNERS]
        for name in TASKS:
            if name in tasks and name in _RUNNERS:
                progress(len(reports), len(wanted), name)
                task_started = time.perf_counter()
                report = _RUNNERS[name](snap, writer, options, moment)
                report["took_ms"] = round((time.perf_counter() - task_started) * 1000, 3)
                reports[name] = report
        progress(len(reports), len(wanted), "done")
    finally:
        if graph is not None:
            graph.invalidate()
    # A real run measures what was stored (a row changed meanwhile was skipped).
    after = _health(snap) if dry_run else health(store)
    return MaintainReport(
        health_before=before,
        health_after=after,
        tasks=reports,
        dry_run=dry_run,
        took_ms=round((time.perf_counter() - started) * 1000, 3),
    )
