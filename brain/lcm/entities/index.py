"""Writing the entity index: a message's mentions, off the request path.

A trigger queues each stored message in ``entity_backlog`` inside the
transaction that stores it (one cheap row: extraction costs about 0.1 ms a message, several
times what storing it costs, see ``ingest_batched_engine`` in scripts/bench.py),
so no message is ever left out. ``index_backlog`` drains the queue
``BACKLOG_BATCH`` messages per transaction: the daemon's background worker does
it once writes settle (``daemon.embeddings``), every entity read does it first
(so a read always sees every stored message). Opening a database does not: a
big upgrade's queue (or a damaged page) must not hold up or fail a start. Only the message
content is read: a large payload's text lives in its file and is searched
through ``files_fts`` (``grep --scope files``); its stub in the content names no
entity worth indexing. Messages stored before the entity schema are queued by
the migration in the same queue.

Suppression needs no write here: every reader joins ``messages`` and skips
suppressed ones, so unsuppress restores the mentions exactly.

Tested in tests/brain/lcm/entities/test_index.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from brain.lcm.entities.extract import Mention, extract
from brain.store.connection import Store

BACKLOG_BATCH: Final = 500


def index_message(
    store: Store, message_id: int, conversation_id: int, created_at: str, content: str
) -> int:
    """Record the entities ``content`` mentions for one message; return how many.

    Runs inside the caller's transaction. Idempotent: indexing a message again
    changes nothing.
    """
    mentions = extract(content)
    if not mentions:
        return 0
    firsts: dict[tuple[str, str], Mention] = {}
    counts: dict[tuple[str, str], int] = {}
    for m in mentions:
        firsts.setdefault((m.kind, m.key), m)
        counts[(m.kind, m.key)] = counts.get((m.kind, m.key), 0) + 1
    store.executemany(
        "INSERT INTO entities (kind, key, name) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        [(m.kind, m.key, m.text) for m in firsts.values()],
    )
    store.executemany(
        "INSERT INTO entity_mentions (entity_id, message_id, conversation_id, created_at, "
        "start, end, count) SELECT id, ?, ?, ?, ?, ?, ? FROM entities WHERE key = ? AND kind = ? "
        "ON CONFLICT DO NOTHING",
        [
            (message_id, conversation_id, created_at, m.start, m.end, counts[k], m.key, m.kind)
            for k, m in firsts.items()
        ],
    )
    return len(firsts)


def backlog(store: Store) -> bool:
    """Whether messages wait to be indexed."""
    return store.one("SELECT 1 FROM entity_backlog LIMIT 1") is not None


def index_backlog(store: Store, batch: int = BACKLOG_BATCH, *, batches: int | None = None) -> int:
    """Index queued messages, at most ``batches`` transactions of ``batch`` (None: all);
    return how many were read.

    Each batch re-reads the queue under the write lock, so two processes
    draining at once index each message once.
    """
    done = 0
    rounds = 0
    while (batches is None or rounds < batches) and backlog(store):
        rounds += 1
        with store.transaction():
            rows: Sequence[tuple[object, ...]] = list(
                store.execute(
                    "SELECT b.message_id, m.conversation_id, m.created_at, m.content "
                    "FROM entity_backlog b JOIN messages m ON m.id = b.message_id "
                    "ORDER BY b.message_id LIMIT ?",
                    (batch,),
                )
            )
            for message_id, conversation_id, created_at, content in rows:
                index_message(
                    store,
                    int(str(message_id)),
                    int(str(conversation_id)),
                    str(created_at),
                    str(content),
                )
            if rows:
                store.execute(
                    "DELETE FROM entity_backlog WHERE message_id <= ?", (int(str(rows[-1][0])),)
                )
            else:
                # Rows whose message is gone (never expected) would keep the loop alive.
                store.execute("DELETE FROM entity_backlog")
        done += len(rows)
    return done
