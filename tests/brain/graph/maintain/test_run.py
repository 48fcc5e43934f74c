"""The scheduler: dry runs, tasks by name, chunked transactions, constitutional nodes, engine."""

from __future__ import annotations

import math
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, BrainConfig, Store, open_store
from brain.graph.maintain import MaintainOptions, health, maintain
from brain.graph.maintain.snapshot import Snapshot
from brain.graph.maintain.writer import Write, Writer
from brain.graph.mirror import Graph, Step
from brain.graph.nodes import NewNode, bump_epoch, graph_epoch, insert_node
from brain.store.groupsync import GroupSync
from brain.vectors.embedders import HashEmbedder
from tests.brain.graph.maintain.helpers import (
    DAY,
    T0,
    G,
    count_loads,
    dump,
    iso_at,
    mirror_maps,
    mixed,
)


def test_a_dry_run_writes_nothing_and_reports_what_a_run_does(g: G) -> None:
    mixed(g)
    before = dump(g.store)
    dry = maintain(g.store, dry_run=True, now=T0)
    assert dump(g.store) == before
    real = maintain(g.store, now=T0)
    assert dry.dry_run
    assert not real.dry_run
    assert dry.health_after == real.health_after
    for name, report in real.tasks.items():
        assert {k: v for k, v in dry.tasks[name].items() if k != "took_ms"} == {
            k: v for k, v in report.items() if k != "took_ms"
        }


def test_every_chunk_of_writes_is_its_own_transaction_and_moves_the_epoch(g: G) -> None:
    for i in range(7):
        g.node(f"n{i}")
    for i in range(6):
        g.edge(f"n{i}", f"n{i + 1}", 0.8)
    epoch = graph_epoch(g.store)
    maintain(g.store, tasks=["decay"], options=MaintainOptions(chunk=2, sweep=2), now=T0 + DAY)
    assert graph_epoch(g.store) == epoch + 3


def test_unknown_tasks_are_refused() -> None:
    from brain.errors import InvalidInput

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "x.db", BrainConfig())
        with pytest.raises(InvalidInput):
            maintain(store, tasks=["decay", "defrag"])
        store.close()


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
                    (rows[i], rows[(i + 1 + k) % len(rows)], iso_at(T0))
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


_RULES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]


def _taught_graph(brain: Brain) -> None:
    """Taught nodes linked to their neighbours, one near-duplicate, edges of two ages."""
    for i, word in enumerate(_RULES * 3):
        brain.teach(NewNode("teaching", f"release rule {i}: {word} checks before the deploy"))
    brain.teach(NewNode("teaching", "release rule 0: alpha checks before the deploy!"))
    now = datetime.now(UTC)
    with brain.store.transaction():  # before the mirror loads: no epoch needed
        brain.store.execute(
            "UPDATE edges SET updated_at = CASE WHEN source % 2 = 0 THEN ? ELSE ? END",
            (iso_at(now - 60 * DAY), iso_at(now - 10 * DAY)),
        )


@pytest.mark.parametrize("in_child", [True, False], ids=["child process", "in process"])
def test_queries_and_a_teach_during_maintain_follow_its_chunks_without_reloading_the_mirror(
    db_path: Path, in_child: bool
) -> None:
    brain = Brain(db_path)
    brain.embedder = HashEmbedder(64)
    try:
        _taught_graph(brain)
        brain.query("release rule alpha", record=False)  # loads the mirror
        loads = count_loads(brain._graph.mirror)
        during: list[list[str]] = []
        taught: list[str] = []

        def progress(done: int, total: int | None, phase: str) -> None:
            if phase == "prune":  # decay's and merge's chunks are committed
                during.append([f.id for f in brain.query("release rule", record=False).fired])
                taught.append(
                    brain.teach(NewNode("teaching", "zebra crossings need a guard")).node_id
                )
                found = brain.query("zebra crossings need a guard", record=False)
                during.append([f.id for f in found.fired])

        report = brain.maintain(
            options=MaintainOptions(chunk=5, sweep=5, merge_similarity=0.9),
            progress=progress,
            in_child=in_child,
        )
        assert report.tasks["decay"]["decayed"] > 5 * 3  # many chunks, each a new epoch
        assert report.tasks["merge"]["merged"] >= 1
        assert report.tasks["prune"]["edges"] > 0
        assert during[0]  # answered during the run
        assert taught[0] in during[1]  # the teach is visible to the next query
        after = brain.query("zebra crossings need a guard", record=False)
        assert taught[0] in [f.id for f in after.fired]
        assert loads == []  # every chunk and the teach were applied, never reloaded
        mirror = brain._graph.mirror.snapshot()
        side = open_store(db_path)
        try:
            fresh = Graph().refresh(side)
        finally:
            side.close()
        assert mirror.epoch == fresh.epoch
        assert mirror_maps(mirror) == mirror_maps(fresh)
    finally:
        brain.close()


def test_a_chunk_with_one_row_changed_since_the_snapshot_skips_it_and_writes_the_rest(
    g: G,
) -> None:
    for i in range(5):
        g.node(f"n{i}")
    for i in range(4):
        g.edge(f"n{i}", f"n{i + 1}", 0.8)
    then = iso_at(T0)
    # A teach rewrote one edge after the snapshot was read: its write must find nothing.
    g.store.execute(
        "UPDATE edges SET weight = 0.3, updated_at = ? WHERE source = ? AND target = ?",
        (iso_at(T0 + DAY), g.ids["n1"], g.ids["n2"]),
    )
    steps: list[Step] = []
    writer = Writer(g.store, chunk=10, dry_run=False, on_commit=steps.append)
    pairs = [(g.ids[f"n{i}"], g.ids[f"n{i + 1}"]) for i in range(4)]
    writes: list[Write] = [
        (
            "UPDATE edges SET weight = ?, updated_at = ? "
            "WHERE source = ? AND target = ? AND updated_at = ?",
            (0.5, iso_at(T0 + 2 * DAY), s, t, then),
        )
        for s, t in pairs
    ]

    changed = writer.run(writes, effects=[("edge", s, t, 0.5) for s, t in pairs])

    assert changed == 3
    assert g.weight("n1", "n2") == 0.3  # the newer value stays
    assert [g.weight(f"n{i}", f"n{i + 1}") for i in (0, 2, 3)] == [0.5, 0.5, 0.5]
    assert [op[1:3] for step in steps for op in step.delta.ops] == [
        pairs[0],
        pairs[2],
        pairs[3],
    ]


def test_a_chunk_whose_rows_are_all_as_the_snapshot_saw_them_is_one_transaction(g: G) -> None:
    for i in range(5):
        g.node(f"n{i}")
    for i in range(4):
        g.edge(f"n{i}", f"n{i + 1}", 0.8)
    steps: list[Step] = []
    writer = Writer(g.store, chunk=10, dry_run=False, on_commit=steps.append)
    pairs = [(g.ids[f"n{i}"], g.ids[f"n{i + 1}"]) for i in range(4)]
    writes: list[Write] = [
        (
            "UPDATE edges SET weight = ?, updated_at = ? "
            "WHERE source = ? AND target = ? AND updated_at = ?",
            (0.5, iso_at(T0 + DAY), s, t, iso_at(T0)),
        )
        for s, t in pairs
    ]

    assert writer.run(writes, effects=[("edge", s, t, 0.5) for s, t in pairs]) == 4
    assert writer.transactions == 1
    assert [op[1:3] for step in steps for op in step.delta.ops] == pairs


def _decaying(g: G) -> None:
    for i in range(6):
        g.node(f"n{i}")
    for i in range(5):
        g.edge(f"n{i}", f"n{i + 1}", 0.8 - 0.1 * i)


def test_a_run_alone_reports_the_health_it_stored_without_reading_the_graph_again(
    g: G, monkeypatch: pytest.MonkeyPatch
) -> None:
    _decaying(g)
    loads: list[int] = []
    load = Snapshot.load.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Snapshot], store: Store) -> Snapshot:
        loads.append(1)
        return load(cls, store)  # type: ignore[no-any-return]

    monkeypatch.setattr(Snapshot, "load", classmethod(counted))

    report = maintain(
        g.store,
        tasks=["decay", "prune"],
        options=MaintainOptions(chunk=2, sweep=2),
        now=T0 + 40 * DAY,
    )

    assert loads == [1]
    monkeypatch.undo()
    assert report.health_after == health(g.store)


def test_a_run_beside_another_writer_reads_the_graph_again_for_its_health_after(
    g: G, db_path: Path
) -> None:
    _decaying(g)
    other = open_store(db_path)
    try:

        def another_process_writes(_step: Step) -> None:
            if other.scalar("SELECT count(*) FROM nodes") == 6:
                with other.transaction():
                    insert_node(other, NewNode("teaching", "taught meanwhile"), embed=False)
                    other.execute(
                        "INSERT INTO edges (source, target, weight, kind, updated_at) "
                        "VALUES (?, ?, 0.9, 'learned', ?)",
                        (g.ids["n0"], g.ids["n5"], iso_at(T0 + 40 * DAY)),
                    )
                    bump_epoch(other)

        report = maintain(
            g.store,
            tasks=["decay"],
            options=MaintainOptions(chunk=2, sweep=2),
            now=T0 + 40 * DAY,
            on_commit=another_process_writes,
        )
    finally:
        other.close()

    assert report.health_after == health(g.store)
    assert report.health_after.nodes == 7


def test_a_run_commits_its_chunks_unsynced_and_fsyncs_the_wal_once_before_it_returns(
    g: G, monkeypatch: pytest.MonkeyPatch
) -> None:
    _decaying(g)
    level = g.store.scalar("PRAGMA synchronous")
    assert level == 2  # FULL: every commit waits for its fsync
    fsyncs: list[int] = []
    fsync = GroupSync._fsync

    def counted(self: GroupSync) -> None:
        fsyncs.append(1)
        fsync(self)

    monkeypatch.setattr(GroupSync, "_fsync", counted)
    during: list[int] = []

    def chunk(_step: Step) -> None:
        during.append(int(g.store.scalar("PRAGMA synchronous")))

    maintain(
        g.store,
        tasks=["decay"],
        options=MaintainOptions(chunk=2, sweep=2),
        now=T0 + DAY,
        on_commit=chunk,
    )

    assert during == [1, 1, 1]  # NORMAL: ~2.5 ms of disk wait saved per chunk
    assert fsyncs == [1]
    assert g.store.scalar("PRAGMA synchronous") == level


def test_a_run_with_no_writer_waiting_never_rests_between_its_transactions(
    g: G, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(9):
        g.node(f"n{i}")
    for i in range(8):
        g.edge(f"n{i}", f"n{i + 1}", 0.8)
    rests: list[float] = []
    monkeypatch.setattr("brain.graph.maintain.writer.time.sleep", rests.append)
    report = maintain(
        g.store, tasks=["decay", "prune"], options=MaintainOptions(sweep=2), now=T0 + 400 * DAY
    )
    assert report.tasks["decay"]["decayed"] == 8
    assert report.tasks["prune"]["edges"] == 8
    assert rests == []


def test_a_writer_waiting_during_a_sweep_gets_in_between_two_of_its_transactions(
    g: G, db_path: Path
) -> None:
    for i in range(9):
        g.node(f"n{i}")
    for i in range(8):
        g.edge(f"n{i}", f"n{i + 1}", 0.8)
    other = open_store(db_path, BrainConfig(busy_timeout_ms=10_000))
    order: list[str] = []
    spans = 0

    def write() -> None:
        with other.transaction():
            order.append("theirs")

    writer_thread = threading.Thread(target=write)

    def on_rows(rows: list[tuple[Any, ...]]) -> None:
        nonlocal spans
        spans += 1
        order.append(f"span {spans}")
        if spans == 1:  # the other writer starts waiting while the first span holds the lock
            writer_thread.start()
            deadline = time.monotonic() + 10
            while not g.store.waiting.anyone():
                assert time.monotonic() < deadline
                time.sleep(0.001)

    try:
        writer = Writer(g.store, 500, dry_run=False)
        params = [(lo, hi) for lo, hi in Snapshot.load(g.store).source_ranges(2)]
        found = writer.sweep(
            "SELECT source, target FROM edges WHERE source BETWEEN ?1 AND ?2", params, on_rows
        )
        writer_thread.join(10)
    finally:
        other.close()
    assert found == 8
    assert order[:3] == ["span 1", "theirs", "span 2"]
