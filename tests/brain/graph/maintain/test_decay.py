"""The decay task: edges weaken with the time since they last changed."""

from __future__ import annotations

import pytest

from brain.graph.maintain import MaintainOptions, maintain
from tests.brain.graph.maintain.helpers import DAY, T0, G


def test_decay_halves_an_edge_per_half_life_and_a_canonical_edge_per_two(g: G) -> None:
    for name, authority in (("a", "overlay"), ("b", "overlay"), ("c", "canonical")):
        g.node(name, authority=authority)
    g.node("k", authority="constitutional")
    g.edge("a", "b", 0.8)
    g.edge("a", "c", 0.8)
    g.edge("a", "k", 0.8)
    g.edge("k", "a", -0.6)
    maintain(g.store, tasks=["decay"], now=T0 + 14 * DAY)
    assert g.weight("a", "b") == pytest.approx(0.4)
    assert g.weight("a", "c") == pytest.approx(0.8 * 0.5**0.5)
    assert g.weight("a", "k") == 0.8
    assert g.weight("k", "a") == -0.6


def test_two_decays_of_a_week_equal_one_of_two_weeks(g: G) -> None:
    g.node("a")
    g.node("b")
    g.edge("a", "b", -0.9)
    maintain(g.store, tasks=["decay"], now=T0 + 7 * DAY)
    maintain(g.store, tasks=["decay"], now=T0 + 14 * DAY)
    assert g.weight("a", "b") == pytest.approx(-0.45, abs=1e-6)


def test_decay_follows_a_configured_half_life(g: G) -> None:
    g.node("a")
    g.node("b")
    g.edge("a", "b", 0.6)
    options = MaintainOptions(half_life_days=2)
    maintain(g.store, tasks=["decay"], now=T0 + 1 * DAY, options=options)
    assert g.weight("a", "b") == pytest.approx(0.6 * 2**-0.5)
