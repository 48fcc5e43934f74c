"""The scale task: a node's positive outgoing weight is capped."""

from __future__ import annotations

import pytest

from brain.graph.maintain import MaintainOptions, maintain
from tests.brain.graph.maintain.helpers import T0, G


def test_scaling_caps_a_nodes_positive_outgoing_weight(g: G) -> None:
    for name in ("hub", "a", "b", "c", "d", "e"):
        g.node(name)
    for name in "abcd":
        g.edge("hub", name, 1.0)
    g.edge("hub", "e", -0.9)
    maintain(g.store, tasks=["scale"], options=MaintainOptions(scale_budget=2.0), now=T0)
    assert [g.weight("hub", n) for n in "abcd"] == [pytest.approx(0.5)] * 4
    assert g.weight("hub", "e") == -0.9
