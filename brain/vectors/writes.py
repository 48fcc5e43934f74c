"""The embed queue and the removal of vectors: every write other layers make to
``embed_queue`` and ``vectors`` goes through here, inside the caller's transaction.

Storing vectors (and draining the queue) is the index's own work
(``brain.vectors.index``, which imports numpy); this module holds the writes the rest of the engine
needs when it adds or removes what gets embedded: ingest queues messages, a
summary queues itself, the graph queues nodes and drops the vectors of nodes it
deletes, doctor requeues rows whose vectors it drops. It imports no numpy, so
ingest stays cheap.

Tested through its callers: ``tests/brain/vectors/test_index.py`` (queue and
drain), ``tests/brain/lcm/test_ingest.py``, ``tests/brain/graph/sync/test_apply.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import orjson

from brain.store.connection import Store

Kind = Literal["message", "summary", "node"]
"""What a queued or stored row is: a message, a summary or a graph node."""


RETAINED = (
    "EXISTS (SELECT 1 FROM retention r WHERE r.conversation_id = m.conversation_id "
    "AND m.seq <= r.vectors_through_seq)"
)
"""SQL true for a message ``m`` whose vector a retention pass dropped
(``brain.ops.retention``): it is not embedded again."""


def _ids(row_ids: Sequence[int]) -> str:
    return orjson.dumps(list(row_ids)).decode()


def enqueue(store: Store, kind: Kind, row_ids: Sequence[int]) -> None:
    """Queue rows of ``kind`` to be embedded (already queued rows stay as they are).

    One statement whatever the number of rows (ids bound as one JSON array).
    """
    if not row_ids:
        return
    store.execute(
        "INSERT OR IGNORE INTO embed_queue (kind, row_id) SELECT ?, value FROM json_each(?)",
        (kind, _ids(row_ids)),
    )


def enqueue_everything(store: Store) -> None:
    """Queue every message, summary and node with text (an embedder switch re-embeds all),
    except messages whose vectors retention dropped (``RETAINED``)."""
    store.execute(
        "INSERT OR IGNORE INTO embed_queue (kind, row_id) "  # noqa: S608
        f"SELECT 'message', m.id FROM messages m WHERE NOT {RETAINED}"
    )
    store.execute(
        "INSERT OR IGNORE INTO embed_queue (kind, row_id) SELECT 'summary', id FROM summaries"
    )
    store.execute(
        "INSERT OR IGNORE INTO embed_queue (kind, row_id) "
        "SELECT 'node', id FROM nodes WHERE content IS NOT NULL"
    )


def enqueue_existing(store: Store, keys: Sequence[tuple[str, int]]) -> None:
    """Queue the rows among ``keys`` (kind, row id) that still exist and have text to embed
    (a ghost vector's row is gone: nothing to embed)."""
    tables = {"message": "messages", "summary": "summaries", "node": "nodes"}
    for kind, row_id in keys:
        if kind in tables:
            store.execute(
                f"INSERT OR IGNORE INTO embed_queue (kind, row_id) SELECT ?, id "  # noqa: S608
                f"FROM {tables[kind]} WHERE id = ?"
                + (" AND content IS NOT NULL" if kind == "node" else ""),
                (kind, row_id),
            )


def dequeue(store: Store, kind: Kind, row_ids: Sequence[int]) -> None:
    """Take rows of ``kind`` off the queue (they are gone, or need no vector)."""
    if not row_ids:
        return
    store.execute(
        "DELETE FROM embed_queue WHERE kind = ? AND row_id IN (SELECT value FROM json_each(?))",
        (kind, _ids(row_ids)),
    )


def drop_vectors(store: Store, kind: Kind, row_ids: Sequence[int]) -> int:
    """Delete the stored vectors of rows of ``kind``; how many there were."""
    if not row_ids:
        return 0
    return len(
        list(
            store.execute(
                "DELETE FROM vectors WHERE kind = ? "
                "AND row_id IN (SELECT value FROM json_each(?)) RETURNING 1",
                (kind, _ids(row_ids)),
            )
        )
    )
