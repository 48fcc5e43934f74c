"""The decay task: edges weaken with the time since they last changed."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from brain.clock import parse
from brain.graph.maintain import MaintainOptions, maintain
from brain.graph.nodes import graph_epoch
from tests.brain.graph.maintain.helpers import DAY, T0, G, iso_at


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


def _fan(g: G, edges: int, at: datetime) -> list[tuple[int, int, float, str]]:
    """Nodes in a ring, each linked to its next three: ``edges`` edges, changed at ``at``
    plus a few milliseconds each (stamps differ)."""
    n = edges // 3
    for i in range(n):
        g.node(f"n{i}")
    rows = [
        (
            g.ids[f"n{i}"],
            g.ids[f"n{(i + j) % n}"],
            round(0.1 + 0.8 * ((i * 7 + j) % 97) / 97, 4),
            iso_at(at + timedelta(milliseconds=i * 37 + j)),
        )
        for i in range(n)
        for j in (1, 2, 3)
    ]
    g.store.executemany(
        "INSERT INTO edges (source, target, weight, kind, updated_at) "
        "VALUES (?, ?, ?, 'learned', ?)",
        rows,
    )
    return rows


def test_decay_writes_a_span_of_sources_per_transaction_not_a_chunk_of_rows(g: G) -> None:
    _fan(g, 1_500, T0)
    epoch = graph_epoch(g.store)
    report = maintain(g.store, tasks=["decay"], now=T0 + 3 * DAY)
    assert report.tasks["decay"]["decayed"] == 1_500
    # Three 500-row chunks before; one statement over every source now (sweep 20,000).
    assert graph_epoch(g.store) == epoch + 1
    maintain(g.store, tasks=["decay"], options=MaintainOptions(sweep=600), now=T0 + 4 * DAY)
    assert graph_epoch(g.store) == epoch + 1 + 3  # 600 edges (200 sources) a span


def test_a_decay_stores_to_the_bit_what_the_formula_gives_from_each_stamp(g: G) -> None:
    rows = _fan(g, 300, T0)
    now = T0 + timedelta(days=9, microseconds=123_457)  # a moment finer than the stamps
    maintain(g.store, tasks=["decay"], now=now)
    stored = {(s, t): w for s, t, w in g.store.execute("SELECT source, target, weight FROM edges")}
    half_life = 14 * 86_400.0
    for source, target, weight, stamp in rows:
        elapsed = (now - parse(stamp)).total_seconds()
        assert stored[(source, target)] == weight * 0.5 ** (elapsed / half_life)
