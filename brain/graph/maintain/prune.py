"""The ``prune`` task: weak edges, long-idle edgeless learning nodes, and expired traces go.

Tested in tests/brain/graph/maintain/test_prune.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

import orjson

from brain.clock import iso
from brain.graph.maintain.options import MaintainOptions
from brain.graph.maintain.rows import delete_node
from brain.graph.maintain.snapshot import LEARNING_KINDS, Node, Snapshot
from brain.graph.maintain.writer import Effect, Write, Writer
from brain.graph.traces import expired_traces
from brain.store.connection import Store

__all__ = ["PRUNE_SPAN", "prune", "store_orphan"]


def prune(
    snap: Snapshot, writer: Writer, options: MaintainOptions, now: datetime
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
    edges, planned, protected = _prune_edges(snap, writer, options)
    cutoff = iso(now - timedelta(days=options.orphan_days))
    orphans = [
        node
        for node in snap.nodes.values()
        if node.authority == "overlay"
        and node.kind in LEARNING_KINDS
        and snap.degree(node.row_id) == 0
        and node.created_at < cutoff
        and (node.last_fired_at is None or node.last_fired_at < cutoff)
    ]
    removed: list[str] = []

    def drop(node: Node) -> int:
        if not writer.dry_run:
            still = store_orphan(writer.store, node.row_id, cutoff)
            if not still:
                return 0
            delete_node(writer.store, node.row_id)
            writer.delta.drop_node(node.row_id)
        snap.drop_node(node.row_id)
        return 1

    # Nodes go a chunk per transaction: each deletion re-checks the node inside it.
    for start in range(0, len(orphans), options.chunk):
        batch = orphans[start : start + options.chunk]

        def work(batch: list[Node] = batch) -> int:
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
        "edges_skipped": planned - edges,
        "edges_protected": protected,
        "nodes": len(removed),
        "ids": removed,
        "traces": traces,
    }


PRUNE_SPAN: Final = 3
"""Prune's spans are this many ``MaintainOptions.sweep`` spans. Its deletions land at
random places of the (target, source) index, and each transaction writes every index
page it touched to the WAL (and a checkpoint copies it): at 100k nodes, 20,000-edge
spans wrote most of the index 50 times, 3.5 s of CPU (1.4 s of it system time) and
8 s of wall for 290k deletions; 60,000-edge spans 2.3 s and 3 s. It deletes ~30% of
a span's rows, so a span holds the lock about as long as one of decay's."""

_SWEEP: Final = (
    "DELETE FROM edges WHERE source BETWEEN ?1 AND ?2 AND abs(weight) < ?3 "
    "AND NOT (source IN (SELECT value FROM json_each(?4)) "
    "OR target IN (SELECT value FROM json_each(?4))) RETURNING source, target"
)
"""The weak edges of one span of sources, deleted as they are when it runs."""


def _prune_edges(snap: Snapshot, writer: Writer, options: MaintainOptions) -> tuple[int, int, int]:
    """Delete edges weaker than ``prune_below`` not touching a constitutional node:
    (deleted, planned, protected).

    A real run deletes a span of sources per statement (``Writer.sweep``), the rows
    as they are then (an edge a learn strengthened meanwhile stays); a dry run plans
    edge by edge over the snapshot.
    """
    constitutional = snap.with_authority("constitutional")
    if writer.dry_run:
        return _planned_edges(snap, writer, options, constitutional)
    below = options.prune_below
    protected: set[tuple[int, int]] = set()
    for node in constitutional:
        protected.update(
            (node, t) for t in snap.out.get(node, ()) if abs(snap.edges[(node, t)].weight) < below
        )
        protected.update(
            (s, node) for s in snap.inc.get(node, ()) if abs(snap.edges[(s, node)].weight) < below
        )
    no_change = orjson.dumps(sorted(constitutional)).decode()

    def on_rows(rows: list[tuple[Any, ...]]) -> None:
        snap.drop_many(rows)
        writer.delta.ops.extend([("drop", s, t, 0.0) for s, t in rows])

    deleted = writer.sweep(
        _SWEEP,
        [(lo, hi, below, no_change) for lo, hi in snap.source_ranges(options.sweep * PRUNE_SPAN)],
        on_rows,
    )
    return deleted, deleted, len(protected)


def _planned_edges(
    snap: Snapshot, writer: Writer, options: MaintainOptions, constitutional: set[int]
) -> tuple[int, int, int]:
    """Weak edges planned edge by edge over the snapshot (a dry run's), deleted row by row."""
    edge_writes: list[Write] = []
    effects: list[Effect] = []
    protected = 0
    for (source, target), edge in list(snap.edges.items()):
        if abs(edge.weight) >= options.prune_below:
            continue
        if constitutional and (source in constitutional or target in constitutional):
            protected += 1
            continue
        edge_writes.append(
            (
                "DELETE FROM edges WHERE source = ? AND target = ? AND updated_at = ?",
                (source, target, edge.updated_at),
            )
        )
        effects.append(("drop", source, target, 0.0))
        snap.drop(source, target)
    return writer.run(edge_writes, effects=effects), len(edge_writes), protected


def _prune_traces(snap: Snapshot, writer: Writer, now: datetime) -> int:
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
