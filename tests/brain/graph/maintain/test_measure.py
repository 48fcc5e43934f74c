"""health: the shape of the graph."""

from __future__ import annotations

import pytest

from brain.graph.maintain import health
from tests.brain.graph.maintain.helpers import G


def test_health_counts_nodes_edges_tiers_and_orphans(g: G) -> None:
    g.node("a")
    g.node("b", kind="chunk", source="x.md")
    g.node("c", authority="canonical")
    g.node("alone")
    g.edge("a", "b", 0.7)
    g.edge("b", "a", 0.2)
    g.edge("a", "c", 0.1)
    g.edge("c", "a", -0.5)
    h = health(g.store)
    assert (h.nodes, h.edges, h.orphans) == (4, 4, 1)
    assert h.nodes_by_kind == {"chunk": 1, "teaching": 3}
    assert h.nodes_by_authority == {"canonical": 1, "overlay": 3}
    assert h.tiers == {"strong": 1, "habitual": 1, "dormant": 1, "inhibitory": 1}
    assert h.dormant_share == 0.25
    assert h.cross_source_share == 0.5
    assert h.mean_abs_weight == pytest.approx(0.375)


def test_health_of_a_snapshot_equals_its_counts_edge_by_edge() -> None:
    import random

    from brain.graph.maintain.measure import HABITUAL, STRONG, measure
    from brain.graph.maintain.snapshot import Edge, Node, Snapshot

    rng = random.Random(7)
    nodes = {
        i: Node(
            i,
            f"n{i}",
            rng.choice(["teaching", "chunk", "summary"]),
            "overlay",
            rng.choice([None, "a.md", "b.md"]),
            "2025-01-01T00:00:00.000Z",
            None,
        )
        for i in range(1, 400)
        if i % 9  # some ids have no node (edges to them: written after the node read)
    }
    snap = Snapshot(nodes, {})
    for _ in range(3_000):
        source, target = rng.randrange(1, 420), rng.randrange(1, 420)
        if source != target:
            weight = rng.choice([rng.uniform(-1, 1), 0.5, 0.15, -0.0, 0.1])
            snap.put(source, target, Edge(weight, rng.choice(["learned", "sequence"]), "t"))
    snap.drop(*next(iter(snap.edges)))
    h = measure(snap)
    values = list(snap.edges.values())
    weights = [e.weight for e in values]
    assert h.edges == len(snap.edges)
    assert h.tiers == {
        "strong": sum(1 for w in weights if w >= STRONG),
        "habitual": sum(1 for w in weights if HABITUAL <= w < STRONG),
        "dormant": sum(1 for w in weights if 0 <= w < HABITUAL),
        "inhibitory": sum(1 for w in weights if w < 0),
    }
    where = {n.row_id: (n.source, n.kind) for n in nodes.values()}
    cross = sum(1 for s, t in snap.edges if s in where and t in where and where[s] != where[t])
    assert h.cross_source_share == round(cross / len(snap.edges), 6)
    assert h.orphans == sum(1 for n in nodes if snap.degree(n) == 0)
    assert h.mean_abs_weight == round(sum(abs(w) for w in weights) / len(weights), 6)
    assert h.edges_by_kind == {
        k: sum(1 for e in values if e.kind == k) for k in sorted({e.kind for e in values})
    }
