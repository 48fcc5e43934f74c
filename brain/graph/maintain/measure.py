"""``health``: the shape of the graph (counts, weight tiers, orphans, cross-source share).

Tested in tests/brain/graph/maintain/test_measure.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from operator import itemgetter
from typing import Final

import numpy as np

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
    # A million edges at 100k nodes: the values are read out by C-level ``map``s, the
    # counts made by numpy; the sum of |weight| stays Python's left-to-right ``sum`` (the
    # same float as before, to the bit). Generators per edge were ~1 s a measure.
    edges = snap.edges
    values = list(edges.values())
    edges_by_kind = dict(Counter(map(itemgetter(1), values)))
    weights = list(map(itemgetter(0), values))
    total_abs = sum(map(abs, weights))
    w = np.fromiter(weights, dtype=np.float64, count=len(weights))
    inhibitory = int(np.count_nonzero(w < 0))
    strong = int(np.count_nonzero(w >= STRONG))
    habitual = int(np.count_nonzero((w >= HABITUAL) & (w < STRONG)))
    tiers = {
        "strong": strong,
        "habitual": habitual,
        "dormant": len(weights) - inhibitory - strong - habitual,
        "inhibitory": inhibitory,
    }
    pairs = list(edges)
    sources = np.fromiter(map(itemgetter(0), pairs), dtype=np.int64, count=len(pairs))
    targets = np.fromiter(map(itemgetter(1), pairs), dtype=np.int64, count=len(pairs))
    rows = np.fromiter(snap.nodes, dtype=np.int64, count=len(snap.nodes))
    size = 1 + max(
        int(rows.max(initial=0)), int(sources.max(initial=0)), int(targets.max(initial=0))
    )
    # Each node's (source, kind) as a small integer; -1: not a node of the snapshot.
    groups: dict[tuple[str | None, str], int] = {}
    code = np.full(size, -1, dtype=np.int64)
    code[rows] = np.fromiter(
        (groups.setdefault((n.source, n.kind), len(groups)) for n in snap.nodes.values()),
        dtype=np.int64,
        count=len(rows),
    )
    a, b = code[sources], code[targets]
    cross = int(np.count_nonzero((a >= 0) & (b >= 0) & (a != b)))
    n_edges = len(edges)
    linked = np.zeros(size, dtype=bool)
    linked[sources] = True
    linked[targets] = True
    orphans = int(np.count_nonzero(~linked[rows]))
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
