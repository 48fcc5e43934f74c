"""Applying a sync: each file's chunk nodes and sequence edges brought in line, gone files removed.

Tested in tests/brain/graph/sync/test_apply.py.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from brain.clock import now_iso
from brain.graph.nodes import NewNode, bump_epoch, insert_node
from brain.graph.sync.chunks import Chunk
from brain.graph.sync.workspace import WorkspaceFile
from brain.store.connection import Store
from brain.vectors.index import Pending, note_vectors_changed, pending_batch, text_hash
from brain.vectors.writes import dequeue, drop_vectors

__all__ = [
    "REMOVE_BATCH",
    "SEQUENCE_WEIGHT",
    "FileSync",
    "chunk_key",
    "delete_nodes",
    "pending_nodes",
    "remove_missing",
    "sync_file",
    "workspace_nodes",
]

SEQUENCE_WEIGHT: Final = 0.2
"""Weight of the ``sequence`` edge each way between consecutive chunks of a file."""
REMOVE_BATCH: Final = 500
"""Nodes deleted per transaction when files leave the workspace."""


@dataclass(frozen=True, slots=True)
class FileSync:
    """What syncing one file changed, and the row ids of the nodes it added."""

    added: int
    kept: int
    moved: int
    removed: int
    edges: int
    new_rows: tuple[int, ...]


def chunk_key(root: Path, source: str, text: str, occurrence: int) -> str:
    """A chunk's identity as stored in ``nodes.dedup_key``.

    ``occurrence`` tells apart equal chunks of one file (the nth with this text).
    """
    raw = f"{root}\0{source}\0{text_hash(text).hex()}\0{occurrence}"
    return (
        "chunk:" + hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    )


def sync_file(store: Store, root: Path, file: WorkspaceFile) -> FileSync:
    """Bring one file's nodes and sequence edges in line with its chunks (one transaction)."""
    seen: dict[str, int] = {}
    wanted: list[tuple[str, Chunk]] = []
    for chunk in file.chunks:
        digest = text_hash(chunk.text)
        n = seen.get(digest.hex(), 0)
        seen[digest.hex()] = n + 1
        wanted.append((chunk_key(root, file.source, chunk.text, n), chunk))
    workspace = str(root)
    with store.transaction():
        existing = {
            str(r[1]): r
            for r in store.execute(
                "SELECT id, dedup_key, line_start, line_end, authority, metadata FROM nodes "
                "WHERE kind = 'chunk' AND source = ? AND metadata ->> '$.workspace' = ?",
                (file.source, workspace),
            )
        }
        order: list[int] = []
        new_rows: list[int] = []
        kept = moved = 0
        for key, chunk in wanted:
            metadata: dict[str, Any] = {"workspace": workspace, "heading": chunk.heading}
            row = existing.pop(key, None)
            if row is None:
                row_id, _node_id, created = insert_node(
                    store,
                    NewNode(
                        kind="chunk",
                        text=chunk.text,
                        authority=file.authority,
                        source=file.source,
                        line_start=chunk.line_start,
                        line_end=chunk.line_end,
                        metadata=metadata,
                        dedup_key=key,
                    ),
                )
                if created:
                    new_rows.append(row_id)
                order.append(row_id)
                continue
            row_id = int(row[0])
            order.append(row_id)
            stored_heading = orjson.loads(row[5]).get("heading") if row[5] else None
            if (row[2], row[3], row[4], stored_heading) == (
                chunk.line_start,
                chunk.line_end,
                file.authority,
                chunk.heading,
            ):
                kept += 1
                continue
            store.execute(
                "UPDATE nodes SET line_start = ?, line_end = ?, authority = ?, "
                "metadata = json_set(metadata, '$.heading', ?) WHERE id = ?",
                (chunk.line_start, chunk.line_end, file.authority, chunk.heading, row_id),
            )
            moved += 1
        gone = [int(r[0]) for r in existing.values()]
        delete_nodes(store, gone)
        edges = _sequence(store, order)
        if new_rows or moved or gone or edges:
            bump_epoch(store)
    return FileSync(len(new_rows), kept, moved, len(gone), edges, tuple(new_rows))


def delete_nodes(store: Store, row_ids: Sequence[int]) -> None:
    """Delete nodes with their edges, vectors and queue rows (inside the caller's transaction).

    The caller bumps the graph epoch; the node vectors' epoch is bumped here when
    a vector went, so no index keeps serving a row that is gone.
    """
    if not row_ids:
        return
    dequeue(store, "node", row_ids)
    if drop_vectors(store, "node", row_ids):
        note_vectors_changed(store, ("node",))
    ids = orjson.dumps(list(row_ids))
    store.execute("DELETE FROM nodes WHERE id IN (SELECT value FROM json_each(?))", (ids,))


def _sequence(store: Store, order: Sequence[int]) -> int:
    """Make the ``sequence`` edges among a file's nodes follow ``order``; edges written.

    Sequence edges between nodes no longer next to each other go; missing ones are
    added at ``SEQUENCE_WEIGHT`` each way. An edge already present between
    neighbours (of any kind, with whatever weight learning gave it) stays.
    """
    ids = orjson.dumps(list(order))
    have = {
        (int(r[0]), int(r[1]))
        for r in store.execute(
            "SELECT source, target FROM edges WHERE kind = 'sequence' "
            "AND source IN (SELECT value FROM json_each(?)) "
            "AND target IN (SELECT value FROM json_each(?))",
            (ids, ids),
        )
    }
    want: set[tuple[int, int]] = set()
    for a, b in itertools.pairwise(order):
        want |= {(a, b), (b, a)}
    stale = sorted(have - want)
    before = store.total_changes()
    store.executemany(
        "DELETE FROM edges WHERE source = ? AND target = ? AND kind = 'sequence'", stale
    )
    missing = sorted(want - have)
    stamp = now_iso()
    store.executemany(
        "INSERT INTO edges (source, target, weight, kind, updated_at) "
        "VALUES (?, ?, ?, 'sequence', ?) ON CONFLICT (source, target) DO NOTHING",
        [(a, b, SEQUENCE_WEIGHT, stamp) for a, b in missing],
    )
    return int(store.total_changes() - before)


def remove_missing(store: Store, root: Path, keep: Iterable[str]) -> tuple[int, int]:
    """Delete up to ``REMOVE_BATCH`` nodes of the workspace's files not in ``keep``.

    One transaction; returns (nodes deleted, nodes left to delete). Call until
    nothing is left.
    """
    kept = orjson.dumps(sorted(set(keep)))
    with store.transaction():
        rows = [
            int(r[0])
            for r in store.execute(
                "SELECT id FROM nodes WHERE kind = 'chunk' AND metadata ->> '$.workspace' = ? "
                "AND source NOT IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?",
                (str(root), kept, REMOVE_BATCH + 1),
            )
        ]
        batch = rows[:REMOVE_BATCH]
        delete_nodes(store, batch)
        if batch:
            bump_epoch(store)
    return len(batch), len(rows) - len(batch)


def workspace_nodes(store: Store, root: Path) -> int:
    """How many chunk nodes the workspace has."""
    return int(
        store.scalar(
            "SELECT count(*) FROM nodes WHERE kind = 'chunk' AND metadata ->> '$.workspace' = ?",
            (str(root),),
        )
    )


def pending_nodes(store: Store, row_ids: Sequence[int]) -> Pending:
    """The nodes among ``row_ids`` still queued, as a batch for ``VectorIndex.put``.

    Texts with a stored vector (the same text elsewhere) are copied, not embedded
    again; each other text is embedded once.
    """
    rows = list(
        store.execute(
            # CROSS JOIN keeps the id list outermost: SQLite otherwise walked the whole
            # queue per batch, rescanning the list for each row (quadratic in a sync).
            "SELECT n.id, n.content || coalesce(char(10) || (n.metadata ->> '$.query'), '') "
            "FROM json_each(?) j CROSS JOIN embed_queue q "
            "ON q.kind = 'node' AND q.row_id = j.value "
            "JOIN nodes n ON n.id = q.row_id ORDER BY n.id",
            (orjson.dumps(list(row_ids)),),
        )
    )
    return pending_batch(
        store,
        [("node", int(r[0])) for r in rows],
        [0] * len(rows),
        [str(r[1]) for r in rows],
    )
