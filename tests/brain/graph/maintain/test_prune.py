"""The prune task: weak edges and long-idle edgeless learning nodes go."""

from __future__ import annotations

from brain.graph.maintain import MaintainOptions, maintain
from brain.graph.nodes import graph_epoch
from tests.brain.graph.maintain.helpers import DAY, T0, G, iso_at


def test_prune_drops_weak_edges_except_a_constitutional_nodes(g: G) -> None:
    g.node("a")
    g.node("b")
    g.node("k", authority="constitutional")
    g.edge("a", "b", 0.04)
    g.edge("b", "a", -0.03)
    g.edge("a", "k", 0.01)
    report = maintain(g.store, tasks=["prune"], now=T0)
    assert report.tasks["prune"]["edges"] == 2
    assert g.weight("a", "b") is None
    assert g.weight("b", "a") is None
    assert g.weight("a", "k") == 0.01


def test_prune_deletes_only_idle_edgeless_overlay_learning_nodes(g: G) -> None:
    old = T0 - 60 * DAY
    g.node("idle", vector=1, created=old)
    g.node("fresh", vector=2, created=T0 - DAY)
    g.node("fired", vector=3, created=old)
    g.store.execute(
        "UPDATE nodes SET last_fired_at = ? WHERE id = ?", (iso_at(T0 - DAY), g.ids["fired"])
    )
    g.node("canon", authority="canonical", created=old)
    g.node("const", authority="constitutional", created=old)
    g.node("chunk", kind="chunk", created=old, source="a.md")
    g.node("linked", created=old)
    g.node("other", created=old)
    g.edge("linked", "other", 0.5, at=T0)

    report = maintain(g.store, tasks=["prune"], now=T0)

    assert report.tasks["prune"]["nodes"] == 1
    assert not g.exists("idle")
    assert not g.has_vector("idle")
    assert all(g.exists(n) for n in ("fresh", "fired", "canon", "const", "chunk", "linked"))


def test_prune_deletes_the_weak_edges_of_a_span_of_sources_per_transaction(g: G) -> None:
    n = 400
    for i in range(n):
        g.node(f"n{i}")
    g.node("k", authority="constitutional")
    weak = [(f"n{i}", f"n{(i + j) % n}") for i in range(n) for j in (1, 2, 3)]
    for a, b in weak:
        g.edge(a, b, 0.01)
    g.edge("n0", "k", 0.01)
    g.edge("n0", "n9", 0.5)
    epoch = graph_epoch(g.store)
    report = maintain(g.store, tasks=["prune"], now=T0)
    assert report.tasks["prune"]["edges"] == 1_200
    assert report.tasks["prune"]["edges_protected"] == 1
    # Three 500-row chunks before; one statement over every source now.
    assert graph_epoch(g.store) == epoch + 1
    assert [r[0] for r in g.store.execute("SELECT weight FROM edges ORDER BY weight")] == [
        0.01,
        0.5,
    ]


def test_prune_deletes_a_span_of_three_sweep_spans_per_transaction(g: G) -> None:
    # Its deletions land at random places of the target index, which each transaction
    # writes out again: fewer, larger transactions (decay keeps MaintainOptions.sweep).
    for i in range(13):
        g.node(f"n{i}")
    for i in range(12):
        g.edge(f"n{i}", f"n{i + 1}", 0.01)
    epoch = graph_epoch(g.store)
    report = maintain(g.store, tasks=["prune"], options=MaintainOptions(sweep=2), now=T0)
    assert report.tasks["prune"]["edges"] == 12
    assert graph_epoch(g.store) == epoch + 2  # 12 sources of one edge, 6 a transaction
