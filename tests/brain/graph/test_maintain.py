"""The slow loop: decay, merge, prune, connect, scale and health on real database files."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, BrainConfig, Store, open_store
from brain.graph.maintain import MaintainOptions, health, maintain
from brain.graph.nodes import Graph, NewNode, graph_epoch, insert_node
from brain.vectors.embedders import HashEmbedder

DIM = 8
T0 = datetime(2025, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _unit(seed: int) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@dataclass
class G:
    """A graph built by hand: node row ids by name."""

    store: Store
    ids: dict[str, int]

    def node(
        self,
        name: str,
        kind: str = "teaching",
        authority: str = "overlay",
        *,
        vector: int | None = None,
        created: datetime = T0,
        source: str | None = None,
    ) -> int:
        row_id, _, _ = insert_node(
            self.store,
            NewNode(kind, f"text of {name}", authority, source=source),  # type: ignore[arg-type]
            embed=False,
        )
        self.store.execute("UPDATE nodes SET created_at = ? WHERE id = ?", (_iso(created), row_id))
        if vector is not None:
            self.store.execute(
                "INSERT INTO vectors (kind, row_id, conversation_id, vector) "
                "VALUES ('node', ?, 0, ?)",
                (row_id, _unit(vector).tobytes()),
            )
        self.ids[name] = row_id
        return row_id

    def edge(self, a: str, b: str, weight: float, at: datetime = T0) -> None:
        self.store.execute(
            "INSERT INTO edges (source, target, weight, kind, updated_at) "
            "VALUES (?, ?, ?, 'learned', ?)",
            (self.ids[a], self.ids[b], weight, _iso(at)),
        )

    def weight(self, a: str, b: str) -> float | None:
        value = self.store.scalar(
            "SELECT weight FROM edges WHERE source = ? AND target = ?", (self.ids[a], self.ids[b])
        )
        return None if value is None else float(value)

    def exists(self, name: str) -> bool:
        return self.store.one("SELECT 1 FROM nodes WHERE id = ?", (self.ids[name],)) is not None

    def has_vector(self, name: str) -> bool:
        row = self.store.one(
            "SELECT 1 FROM vectors WHERE kind = 'node' AND row_id = ?", (self.ids[name],)
        )
        return row is not None


@pytest.fixture
def g(store: Store) -> G:
    return G(store, {})


def _dump(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: sorted(tuple(r) for r in store.execute(f"SELECT * FROM {table}"))
        for table in ("nodes", "edges", "vectors", "embed_queue", "meta", "traces")
    }


# -- decay --------------------------------------------------------------------------


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


# -- merge --------------------------------------------------------------------------


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
            (f"tr_{i}", orjson.dumps(body).decode(), _iso(T0)),
        )
    report = maintain(g.store, tasks=["merge"], options=MaintainOptions(cofire_traces=5), now=T0)
    assert report.tasks["merge"]["cofiring"] == 1
    assert not g.exists("b")
    assert g.exists("lone")
    content = g.store.scalar("SELECT content FROM nodes WHERE id = ?", (g.ids["a"],))
    assert content == "text of a\ntext of b"
    queued = g.store.scalar("SELECT count(*) FROM embed_queue WHERE row_id = ?", (g.ids["a"],))
    assert queued == 1  # its text changed: embedded again


# -- prune --------------------------------------------------------------------------


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
        "UPDATE nodes SET last_fired_at = ? WHERE id = ?", (_iso(T0 - DAY), g.ids["fired"])
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


# -- connect and scale ----------------------------------------------------------------


def test_connect_links_a_lonely_teaching_to_its_nearest_chunks_both_ways(g: G) -> None:
    g.node("t", vector=1)
    g.node("near", kind="chunk", vector=1, source="a.md")
    g.node("far", kind="chunk", vector=7, source="b.md")
    g.node("rule", kind="directive", authority="constitutional", vector=1)
    report = maintain(
        g.store, tasks=["connect"], options=MaintainOptions(connect_k=1, connect_similarity=0.9)
    )
    assert (report.tasks["connect"]["nodes"], report.tasks["connect"]["edges"]) == (1, 2)
    assert g.weight("t", "near") == pytest.approx(0.5)
    assert g.weight("near", "t") == pytest.approx(0.5)
    assert g.weight("t", "far") is None
    assert g.weight("rule", "near") is None


def test_scaling_caps_a_nodes_positive_outgoing_weight(g: G) -> None:
    for name in ("hub", "a", "b", "c", "d", "e"):
        g.node(name)
    for name in "abcd":
        g.edge("hub", name, 1.0)
    g.edge("hub", "e", -0.9)
    maintain(g.store, tasks=["scale"], options=MaintainOptions(scale_budget=2.0), now=T0)
    assert [g.weight("hub", n) for n in "abcd"] == [pytest.approx(0.5)] * 4
    assert g.weight("hub", "e") == -0.9


# -- dry runs, health, chunks ------------------------------------------------------------


def _mixed(g: G) -> None:
    old = T0 - 60 * DAY
    g.node("a", vector=1, created=old)
    g.node("b", vector=1, created=old)
    g.node("c", vector=2, created=old)
    g.node("idle", vector=3, created=old)
    g.node("chunk", kind="chunk", vector=2, source="x.md", created=old)
    g.node("k", authority="constitutional", created=old)
    g.edge("a", "c", 0.9, at=old)
    g.edge("b", "c", 0.3, at=old)
    g.edge("c", "a", 0.2, at=T0 - 20 * DAY)
    g.edge("k", "a", 0.9, at=old)


def test_a_dry_run_writes_nothing_and_reports_what_a_run_does(g: G) -> None:
    _mixed(g)
    before = _dump(g.store)
    dry = maintain(g.store, dry_run=True, now=T0)
    assert _dump(g.store) == before
    real = maintain(g.store, now=T0)
    assert dry.dry_run
    assert not real.dry_run
    assert dry.health_after == real.health_after
    for name, report in real.tasks.items():
        assert {k: v for k, v in dry.tasks[name].items() if k != "took_ms"} == {
            k: v for k, v in report.items() if k != "took_ms"
        }


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


def test_every_chunk_of_writes_is_its_own_transaction_and_moves_the_epoch(g: G) -> None:
    for i in range(7):
        g.node(f"n{i}")
    for i in range(6):
        g.edge(f"n{i}", f"n{i + 1}", 0.8)
    epoch = graph_epoch(g.store)
    maintain(g.store, tasks=["decay"], options=MaintainOptions(chunk=2), now=T0 + DAY)
    assert graph_epoch(g.store) == epoch + 3


def test_unknown_tasks_are_refused() -> None:
    from brain.errors import InvalidInput

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "x.db", BrainConfig())
        with pytest.raises(InvalidInput):
            maintain(store, tasks=["decay", "defrag"])
        store.close()


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        ("prune_below", 5.0),  # would delete every edge
        ("prune_below", -0.1),
        ("merge_similarity", 1.5),
        ("connect_similarity", math.nan),
        ("half_life_days", 0.0),
        ("half_life_days", math.nan),
        ("orphan_days", -1.0),
        ("orphan_days", math.inf),
        ("scale_budget", 0.0),
        ("min_decay", -1e-4),
        ("chunk", 0),
        ("cofire_traces", 0),
        ("connect_k", -1),
    ],
)
def test_maintain_options_refuse_a_knob_out_of_its_range(knob: str, value: float) -> None:
    from brain.errors import InvalidInput

    with pytest.raises(InvalidInput) as refused:
        MaintainOptions(**{knob: value})
    assert refused.value.field == knob


# -- constitutional nodes never change -------------------------------------------------

graphs = st.fixed_dictionaries(
    {
        "nodes": st.lists(
            st.tuples(
                st.sampled_from(["teaching", "correction", "directive", "chunk"]),
                st.sampled_from(["constitutional", "canonical", "overlay", "overlay"]),
                st.integers(0, 3),  # vector seed: equal seeds are duplicates
                st.integers(0, 90),  # age in days
            ),
            min_size=2,
            max_size=10,
        ),
        "edges": st.lists(
            st.tuples(
                st.integers(0, 9),
                st.integers(0, 9),
                st.floats(-1, 1, allow_nan=False),
                st.integers(0, 60),
            ),
            max_size=30,
        ),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs)
def test_no_task_ever_changes_a_constitutional_node_or_its_edges(spec: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "g.db", BrainConfig())
        try:
            g = G(store, {})
            with store.transaction():
                for i, (kind, authority, seed, age) in enumerate(spec["nodes"]):
                    g.node(str(i), kind, authority, vector=seed, created=T0 - age * DAY, source="s")
                n = len(spec["nodes"])
                seen: set[tuple[int, int]] = set()
                for x, y, w, age in spec["edges"]:
                    a, b = x % n, y % n
                    if a != b and (a, b) not in seen:
                        seen.add((a, b))
                        g.edge(str(a), str(b), w, at=T0 - age * DAY)

            def protected() -> tuple[list[Any], list[Any], list[Any]]:
                nodes = store.execute(
                    "SELECT * FROM nodes WHERE authority = 'constitutional' ORDER BY id"
                ).fetchall()
                edges = store.execute(
                    "SELECT e.* FROM edges e JOIN nodes a ON a.id = e.source "
                    "JOIN nodes b ON b.id = e.target WHERE 'constitutional' IN "
                    "(a.authority, b.authority) ORDER BY 1, 2"
                ).fetchall()
                vectors = store.execute(
                    "SELECT v.* FROM vectors v JOIN nodes n ON n.id = v.row_id "
                    "WHERE n.authority = 'constitutional' ORDER BY 2"
                ).fetchall()
                return nodes, edges, vectors

            before = protected()
            canonical = store.execute(
                "SELECT id FROM nodes WHERE authority = 'canonical' ORDER BY id"
            ).fetchall()
            report = maintain(store, Graph(), now=T0, options=MaintainOptions(connect_k=2))
            assert protected() == before
            assert (
                store.execute(
                    "SELECT id FROM nodes WHERE authority = 'canonical' ORDER BY id"
                ).fetchall()
                == canonical
            )
            ghosts = store.scalar(
                "SELECT count(*) FROM vectors v WHERE kind = 'node' "
                "AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = v.row_id)"
            )
            assert ghosts == 0
            assert report.health_after.nodes == store.scalar("SELECT count(*) FROM nodes")
            total = sum(
                abs(w) for (w,) in store.execute("SELECT weight FROM edges WHERE weight > 0")
            )
            assert math.isfinite(total)
        finally:
            store.close()


# -- through the engine --------------------------------------------------------------


def test_the_engine_answers_from_the_maintained_graph(db_path: Path) -> None:
    brain = Brain(db_path)
    brain.embedder = HashEmbedder(64)
    try:
        first = brain.teach(NewNode("teaching", "the staging database lives on host nova"))
        second = brain.teach(NewNode("teaching", "the staging database lives on host nova!"))
        assert brain.health().nodes == 2
        brain.query("where does the staging database live")  # loads the mirror and the index
        report = brain.maintain(["merge"], options=MaintainOptions(merge_similarity=0.9))
        assert report.tasks["merge"]["ids"] == [second.node_id]
        result = brain.query("where does the staging database live")
        assert [f.id for f in result.fired] == [first.node_id]
        assert brain.info().nodes == 1
    finally:
        brain.close()


def test_no_full_garbage_collection_starts_while_a_run_holds_its_snapshot(db_path: Path) -> None:
    # A full collection walks every object while holding the GIL: in a daemon, every
    # other request stood still for it (4.4 s at 1M edges).
    import gc

    store = open_store(db_path)
    try:
        with store.transaction():
            rows = [
                insert_node(store, NewNode("teaching", f"fact {i}"), embed=False)[0]
                for i in range(5_000)
            ]
            store.conn.executemany(
                "INSERT INTO edges (source, target, weight, kind, updated_at) "
                "VALUES (?, ?, 0.5, 'learned', ?)",
                (
                    (rows[i], rows[(i + 1 + k) % len(rows)], _iso(T0))
                    for i in range(len(rows))
                    for k in range(20)
                ),
            )
        full: list[int] = []

        def seen(phase: str, info: dict[str, int]) -> None:
            if phase == "start" and info["generation"] == 2:
                full.append(1)

        threshold = gc.get_threshold()
        gc.callbacks.append(seen)
        try:
            report = maintain(store, dry_run=True, now=T0 + 30 * DAY)
        finally:
            gc.callbacks.remove(seen)
        assert report.tasks["decay"]["decayed"] == 100_000
        assert full == []
        assert gc.get_threshold() == threshold  # the process's setting is back
    finally:
        store.close()
