"""The ``scale`` task: synaptic scaling caps each node's positive outgoing weight.

Tested in tests/brain/graph/maintain/test_scale.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from brain.clock import iso
from brain.graph.maintain.options import MaintainOptions
from brain.graph.maintain.snapshot import Edge, Snapshot
from brain.graph.maintain.writer import Effect, Write, Writer

__all__ = ["scale"]


def scale(
    snap: Snapshot, writer: Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Synaptic scaling: cap each node's positive outgoing weight at ``scale_budget``.

    A node over budget has its positive outgoing edges multiplied by
    ``budget / sum``; constitutional nodes and edges into them are left as they
    are (they still count towards the sum).
    """
    stamp = iso(now)
    writes: list[Write] = []
    effects: list[Effect] = []
    nodes = 0
    edges = snap.edges
    constitutional = snap.with_authority("constitutional")
    for source, targets in snap.out.items():
        if source in constitutional:
            continue
        # The sum first, one lookup an edge: at 100k nodes one node in a hundred is over
        # budget, and a list of every node's positive edges was most of the task.
        total = sum(w for t in targets if (w := edges[(source, t)].weight) > 0)
        if total <= options.scale_budget:
            continue
        positive = [(t, edges[(source, t)]) for t in targets if edges[(source, t)].weight > 0]
        factor = options.scale_budget / total
        nodes += 1
        for target, edge in positive:
            if target in constitutional:
                continue
            writes.append(
                (
                    "UPDATE edges SET weight = ?, updated_at = ? "
                    "WHERE source = ? AND target = ? AND updated_at = ?",
                    (edge.weight * factor, stamp, source, target, edge.updated_at),
                )
            )
            effects.append(("edge", source, target, edge.weight * factor))
            snap.edges[(source, target)] = Edge(edge.weight * factor, edge.kind, stamp)
    changed = writer.run(writes, effects=effects)
    return {"nodes": nodes, "edges": changed, "skipped": len(writes) - changed}
