"""Graph writes racing another process's deletions (``brain maintain`` in a
second process merges and prunes nodes while a daemon teaches and learns)."""

from __future__ import annotations

from pathlib import Path

import apsw

from brain import Brain
from brain.graph.nodes import EdgeWrite, NewNode, bump_epoch, write_edges


def test_an_edge_to_a_node_another_process_deleted_is_skipped_not_a_foreign_key_failure(
    fresh_brain: Brain, db_path: Path
) -> None:
    kept = fresh_brain.teach(NewNode("teaching", "the staging cluster is kestrel")).node_id
    gone = fresh_brain.teach(NewNode("teaching", "the coffee machine is upstairs")).node_id
    store = fresh_brain.store
    ids = dict(store.execute("SELECT node_id, id FROM nodes"))
    other = apsw.Connection(str(db_path))  # another process's connection
    other.execute("PRAGMA foreign_keys = ON")
    other.execute("DELETE FROM nodes WHERE node_id = ?", (gone,))
    other.close()
    new = fresh_brain.teach(NewNode("teaching", "kestrel runs in Frankfurt")).node_id

    with store.transaction():
        write_edges(
            store,
            [
                EdgeWrite(ids[kept], ids[gone], 0.5, "similar"),
                EdgeWrite(ids[gone], ids[kept], 0.5, "similar"),
                EdgeWrite(
                    ids[kept],
                    dict(store.execute("SELECT node_id, id FROM nodes"))[new],
                    0.4,
                    "link",
                ),
            ],
        )
        bump_epoch(store)

    rows = list(
        store.execute(
            "SELECT a.node_id, b.node_id, e.weight FROM edges e "
            "JOIN nodes a ON a.id = e.source JOIN nodes b ON b.id = e.target "
            "WHERE e.kind = 'link'"
        )
    )
    assert rows == [(kept, new, 0.4)]
    assert store.scalar("SELECT count(*) FROM edges WHERE ? IN (source, target)", (ids[gone],)) == 0
