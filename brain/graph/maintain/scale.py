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
            effects.append(("edge", source, target, edge.weight * factor))
            snap.edges[(source, target)] = Edge(edge.weight * factor, edge.kind, stamp)
    changed = writer.run(writes, effects=effects)
    return {"nodes": nodes, "edges": changed, "skipped": len(writes) - changed}
