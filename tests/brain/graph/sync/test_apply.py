"""Syncing: incremental by content, moved chunks, deleted files, sequence edges, queries."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain import Brain
from brain.graph.nodes import EdgeWrite, bump_epoch, write_edges
from brain.graph.sync import SEQUENCE_WEIGHT
from tests.brain.graph.sync.helpers import MEMORY, chunk_rows, make_workspace


def test_new_chunks_the_background_worker_embedded_first_count_as_embedded(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    # The daemon's background worker may take a sync's new chunks before the sync's
    # own embedding does: they have their vectors, so the report must not call them
    # pending (it said embedded 0 under load).
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    indexed = fresh_brain.sync_index(root)
    assert len(indexed.new_rows) == 4
    assert fresh_brain.embed_pending() == 4  # the worker got there first
    embedded = fresh_brain.embed_nodes(indexed.new_rows)
    assert embedded == 4
    assert (indexed.report(embedded).embedded, indexed.report(embedded).pending) == (4, 0)


def test_a_second_sync_of_unchanged_files_changes_nothing(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY, "SOUL.md": "# Soul\nBe kind.\n"})
    first = fresh_brain.sync(root)
    assert (first.added, first.embedded, first.pending) == (5, 5, 0)
    before = chunk_rows(fresh_brain)
    edges = list(fresh_brain.store.execute("SELECT source, target, weight FROM edges"))
    epoch = fresh_brain.store.scalar("SELECT value FROM meta WHERE key = 'graph_epoch'")
    again = fresh_brain.sync(root)
    assert (again.added, again.kept, again.moved, again.removed, again.edges) == (0, 5, 0, 0, 0)
    assert chunk_rows(fresh_brain) == before
    assert list(fresh_brain.store.execute("SELECT source, target, weight FROM edges")) == edges
    assert fresh_brain.store.scalar("SELECT value FROM meta WHERE key = 'graph_epoch'") == epoch


def test_editing_one_section_replaces_only_that_chunks_node(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)
    before = chunk_rows(fresh_brain)
    (root / "MEMORY.md").write_text(MEMORY.replace("previous image tag", "last good image tag"))
    report = fresh_brain.sync(root)
    after = chunk_rows(fresh_brain)
    assert (report.added, report.kept, report.removed) == (1, 3, 1)
    assert [a[0] == b[0] for a, b in zip(before, after, strict=True)] == [True, True, False, True]
    assert "last good image tag" in after[2][1]
    queued_or_stored = fresh_brain.store.scalar(
        "SELECT count(*) FROM vectors v JOIN nodes n ON n.id = v.row_id "
        "WHERE v.kind = 'node' AND n.node_id = ?",
        (after[2][0],),
    )
    assert queued_or_stored == 1


def test_a_chunk_that_moves_keeps_its_node_with_the_new_lines(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)
    coffee = chunk_rows(fresh_brain)[-1]
    (root / "MEMORY.md").write_text(MEMORY.replace("# Coffee", "# Tea\nGreen tea.\n\n# Coffee"))
    report = fresh_brain.sync(root)
    assert (report.added, report.kept, report.moved, report.removed) == (1, 3, 1, 0)
    moved = [c for c in chunk_rows(fresh_brain) if c[0] == coffee[0]]
    assert [(c[2], c[3]) for c in moved] == [(coffee[2] + 3, coffee[3] + 3)]


def test_deleting_a_file_removes_its_nodes_edges_and_vectors(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(
        tmp_path / "ws",
        {"MEMORY.md": MEMORY, "memory/day.md": "# Day\nSaw a heron.\n\n# Night\nOwl."},
    )
    fresh_brain.sync(root)
    store = fresh_brain.store
    day_rows = [
        int(r[0]) for r in store.execute("SELECT id FROM nodes WHERE source = 'memory/day.md'")
    ]
    assert len(day_rows) == 2
    (root / "memory" / "day.md").unlink()
    report = fresh_brain.sync(root)
    assert (report.removed, report.nodes) == (2, 4)
    assert store.scalar("SELECT count(*) FROM nodes WHERE source = 'memory/day.md'") == 0
    for table, column in (("vectors", "row_id"), ("embed_queue", "row_id")):
        ghosts = store.scalar(
            f"SELECT count(*) FROM {table} WHERE kind = 'node' AND {column} IN (?, ?)",
            tuple(day_rows),
        )
        assert ghosts == 0
    assert (
        store.scalar(
            "SELECT count(*) FROM edges WHERE source IN (?, ?) OR target IN (?, ?)",
            (*day_rows, *day_rows),
        )
        == 0
    )
    # The graph's mirror and vector index follow: a query never returns a deleted node.
    result = fresh_brain.query("heron owl night", record=False)
    assert all(f.source != "memory/day.md" for f in result.fired)


def test_consecutive_chunks_of_a_file_are_linked_by_weak_sequence_edges(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)

    def sequence() -> set[tuple[int, int]]:
        lines = {
            int(r[0]): int(r[1])
            for r in fresh_brain.store.execute(
                "SELECT id, line_start FROM nodes WHERE kind='chunk'"
            )
        }
        pairs = set()
        for source, target, weight in fresh_brain.store.execute(
            "SELECT source, target, weight FROM edges WHERE kind = 'sequence'"
        ):
            assert weight == pytest.approx(SEQUENCE_WEIGHT)
            pairs.add((lines[source], lines[target]))
        return pairs

    assert sequence() == {(1, 3), (3, 1), (3, 6), (6, 3), (6, 9), (9, 6)}
    # Removing the middle sections joins their neighbours.
    (root / "MEMORY.md").write_text(
        "Notes kept by the agent.\n\n# Coffee\nThe coffee machine is on the third floor.\n"
    )
    fresh_brain.sync(root)
    assert sequence() == {(1, 3), (3, 1)}


def test_a_learned_edge_between_neighbours_survives_a_resync(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)
    store = fresh_brain.store
    a, b = (int(r[0]) for r in store.execute("SELECT id FROM nodes ORDER BY line_start LIMIT 2"))
    with store.transaction():
        write_edges(store, [EdgeWrite(a, b, 0.9, "sequence")])
        bump_epoch(store)
    (root / "MEMORY.md").write_text(MEMORY + "\n# More\nAnother section.\n")
    fresh_brain.sync(root)
    weight = store.scalar("SELECT weight FROM edges WHERE source = ? AND target = ?", (a, b))
    assert weight == pytest.approx(0.9)


def test_a_synced_chunk_is_found_by_a_query(fresh_brain: Brain, tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", {"MEMORY.md": MEMORY})
    fresh_brain.sync(root)
    result = fresh_brain.query("where is the coffee machine?", record=False)
    assert result.fired[0].source == "MEMORY.md"
    assert result.fired[0].lines == (9, 10)
    assert "third floor" in result.context


def test_two_workspaces_with_the_same_file_names_keep_their_own_chunks(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    one = make_workspace(tmp_path / "one", {"MEMORY.md": MEMORY})
    two = make_workspace(tmp_path / "two", {"MEMORY.md": MEMORY})
    fresh_brain.sync(one)
    report = fresh_brain.sync(two)
    assert (report.added, report.removed) == (4, 0)
    (one / "MEMORY.md").unlink()
    assert fresh_brain.sync(one).removed == 4
    assert fresh_brain.sync(two).kept == 4
