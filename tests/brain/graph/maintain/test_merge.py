"""The merge task: near-duplicates and always-co-firing nodes fold into the older one."""

from __future__ import annotations

import orjson

from brain.graph.maintain import MaintainOptions, maintain
from tests.brain.graph.maintain.helpers import T0, G, iso_at


def test_merge_folds_a_near_duplicate_into_the_older_node_and_deletes_its_vector(g: G) -> None:
    g.node("old", vector=1)
    g.node("dup", vector=1)
    g.node("c", vector=2)
    g.node("d", vector=3)
    g.edge("old", "c", 0.6)
    g.edge("dup", "c", 0.4)
    g.edge("dup", "old", 0.9)
    g.edge("d", "dup", -0.7)
    g.store.execute("INSERT INTO embed_queue (kind, row_id) VALUES ('node', ?)", (g.ids["dup"],))
    dup_id = g.store.scalar("SELECT node_id FROM nodes WHERE id = ?", (g.ids["dup"],))
    epoch = g.store.scalar("SELECT value FROM meta WHERE key = 'vectors_epoch:node'")

    report = maintain(g.store, tasks=["merge"], now=T0)

    assert report.tasks["merge"]["merged"] == 1
    assert report.tasks["merge"]["ids"] == [dup_id]
    assert not g.exists("dup")
    assert not g.has_vector("dup")
    assert g.store.scalar("SELECT count(*) FROM embed_queue WHERE row_id = ?", (g.ids["dup"],)) == 0
    assert g.weight("old", "c") == 0.6  # the stronger weight wins
    assert g.weight("d", "old") == -0.7  # sign kept
    assert g.store.scalar("SELECT count(*) FROM edges WHERE source = target") == 0
    metadata = orjson.loads(
        g.store.scalar("SELECT metadata FROM nodes WHERE id = ?", (g.ids["old"],))
    )
    assert metadata["merged"] == [dup_id]
    assert g.store.scalar("SELECT value FROM meta WHERE key = 'vectors_epoch:node'") != epoch


def test_merge_leaves_protected_and_unlike_nodes_alone(g: G) -> None:
    g.node("a", authority="canonical", vector=1)
    g.node("b", authority="canonical", vector=1)
    g.node("c", authority="constitutional", vector=2)
    g.node("d", vector=2)
    g.node("e", vector=3)
    g.node("f", kind="directive", vector=3)  # same vector, other kind
    g.node("x", vector=4)
    g.node("y", vector=4)
    g.node("k", authority="constitutional", vector=5)
    g.edge("k", "y", 0.5)  # y's edges are a constitutional node's edges
    report = maintain(g.store, tasks=["merge"], now=T0)
    assert report.tasks["merge"]["merged"] == 0
    assert all(g.exists(n) for n in "abcdefxy")


def test_nodes_that_always_fire_together_merge_and_keep_both_texts(g: G) -> None:
    g.node("a", vector=1)
    g.node("b", vector=2)
    g.node("lone", vector=3)
    for i in range(5):
        fired = [[g.ids["a"], 1.0], [g.ids["b"], 0.5]] + ([[g.ids["lone"], 0.2]] if i else [])
        body = {"seeds": [], "steps": [], "fired": fired, "inhibited": [], "timings": {}}
        g.store.execute(
            "INSERT INTO traces (trace_id, query, body, created_at) VALUES (?, 'q', ?, ?)",
            (f"tr_{i}", orjson.dumps(body).decode(), iso_at(T0)),
        )
    report = maintain(g.store, tasks=["merge"], options=MaintainOptions(cofire_traces=5), now=T0)
    assert report.tasks["merge"]["cofiring"] == 1
    assert not g.exists("b")
    assert g.exists("lone")
    content = g.store.scalar("SELECT content FROM nodes WHERE id = ?", (g.ids["a"],))
    assert content == "text of a\ntext of b"
    queued = g.store.scalar("SELECT count(*) FROM embed_queue WHERE row_id = ?", (g.ids["a"],))
    assert queued == 1  # its text changed: embedded again
