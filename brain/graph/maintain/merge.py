"""The ``merge`` task: near-duplicate and always-co-firing overlay nodes fold into the older one.

Tested in tests/brain/graph/maintain/test_merge.py.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Final, cast

import numpy as np
import orjson

from brain.clock import iso
from brain.graph.maintain.options import MaintainOptions
from brain.graph.maintain.rows import delete_node, node_vectors
from brain.graph.maintain.snapshot import LEARNING_KINDS, Edge, Node, Snapshot
from brain.graph.maintain.writer import Writer
from brain.graph.mirror import GraphDelta
from brain.graph.nodes import clamp_weight
from brain.store.connection import Store
from brain.vectors.writes import enqueue

__all__ = ["merge"]


_MERGES_PER_TRANSACTION: Final = 50


def _mergeable(snap: Snapshot, node: Node) -> bool:
    """Overlay learning nodes, and overlay chunks; never next to a constitutional node.

    A merged node's edges are rewired and then deleted: next to a constitutional
    node that would change the constitutional node's edges.
    """
    if node.authority != "overlay" or node.kind == "summary":
        return False
    neighbours = snap.out.get(node.row_id, set()) | snap.inc.get(node.row_id, set())
    return not any(snap.constitutional(n) for n in neighbours)


def _similar_pairs(snap: Snapshot, store: Store, threshold: float) -> dict[int, int]:
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
    vectors = node_vectors(store, (n for rows in groups.values() for n in rows if len(rows) > 1))
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


def _cofiring(snap: Snapshot, store: Store, min_traces: int) -> dict[int, int]:
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
            and node.kind in LEARNING_KINDS
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
    snap: Snapshot, writer: Writer, options: MaintainOptions, now: datetime
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
                _merge_rows(store, gone, kept, gone in cofire, stamp, writer.delta)
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


def _merge_snapshot(snap: Snapshot, gone: int, kept: int, stamp: str) -> None:
    for target in list(snap.out.get(gone, ())):
        edge = snap.edges[(gone, target)]
        if target != kept:
            old = snap.edges.get((kept, target))
            weight = _combine(None if old is None else old.weight, edge.weight)
            snap.put(kept, target, Edge(weight, old.kind if old else edge.kind, stamp))
    for source in list(snap.inc.get(gone, ())):
        edge = snap.edges[(source, gone)]
        if source != kept:
            old = snap.edges.get((source, kept))
            weight = _combine(None if old is None else old.weight, edge.weight)
            snap.put(source, kept, Edge(weight, old.kind if old else edge.kind, stamp))
    snap.drop_node(gone)


def _merge_rows(
    store: Store, gone: int, kept: int, append_text: bool, stamp: str, delta: GraphDelta
) -> None:
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
            delta.set_edge(*pair, combined)
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
        enqueue(store, "node", [kept])
    delete_node(store, gone)
    delta.drop_node(gone)
