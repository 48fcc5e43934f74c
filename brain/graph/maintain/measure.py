"""``health``: the shape of the graph (counts, weight tiers, orphans, cross-source share).

Tested in tests/brain/graph/maintain/test_measure.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final

from brain.graph.maintain.snapshot import FULL_COLLECTIONS, Snapshot
from brain.store.connection import Store

__all__ = ["HABITUAL", "STRONG", "Health", "health", "measure"]


STRONG: Final = 0.5
"""Edges at or above this |weight| are strong..."""
HABITUAL: Final = 0.15
"""...at or above this habitual, below it dormant (positive edges; negative ones inhibit)."""


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


def measure(snap: Snapshot) -> Health:
    """Measure the graph as the snapshot holds it."""
    nodes_by_kind: dict[str, int] = {}
    nodes_by_authority: dict[str, int] = {}
    for node in snap.nodes.values():
        nodes_by_kind[node.kind] = nodes_by_kind.get(node.kind, 0) + 1
        nodes_by_authority[node.authority] = nodes_by_authority.get(node.authority, 0) + 1
    # One pass per figure over plain values (a million edges at 100k nodes): counting
    # in C where it can, and one lookup per end for the cross-source share.
    edges = snap.edges
    edges_by_kind = dict(Counter(edge.kind for edge in edges.values()))
    weights = [edge.weight for edge in edges.values()]
    total_abs = sum(map(abs, weights))
    inhibitory = sum(1 for w in weights if w < 0)
    strong = sum(1 for w in weights if w >= STRONG)
    habitual = sum(1 for w in weights if HABITUAL <= w < STRONG)
    tiers = {
        "strong": strong,
        "habitual": habitual,
        "dormant": len(weights) - inhibitory - strong - habitual,
        "inhibitory": inhibitory,
    }
    where = {row: (node.source, node.kind) for row, node in snap.nodes.items()}
    cross = sum(
        1
        for source, target in edges
        if (a := where.get(source)) is not None and (b := where.get(target)) is not None and a != b
    )
    n_edges = len(edges)
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
    with FULL_COLLECTIONS.held_off():
        return measure(Snapshot.load(store))
