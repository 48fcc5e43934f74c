"""The merge task: near-duplicates and always-co-firing nodes fold into the older one."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import orjson

from brain.graph.maintain import MaintainOptions, maintain
from brain.graph.maintain.merge import EXACT_PAIRS_BELOW, near_pairs
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


def _planted(rows: int, seed: int) -> tuple[npt.NDArray[np.float32], list[tuple[int, int]]]:
    """Random unit rows, with every 20th row's 7th follower made a near-duplicate of it."""
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((rows, 64)).astype(np.float32)
    planted = [(k, k + 7) for k in range(0, min(rows, 2_000), 20)]
    for k, j in planted:
        matrix[j] = matrix[k] + 0.1 * rng.standard_normal(64).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix, planted


def test_a_group_past_the_exact_size_finds_its_near_duplicates_through_ivf_lists() -> None:
    # Every pair at 100k nodes was 10^10 products (200 s of a run); past
    # EXACT_PAIRS_BELOW a row is only scored against the rows of its two nearest lists.
    matrix, planted = _planted(EXACT_PAIRS_BELOW * 2, seed=7)
    exact = [(i, j) for i, j in zip(*np.nonzero(matrix @ matrix.T >= 0.95), strict=True) if i < j]
    assert set(planted) <= set(exact)

    found = near_pairs(matrix, 0.95)

    assert found == sorted(found)
    assert set(found) <= set(exact)  # never a pair below the threshold
    assert len(found) >= 0.9 * len(exact)  # random rows: the worst case for clustering


def test_a_group_below_the_exact_size_compares_every_pair() -> None:
    matrix, _ = _planted(600, seed=8)
    exact = sorted(
        (int(i), int(j))
        for i, j in zip(*np.nonzero(matrix @ matrix.T >= 0.95), strict=True)
        if i < j
    )

    assert near_pairs(matrix, 0.95) == exact
