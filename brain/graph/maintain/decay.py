"""The ``decay`` task: edges weaken with the time since they last changed.

Tested in tests/brain/graph/maintain/test_decay.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from brain.clock import iso, parse
from brain.graph.maintain.options import MaintainOptions
from brain.graph.maintain.snapshot import Edge, Snapshot
from brain.graph.maintain.writer import Effect, Write, Writer

__all__ = ["decay"]


def decay(
    snap: Snapshot, writer: Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Weaken edges by ``0.5 ** (elapsed / half_life)`` since each last changed.

    The edge's ``updated_at`` moves to ``now`` with it, so runs compose: two
    decays over a week each equal one over two weeks. Edges touching a
    constitutional node keep their weight; touching a canonical one, they use
    twice the half-life.
    """
    half_life = options.half_life_days * 86_400.0
    stamp = iso(now)
    writes: list[Write] = []
    effects: list[Effect] = []
    protected = 0
    constitutional = snap.with_authority("constitutional")
    canonicals = snap.with_authority("canonical")
    since: dict[str, float] = {}
    for (source, target), edge in list(snap.edges.items()):
        if constitutional and (source in constitutional or target in constitutional):
            protected += 1
            continue
        canonical = source in canonicals or target in canonicals
        elapsed = since.get(edge.updated_at)
        if elapsed is None:  # edges changed together share a stamp: parsed once
            elapsed = since[edge.updated_at] = (now - parse(edge.updated_at)).total_seconds()
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
        effects.append(("edge", source, target, weight))
        snap.edges[(source, target)] = Edge(weight, edge.kind, stamp)
    changed = writer.run(writes, effects=effects)
    return {"decayed": changed, "skipped": len(writes) - changed, "protected": protected}
