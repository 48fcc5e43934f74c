"""``health``: the shape of the graph (counts, weight tiers, orphans, cross-source share).

Tested in tests/brain/graph/maintain/test_measure.py.
"""

from __future__ import annotations

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
    with FULL_COLLECTIONS.held_off():
        return measure(Snapshot.load(store))
