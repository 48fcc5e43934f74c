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
