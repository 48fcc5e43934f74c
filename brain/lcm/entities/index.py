"""Writing the entity index: a message's mentions, at ingest and for older messages.

Ingest calls ``index_message`` for each stored message inside its own
transaction, so a message and its mentions commit together. Only the message
content is read: a large payload's text lives in its file and is searched
through ``files_fts`` (``grep --scope files``); its stub in the content names no
entity worth indexing. Messages stored before the entity schema are queued by
the migration in ``entity_backlog``; ``index_backlog`` drains it when the engine
opens a database to write, ``BACKLOG_BATCH`` messages per transaction, so the
write lock is never held long and a busy database is finished by a later open.

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


def index_backlog(store: Store, batch: int = BACKLOG_BATCH) -> int:
    """Index the messages queued by the entity migration; return how many were read.

    Each batch re-reads the queue under the write lock, so two processes opening
    the database at once index each message once.
    """
    done = 0
    while store.one("SELECT 1 FROM entity_backlog LIMIT 1") is not None:
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
