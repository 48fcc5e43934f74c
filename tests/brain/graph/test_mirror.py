"""The hot mirror: committed steps move it forward, readers never see half of one, and it
reloads from the tables only when a write it was not told about moved the epoch."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain import Store, open_store
from brain.graph.mirror import HISTORY, Graph, GraphDelta, GraphState, Step
from brain.graph.nodes import EdgeWrite, NewNode, bump_epoch, graph_epoch, insert_node
from brain.graph.packed import PackedRows
from tests.brain.graph.maintain.helpers import count_loads, mirror_maps

WAIT_S = 30.0


@pytest.fixture
def two(db_path: Path) -> Iterator[tuple[Store, Store]]:
    """A writer's and a reader's connection to one database."""
    writer = open_store(db_path)
    reader = open_store(db_path)
    try:
        yield writer, reader
    finally:
        reader.close()
        writer.close()


def _nodes(store: Store, n: int) -> list[int]:
    with store.transaction():
        rows = [insert_node(store, NewNode("teaching", f"n{i}"), embed=False)[0] for i in range(n)]
        bump_epoch(store)
    return rows


def _chain(store: Store, rows: list[int]) -> None:
    """Link each of ``rows`` to the next (weight 0.5) in one transaction."""
    with store.transaction():
        for source, target in itertools.pairwise(rows):
            store.execute(
                "INSERT INTO edges (source, target, weight, kind, updated_at) "
                "VALUES (?, ?, 0.5, 'learned', '2025-01-01T00:00:00.000Z')",
                (source, target),
            )
        bump_epoch(store)


def _write_edge(store: Store, source: int, target: int, weight: float) -> Step:
    """Store an edge in its own transaction; the step it made."""
    with store.transaction():
        store.execute(
            "INSERT INTO edges (source, target, weight, kind, updated_at) "
            "VALUES (?, ?, ?, 'learned', '2025-01-01T00:00:00.000Z') "
            "ON CONFLICT (source, target) DO UPDATE SET weight = excluded.weight",
            (source, target, weight),
        )
        after = bump_epoch(store)
    delta = GraphDelta()
    delta.set_edge(source, target, weight)
    return Step(after - 1, after, delta)


def test_a_step_that_arrives_before_the_one_it_follows_waits_and_both_land_in_one_swap(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b, c = _nodes(writer, 3)
    graph = Graph()
    start = graph.refresh(reader)
    first = _write_edge(writer, a, b, 0.5)
    second = _write_edge(writer, b, c, 0.25)
    with graph.following():
        assert not graph.advance([second])  # a teach that committed right after a chunk
        assert graph.snapshot() is start
        assert graph.advance([first])
    state = graph.snapshot()
    assert state.epoch == second.after
    assert state.out == {a: {b: 0.5}, b: {c: 0.25}}
    assert start.out == {}  # the state a reader held is as it was


def test_a_reader_a_step_ahead_gets_the_newest_state_at_once_while_a_writer_follows(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b = _nodes(writer, 2)
    graph = Graph()
    start = graph.refresh(reader)
    loads = count_loads(graph)
    with graph.following():
        step = _write_edge(writer, a, b, 0.5)  # committed (a chunk); its step in transit
        assert graph_epoch(reader) == step.after
        state = graph.refresh(reader)  # no wait for the step, no reload of the graph
        assert state is start
        graph.advance([step])
        assert graph.refresh(reader).out == {a: {b: 0.5}}
    assert loads == []


def test_a_mirror_that_stays_behind_a_reader_while_a_writer_follows_reloads(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b = _nodes(writer, 2)
    graph = Graph(follow_wait_s=0.0)  # behind for longer than the wait from the start
    graph.refresh(reader)
    loads = count_loads(graph)
    with graph.following():
        step = _write_edge(writer, a, b, 0.5)  # another process's: no step will come
        state = graph.refresh(reader)
    assert loads == [step.after]
    assert state.out == {a: {b: 0.5}}


def test_a_teach_that_committed_after_a_step_in_transit_is_in_the_mirror_when_apply_returns(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b, c = _nodes(writer, 3)
    graph = Graph()
    graph.refresh(reader)
    loads = count_loads(graph)
    order: list[str] = []
    seen: list[GraphState] = []

    def teach(step: Step) -> None:
        graph.apply(step.before, step.after, edges=[EdgeWrite(b, c, 0.25, "similar")])
        order.append("teach applied")
        seen.append(graph.refresh(reader))

    with graph.following():
        chunk = _write_edge(writer, a, b, 0.5)  # a maintain chunk, its step in transit
        taught = _write_edge(writer, b, c, 0.25)  # the teach that waited for its lock
        thread = threading.Thread(target=teach, args=(taught,))
        thread.start()
        deadline = time.monotonic() + WAIT_S
        while graph.held == 0 and time.monotonic() < deadline:
            time.sleep(0.001)  # until the teach's step waits for the chunk's
        order.append("chunk arrived")
        graph.advance([chunk])
        thread.join(WAIT_S)
    assert order == ["chunk arrived", "teach applied"]
    assert seen[0].out == {a: {b: 0.5}, b: {c: 0.25}}
    assert loads == []


def test_a_write_of_another_process_still_makes_the_mirror_reload(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b = _nodes(writer, 2)
    graph = Graph()
    graph.refresh(reader)
    loads = count_loads(graph)
    step = _write_edge(writer, a, b, 0.5)  # nobody tells the mirror
    state = graph.refresh(reader)
    assert loads == [step.after]
    assert state.out == {a: {b: 0.5}}


def test_a_reader_whose_snapshot_is_older_than_the_mirror_gets_that_state_without_a_reload(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b = _nodes(writer, 2)
    graph = Graph()
    start = graph.refresh(reader)
    loads = count_loads(graph)
    reader.execute("BEGIN")  # a read transaction: its snapshot begins before the write
    try:
        assert graph_epoch(reader) == start.epoch
        step = _write_edge(writer, a, b, 0.5)
        assert graph.advance([step])
        assert graph.refresh(reader) is start
    finally:
        reader.execute("ROLLBACK")
    assert loads == []
    assert graph.snapshot().epoch == step.after  # the mirror did not go back


def test_a_dropped_node_and_edge_leave_the_mirror_as_a_fresh_load_finds_the_tables(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b, c, d = _nodes(writer, 4)
    for source, target in ((a, b), (b, a), (b, c), (c, b), (c, d), (d, a)):
        _write_edge(writer, source, target, 0.5)
    graph = Graph()
    graph.refresh(reader)
    with writer.transaction():
        writer.execute("DELETE FROM edges WHERE source = ? AND target = ?", (c, d))
        writer.execute("DELETE FROM edges WHERE source = ? OR target = ?", (b, b))
        writer.execute("DELETE FROM nodes WHERE id = ?", (b,))
        writer.execute("UPDATE nodes SET prior = 0.3 WHERE id = ?", (a,))
        after = bump_epoch(writer)
    delta = GraphDelta()
    delta.drop_edge(c, d)
    delta.drop_node(b)
    delta.set_prior(a, 0.3)
    assert graph.advance([Step(after - 1, after, delta)])
    fresh = Graph().refresh(reader)
    assert fresh.epoch == graph.snapshot().epoch
    assert mirror_maps(graph.snapshot()) == mirror_maps(fresh)


def test_held_steps_are_applied_by_the_first_reader_that_needs_them_up_to_its_snapshot(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b, c = _nodes(writer, 3)
    graph = Graph()
    start = graph.refresh(reader)
    loads = count_loads(graph)
    with graph.following():
        first = _write_edge(writer, a, b, 0.5)
        reader.execute("BEGIN")  # a reader whose snapshot has the first step only
        try:
            assert graph_epoch(reader) == first.after
            second = _write_edge(writer, b, c, 0.25)
            assert not graph.advance([first, second], now=False)  # held, not applied
            assert graph.snapshot() is start
            mid = graph.refresh(reader)
        finally:
            reader.execute("ROLLBACK")
        assert mid.epoch == first.after
        assert mid.out == {a: {b: 0.5}}
        assert graph.refresh(reader).out == {a: {b: 0.5}, b: {c: 0.25}}
    assert loads == []


def test_a_reader_older_than_every_state_kept_gets_the_newest_whole_state_not_a_reload(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    rows = _nodes(writer, HISTORY + 3)
    graph = Graph()
    start = graph.refresh(reader)
    loads = count_loads(graph)
    reader.execute("BEGIN")
    try:
        assert graph_epoch(reader) == start.epoch
        for source, target in itertools.pairwise(rows):
            assert graph.advance([_write_edge(writer, source, target, 0.5)])
        state = graph.refresh(reader)
    finally:
        reader.execute("ROLLBACK")
    assert loads == []
    assert state is graph.snapshot()
    assert state.epoch == graph_epoch(reader)


def test_a_loaded_graph_keeps_its_edges_as_packed_arrays_and_makes_a_row_only_when_read(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b, c = _nodes(writer, 3)
    for source, target, weight in ((a, b, 0.5), (a, c, -0.25), (c, a, 0.75)):
        _write_edge(writer, source, target, weight)
    state = Graph().refresh(reader)
    assert isinstance(state.out, PackedRows)
    assert isinstance(state.inc, PackedRows)
    assert state.out.edge_count == 3  # a 100k-node graph's million edges: arrays, no dicts
    assert state.out.get(a) == {b: 0.5, c: -0.25}
    assert state.out.get(b) is None
    assert state.inc.get(a) == {c: 0.75}
    assert state.out.get(a) is state.out.get(a)  # made once, then kept
    assert sorted(state.out) == [a, c]


def test_a_taught_node_adds_to_the_node_maps_without_copying_the_nodes_already_there(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    a, b = _nodes(writer, 2)
    graph = Graph()
    before = graph.refresh(reader)
    (c,) = _nodes(writer, 1)
    after = graph_epoch(writer)
    public = str(writer.scalar("SELECT node_id FROM nodes WHERE id = ?", (c,)))
    graph.apply(after - 1, after, nodes=[(c, public, "teaching", "overlay", None)])
    state = graph.snapshot()
    for old, new in zip(mirror_maps(before)[2:], mirror_maps(state)[2:], strict=True):
        # The previous state's map is shared, not copied (five 100k-entry copies were
        # most of a teach at 100k nodes); the new entries lie over it.
        assert new is old or getattr(new, "base", None) is old
    assert state.kind == {a: "teaching", b: "teaching", c: "teaching"}
    assert state.by_public[public] == c
    assert c not in before.kind  # the state a reader held is as it was
    assert mirror_maps(state) == mirror_maps(Graph().refresh(reader))


def test_steps_changing_more_rows_than_the_fold_leave_the_mirror_as_a_fresh_load_finds_it(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    rows = _nodes(writer, 2_200)  # past the fold: an eighth of the rows, at least 1,024
    graph = Graph()
    _chain(writer, rows)
    graph.refresh(reader)
    gone = rows[::3]
    with writer.transaction():
        delta = GraphDelta()
        for source, target in itertools.pairwise(rows[:1_500]):
            writer.execute(
                "UPDATE edges SET weight = 0.25 WHERE source = ? AND target = ?", (source, target)
            )
            delta.set_edge(source, target, 0.25)
        for source in rows[1_500:]:
            writer.execute(
                "INSERT INTO edges (source, target, weight, kind, updated_at) "
                "VALUES (?, ?, -0.5, 'learned', '2025-01-01T00:00:00.000Z') "
                "ON CONFLICT DO UPDATE SET weight = -0.5",
                (source, rows[0]),
            )
            delta.set_edge(source, rows[0], -0.5)
        for node in gone:
            writer.execute("DELETE FROM edges WHERE source = ? OR target = ?", (node, node))
            writer.execute("DELETE FROM nodes WHERE id = ?", (node,))
            delta.drop_node(node)
        for node in rows[1::3]:
            writer.execute("UPDATE nodes SET prior = 0.5 WHERE id = ?", (node,))
            delta.set_prior(node, 0.5)
        after = bump_epoch(writer)
    (added,) = _nodes(writer, 1)
    nodes = [
        (
            added,
            str(writer.scalar("SELECT node_id FROM nodes WHERE id = ?", (added,))),
            "teaching",
            "overlay",
            None,
        )
    ]
    assert graph.advance([Step(after - 1, after, delta)])
    assert graph.advance([Step(after, after + 1, GraphDelta(nodes=nodes))])
    state = graph.snapshot()
    assert isinstance(state.out, PackedRows)  # folded into new arrays, not dicts
    fresh = Graph().refresh(reader)
    assert fresh.epoch == state.epoch
    assert mirror_maps(state) == mirror_maps(fresh)


def test_a_step_setting_and_dropping_thousands_of_edges_is_applied_as_arrays_like_a_reload(
    two: tuple[Store, Store],
) -> None:
    writer, reader = two
    rows = _nodes(writer, 5_000)
    graph = Graph()
    _chain(writer, rows)
    graph.refresh(reader)
    graph.advance([_write_edge(writer, rows[0], rows[1], 0.75)])  # a layered row first
    packed = graph.snapshot().out
    assert not isinstance(packed, PackedRows)
    base = packed.base  # type: ignore[attr-defined]
    built = len(base._cache)
    edges = "UPDATE edges SET weight = ? WHERE source = ? AND target = ?"
    with writer.transaction():
        delta = GraphDelta()
        for i, (source, target) in enumerate(itertools.pairwise(rows[:3_000])):
            writer.execute(edges, (0.1 + i % 7 / 10, source, target))
            delta.set_edge(source, target, 0.1 + i % 7 / 10)
        for source, target in itertools.pairwise(rows[3_000:4_000]):
            writer.execute("DELETE FROM edges WHERE source = ? AND target = ?", (source, target))
            delta.drop_edge(source, target)
        for source in rows[4_000:]:  # new edges, one written twice, one made then dropped
            writer.execute(
                "INSERT INTO edges (source, target, weight, kind, updated_at) "
                "VALUES (?, ?, -0.5, 'learned', '2025-01-01T00:00:00.000Z')",
                (source, rows[7]),
            )
            delta.set_edge(source, rows[7], -0.25)
            delta.set_edge(source, rows[7], -0.5)
        writer.execute("DELETE FROM edges WHERE source = ? AND target = ?", (rows[4_000], rows[7]))
        delta.drop_edge(rows[4_000], rows[7])
        after = bump_epoch(writer)
    assert graph.advance([Step(after - 1, after, delta)])
    state = graph.snapshot()
    assert isinstance(state.out, PackedRows)
    assert len(base._cache) == built  # no row was copied into a dict to apply it
    fresh = Graph().refresh(reader)
    assert fresh.epoch == state.epoch
    assert mirror_maps(state) == mirror_maps(fresh)
    assert state.inc[rows[7]][rows[4_001]] == -0.5
    assert rows[4_000] not in state.inc[rows[7]]


@pytest.mark.parametrize("writes", ["weights", "drops", "weights and drops", "new edges"])
def test_packed_rows_with_many_changes_equal_the_changes_applied_edge_by_edge(
    writes: str,
) -> None:
    import numpy as np

    rng = np.random.default_rng(len(writes))
    n, m = 300, 3_000
    edges = {
        (int(a), int(b)): float(w)
        for a, b, w in zip(
            rng.integers(1, n, m), rng.integers(1, n, m), rng.uniform(-1, 1, m), strict=True
        )
        if a != b
    }
    keys = np.array([k[0] for k in edges], dtype=np.int64)
    others = np.array([k[1] for k in edges], dtype=np.int64)
    out = PackedRows.from_edges(keys, others, np.array(list(edges.values())))
    inc = out.transposed()
    pairs = list(edges)
    ops: list[tuple[int, int, float, bool]] = []
    for i in rng.permutation(len(pairs))[:2_000].tolist():
        source, target = pairs[i]
        drop = writes == "drops" or (writes == "weights and drops" and i % 3 == 0)
        ops.append((source, target, round(float(rng.uniform(-1, 1)), 3), drop))
        if i % 5 == 0:  # written twice: the last write wins
            ops.append((source, target, 0.125, not drop))
    if writes == "new edges":
        ops += [(n + i, 1 + i % 7, 0.5, False) for i in range(50)]
    expected = dict(edges)
    for source, target, weight, drop in ops:
        if drop:
            expected.pop((source, target), None)
        else:
            expected[(source, target)] = weight
    new_out, new_inc = out.with_changes(
        np.array([o[0] for o in ops], dtype=np.int64),
        np.array([o[1] for o in ops], dtype=np.int64),
        np.array([o[2] for o in ops]),
        np.array([o[3] for o in ops]),
        inc,
    )
    assert {(s, t): w for s, row in new_out.items() for t, w in row.items()} == expected
    assert {(s, t): w for t, row in new_inc.items() for s, w in row.items()} == expected
    if writes != "new edges":  # the transpose carried over, not sorted again
        assert new_out.pair is not None
        assert new_out.pair[0] is new_inc
    assert dict(new_inc) == dict(new_out.transposed())
