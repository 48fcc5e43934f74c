"""The entity index's schema (``brain.lcm.entities``), one script appended after the others.

Kept in its own module so the other migration ranges stay untouched; the version
it takes the schema to is its place in ``brain.store.schema.MIGRATIONS``. Tested in
tests/brain/lcm/entities/test_index.py (an older database's messages are queued and
indexed) and tests/brain/store/test_schema.py (migrations in order, idempotent).
"""

from __future__ import annotations

from typing import Final

# The entity index. ``entities`` holds one row per (kind, key): the key is the
# case-folded form, ``name`` the form first written. ``entity_mentions`` holds one
# row per entity and message (the first occurrence's character span in the
# message content, and how many times the message names it), with the
# conversation and the message's time copied so lookups need not join messages
# except to skip suppressed ones. ``entity_backlog`` queues the messages to index
# (SQL cannot run the extractor): those stored before this version, and every new
# one through a trigger; ``brain.lcm.entities.index`` drains it in bounded batches.
# ``IF NOT EXISTS``: a database rolled back to an older version by hand (as the
# upgrade tests do) keeps these tables; re-queueing its messages is harmless, as
# indexing a message twice changes nothing.
ENTITIES: Final = """
CREATE TABLE IF NOT EXISTS entities (
    id   INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    key  TEXT NOT NULL,
    name TEXT NOT NULL,
    UNIQUE (key, kind)
);
CREATE TABLE IF NOT EXISTS entity_mentions (
    entity_id       INTEGER NOT NULL REFERENCES entities(id),
    message_id      INTEGER NOT NULL REFERENCES messages(id),
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    created_at      TEXT NOT NULL,
    start           INTEGER NOT NULL,
    end             INTEGER NOT NULL,
    count           INTEGER NOT NULL,
    PRIMARY KEY (entity_id, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entity_mentions_message ON entity_mentions(message_id);
CREATE TABLE IF NOT EXISTS entity_backlog (message_id INTEGER PRIMARY KEY);
INSERT OR IGNORE INTO entity_backlog (message_id) SELECT id FROM messages;
-- Every stored message is queued in the transaction that stores it, whatever path
-- stores it, at no extra statement.
CREATE TRIGGER IF NOT EXISTS messages_entity_queue AFTER INSERT ON messages BEGIN
    INSERT OR IGNORE INTO entity_backlog (message_id) VALUES (new.id);
END;
"""

SCRIPTS: Final[tuple[str, ...]] = (ENTITIES,)
"""The entity index's migration."""
