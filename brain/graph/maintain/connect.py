"""The ``connect`` task: learning nodes with no chunk neighbour are linked to their nearest chunks.

Tested in tests/brain/graph/maintain/test_connect.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from brain.clock import iso
from brain.graph.maintain.options import MaintainOptions
from brain.graph.maintain.rows import node_vectors
from brain.graph.maintain.snapshot import LEARNING_KINDS, Edge, Snapshot
from brain.graph.maintain.writer import Effect, Write, Writer
from brain.graph.nodes import clamp_weight

__all__ = ["connect"]


def connect(
    snap: Snapshot, writer: Writer, options: MaintainOptions, now: datetime
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
    if not chunks or options.connect_k == 0:
        return {"nodes": 0, "edges": 0}
    all_chunks = {n.row_id for n in snap.nodes.values() if n.kind == "chunk"}
    empty: set[int] = set()
    lonely = [
        n.row_id
        for n in snap.nodes.values()
        if n.kind in LEARNING_KINDS
        and n.authority != "constitutional"
        and all_chunks.isdisjoint(snap.out.get(n.row_id, empty))
        and all_chunks.isdisjoint(snap.inc.get(n.row_id, empty))
    ]
    if not lonely:
        return {"nodes": 0, "edges": 0}
    vectors = node_vectors(writer.store, [*chunks, *lonely])
    chunk_ids = [c for c in chunks if c in vectors]
    lonely_ids = [n for n in lonely if n in vectors]
    if not chunk_ids or not lonely_ids:
        return {"nodes": 0, "edges": 0}
    chunk_matrix = np.stack([vectors[c] for c in chunk_ids])
    stamp = iso(now)
    writes: list[Write] = []
    effects: list[Effect] = []
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
                    effects.append(("edge", *pair, weight))
                    snap.put(*pair, Edge(weight, "similar", stamp))
    edges = writer.run(writes, effects=effects)
    return {"nodes": linked, "edges": edges}
