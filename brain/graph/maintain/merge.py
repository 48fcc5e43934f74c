"""The ``merge`` task: near-duplicate and always-co-firing overlay nodes fold into the older one.

Tested in tests/brain/graph/maintain/test_merge.py.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
import orjson

from brain.clock import iso
from brain.graph.maintain.options import MaintainOptions
from brain.graph.maintain.rows import delete_node, node_matrix
from brain.graph.maintain.snapshot import LEARNING_KINDS, Edge, Node, Snapshot
from brain.graph.maintain.writer import Writer
from brain.graph.mirror import GraphDelta
from brain.graph.nodes import clamp_weight
from brain.store.connection import Store
from brain.vectors.writes import enqueue

__all__ = ["EXACT_PAIRS_BELOW", "merge", "near_pairs"]


_MERGES_PER_TRANSACTION: Final = 50


def _mergeable(snap: Snapshot, node: Node, constitutional: set[int]) -> bool:
    """Overlay learning nodes, and overlay chunks; never next to a constitutional node.

    A merged node's edges are rewired and then deleted: next to a constitutional
    node that would change the constitutional node's edges.
    """
    if node.authority != "overlay" or node.kind == "summary":
        return False
    empty: set[int] = set()
    return constitutional.isdisjoint(snap.out.get(node.row_id, empty)) and (
        constitutional.isdisjoint(snap.inc.get(node.row_id, empty))
    )


def _similar_pairs(snap: Snapshot, store: Store, threshold: float) -> dict[int, int]:
    """Merged node -> kept node, for near-duplicate vectors (the older node is kept).

    Nodes are compared within one kind, and chunks only within one source file
    (a chunk's node points at its lines). Each node, oldest first, keeps every
    younger near-duplicate not kept by an older one already.
    """
    groups: dict[tuple[str, str | None], list[int]] = {}
    constitutional = snap.with_authority("constitutional")
    for node in snap.nodes.values():
        if _mergeable(snap, node, constitutional):
            key = (node.kind, node.source if node.kind == "chunk" else None)
            groups.setdefault(key, []).append(node.row_id)
    found, vectors = node_matrix(
        store, (n for rows in groups.values() for n in rows if len(rows) > 1)
    )
    position = {row_id: i for i, row_id in enumerate(found)}
    into: dict[int, int] = {}
    for rows in groups.values():
        ids = sorted(n for n in rows if n in position)  # row ids grow with age
        if len(ids) < 2:
            continue
        matrix = vectors[[position[n] for n in ids]]
        for i, j in near_pairs(matrix, threshold):
            if ids[i] not in into and ids[j] not in into:
                into[ids[j]] = ids[i]
    return into


EXACT_PAIRS_BELOW: Final = 4_096
"""Groups of fewer rows compare every pair; larger ones compare IVF candidates only
(every pair at 100k nodes was 200 s of a maintain run: 10^10 products)."""
_PAIR_BLOCK: Final = 512


def near_pairs(matrix: npt.NDArray[np.float32], threshold: float) -> list[tuple[int, int]]:
    """Position pairs ``(i, j)``, ``i < j``, of rows at least ``threshold`` similar, sorted.

    Below ``EXACT_PAIRS_BELOW`` rows every pair is scored, a block of rows at a time
    (memory O(block x rows)). Above, the rows are clustered (``brain.vectors.ann.IVF``,
    about sqrt(rows) lists) and each row is scored only against the rows of its two
    nearest lists: O(rows x sqrt(rows)) products instead of rows squared. A pair that
    close almost always shares a list; one split across lists that are neither's
    second nearest is missed by this run and found by a later one.
    """
    n = len(matrix)
    if n < EXACT_PAIRS_BELOW:
        pairs: list[tuple[int, int]] = []
        for start in range(0, n, _PAIR_BLOCK):
            scores = matrix[start : start + _PAIR_BLOCK] @ matrix.T
            rows, cols = np.nonzero(scores >= threshold)
            pairs += [
                (i, j) for i, j in zip((rows + start).tolist(), cols.tolist(), strict=True) if i < j
            ]
        return sorted(pairs)
    from brain.vectors.ann import IVF

    centroids = IVF.build(n, lambda positions: matrix[positions]).centroids
    nearest = np.zeros((n, 2), dtype=np.int64)
    transposed = np.ascontiguousarray(centroids.T)
    for start in range(0, n, 16_384):
        scores = matrix[start : start + 16_384] @ transposed
        two = np.argpartition(-scores, 1, axis=1)[:, :2]
        best = np.take_along_axis(scores, two, 1)
        swap = best[:, 1] > best[:, 0]
        two[swap] = two[swap][:, ::-1]
        nearest[start : start + 16_384] = two
    members = np.argsort(nearest[:, 0], kind="stable")
    bounds = np.searchsorted(nearest[:, 0], np.arange(len(centroids) + 1), sorter=members)
    by_second = np.argsort(nearest[:, 1], kind="stable")
    second_bounds = np.searchsorted(nearest[:, 1], np.arange(len(centroids) + 1), sorter=by_second)
    found: set[tuple[int, int]] = set()
    for lst in range(len(centroids)):
        mine = members[bounds[lst] : bounds[lst + 1]]
        if len(mine) == 0:
            continue
        probing = np.concatenate((mine, by_second[second_bounds[lst] : second_bounds[lst + 1]]))
        scores = matrix[probing] @ matrix[mine].T
        rows, cols = np.nonzero(scores >= threshold)
        a, b = probing[rows], mine[cols]
        keep = a != b
        for i, j in zip(
            np.minimum(a, b)[keep].tolist(), np.maximum(a, b)[keep].tolist(), strict=True
        ):
            found.add((i, j))
    return sorted(found)


def _cofiring(snap: Snapshot, store: Store, min_traces: int) -> dict[int, int]:
    """Merged node -> kept node, for learning nodes that always fired together."""
    fired: dict[int, set[int]] = {}
    for trace, node in store.execute(
        "SELECT t.id, j.value ->> 0 FROM traces t, json_each(t.body, '$.fired') j"
    ):
        fired.setdefault(int(node), set()).add(int(trace))
    groups: dict[tuple[str, frozenset[int]], list[int]] = {}
    constitutional = snap.with_authority("constitutional")
    for row_id, traces in fired.items():
        node = snap.nodes.get(row_id)
        if (
            node is not None
            and node.kind in LEARNING_KINDS
            and len(traces) >= min_traces
            and _mergeable(snap, node, constitutional)
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
