"""Migrations 1 to 6, as data: the conversation store, the summary DAG, suppression and
grants, the speaker in full-text search, the vector index and text-hash reuse.

``MIGRATIONS[n - 1]`` of ``brain.store.schema`` is the script ``_V<n>`` here or in
``brain.store.migrations.v07_to_v13``; ``migrate`` applies them. A released script is
never edited. Tested through ``tests/brain/store/test_schema.py`` (every script applied
to a fresh and to an old database): a script means something only as a step of it.
"""

from __future__ import annotations

from typing import Final

# Version 1: conversations, messages (+ parts, FTS), large payload files, meta.
_V1: Final = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL UNIQUE,
    session_key TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX conversations_session_key ON conversations(session_key)
    WHERE session_key IS NOT NULL;

-- content: the flattened text the model sees and FTS indexes (large payloads
-- appear as a compact reference). content_shape says whether the original
-- content was a string ('string': content, or its file part, is the original)
-- or a list of blocks ('blocks': message_parts hold each original block).
-- replay_hash identifies an exact replay of the previous message.
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    name            TEXT,
    content         TEXT NOT NULL,
    content_shape   TEXT NOT NULL CHECK (content_shape IN ('string', 'blocks')),
    token_count     INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    client_id       TEXT,
    replay_hash     BLOB NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE UNIQUE INDEX messages_client_id ON messages(conversation_id, client_id)
    WHERE client_id IS NOT NULL;

CREATE TABLE large_files (
    file_id         TEXT PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    message_id      INTEGER NOT NULL REFERENCES messages(id),
    part_kind       TEXT NOT NULL,
    encoding        TEXT NOT NULL CHECK (encoding IN ('utf8', 'json')),
    byte_size       INTEGER NOT NULL,
    token_count     INTEGER NOT NULL,
    sha256          TEXT NOT NULL,
    created_at      TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX large_files_message ON large_files(message_id);

-- One row per content block. origin: 'content' (a block of a list content),
-- 'tool_calls' (an OpenAI message-level tool call), 'message' (the message's
-- string content itself, e.g. an OpenAI tool result; block is NULL then).
CREATE TABLE message_parts (
    message_id   INTEGER NOT NULL REFERENCES messages(id),
    ordinal      INTEGER NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN
                   ('text', 'tool_call', 'tool_result', 'reasoning', 'image', 'file', 'other')),
    origin       TEXT NOT NULL CHECK (origin IN ('content', 'tool_calls', 'message')),
    tool_call_id TEXT,
    tool_name    TEXT,
    file_id      TEXT REFERENCES large_files(file_id),
    block        TEXT,
    PRIMARY KEY (message_id, ordinal)
) WITHOUT ROWID;
CREATE INDEX message_parts_tool_call ON message_parts(tool_call_id)
    WHERE tool_call_id IS NOT NULL;

-- External-content FTS5 over messages.content. Ingest inserts the FTS row
-- itself, right after the message row and in the same transaction: an
-- insert trigger would wrap every message insert in a statement savepoint,
-- and each savepoint makes FTS5 flush its pending terms to a new segment
-- (measured: 3x slower ingest). Deletes and updates are rare and keep
-- triggers, so no path can leave the index stale.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content='messages', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

# Version 2: the summary DAG and the context list.
_V2: Final = """
-- Running totals, so "how big is the context" is O(1); versions let a process
-- tell whether its cached view of a conversation is still current.
ALTER TABLE conversations ADD COLUMN context_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN raw_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN context_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN compaction_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN flush_epoch INTEGER NOT NULL DEFAULT -1;

CREATE TABLE summaries (
    id                INTEGER PRIMARY KEY,
    summary_id        TEXT NOT NULL UNIQUE,
    conversation_id   INTEGER NOT NULL REFERENCES conversations(id),
    kind              TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
    depth             INTEGER NOT NULL CHECK (depth >= 0),
    content           TEXT NOT NULL,
    token_count       INTEGER NOT NULL,
    first_seq         INTEGER NOT NULL,
    last_seq          INTEGER NOT NULL,
    earliest_at       TEXT NOT NULL,
    latest_at         TEXT NOT NULL,
    descendant_count  INTEGER NOT NULL,
    descendant_tokens INTEGER NOT NULL,
    message_count     INTEGER NOT NULL,
    file_ids          TEXT NOT NULL DEFAULT '[]',
    summarizer        TEXT NOT NULL,
    created_at        TEXT NOT NULL
);
CREATE INDEX summaries_conversation ON summaries(conversation_id, first_seq);

-- Ordered links from a summary to its sources: messages (leaf) or child
-- summaries (condensed), never both in one row.
CREATE TABLE summary_sources (
    summary_id INTEGER NOT NULL REFERENCES summaries(id),
    ordinal    INTEGER NOT NULL,
    message_id INTEGER REFERENCES messages(id),
    child_id   INTEGER REFERENCES summaries(id),
    PRIMARY KEY (summary_id, ordinal),
    CHECK ((message_id IS NULL) <> (child_id IS NULL))
) WITHOUT ROWID;
CREATE INDEX summary_sources_message ON summary_sources(message_id)
    WHERE message_id IS NOT NULL;
CREATE INDEX summary_sources_child ON summary_sources(child_id)
    WHERE child_id IS NOT NULL;

-- What the model sees, in order. pos is the first message seq an item
-- covers; items never overlap, so replacing a run of items by its summary
-- leaves every other row where it is (no resequencing). token_count is the
-- item's cost in an assembled context.
CREATE TABLE context_items (
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    pos             INTEGER NOT NULL,
    message_id      INTEGER REFERENCES messages(id),
    summary_id      INTEGER REFERENCES summaries(id),
    depth           INTEGER,
    token_count     INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, pos),
    CHECK ((message_id IS NULL) <> (summary_id IS NULL))
) WITHOUT ROWID;

CREATE VIRTUAL TABLE summaries_fts USING fts5(
    content, content='summaries', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER summaries_fts_delete AFTER DELETE ON summaries BEGIN
    INSERT INTO summaries_fts(summaries_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER summaries_fts_update AFTER UPDATE OF content ON summaries BEGIN
    INSERT INTO summaries_fts(summaries_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO summaries_fts(rowid, content) VALUES (new.id, new.content);
END;

-- Messages stored before this version enter the context list raw.
INSERT INTO context_items (conversation_id, pos, message_id, token_count)
    SELECT conversation_id, seq, id, token_count + 4 FROM messages;
UPDATE conversations SET
    context_tokens = (SELECT coalesce(sum(token_count), 0) FROM context_items c
                      WHERE c.conversation_id = conversations.id),
    raw_tokens = (SELECT coalesce(sum(token_count), 0) FROM context_items c
                  WHERE c.conversation_id = conversations.id);
"""

# Version 3: suppression (hide without deleting) and grants (scoped, budgeted,
# expiring access for delegated sub-agents).
_V3: Final = """
ALTER TABLE messages ADD COLUMN suppressed_at TEXT;
ALTER TABLE summaries ADD COLUMN suppressed_at TEXT;
-- Bumped when anything in a conversation is suppressed or unsuppressed, so
-- cached views rebuild instead of appending.
ALTER TABLE conversations ADD COLUMN suppress_epoch INTEGER NOT NULL DEFAULT 0;

CREATE TABLE grants (
    grant_id    TEXT PRIMARY KEY,
    sessions    TEXT NOT NULL DEFAULT '[]',
    session_key TEXT,
    methods     TEXT NOT NULL,
    token_cap   INTEGER NOT NULL,
    tokens_used INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    revoked_at  TEXT
) WITHOUT ROWID;
"""

# Version 4: the speaker's name is searchable. Questions name people ("what did
# Caroline say about..."), and with the name only in the message text it
# mostly matched the *other* speaker addressing them (LoCoMo full_text
# recall@10 58.1 -> 63.9 with the name as a second column). The FTS table is
# rebuilt from the messages table; bm25 weighs both columns equally, snippets
# come from the content column.
_V4: Final = """
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, name, content='messages', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, name)
        VALUES ('delete', old.id, old.content, old.name);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, name ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, name)
        VALUES ('delete', old.id, old.content, old.name);
    INSERT INTO messages_fts(rowid, content, name) VALUES (new.id, new.content, new.name);
END;
"""

# Version 5: the vector index. Embedding is off the ingest path: ingest and
# compaction queue rows in embed_queue, a background worker embeds them into
# vectors (float32 blobs) and deletes the queue rows in one transaction, so the
# queue survives restarts. The embedder's identity lives in meta
# ('embedder_name', 'embedder_dim'); vectors from another embedder are never kept.
_V5: Final = """
CREATE TABLE embed_queue (
    kind   TEXT NOT NULL CHECK (kind IN ('message', 'summary')),
    row_id INTEGER NOT NULL,
    PRIMARY KEY (kind, row_id)
) WITHOUT ROWID;

CREATE TABLE vectors (
    kind            TEXT NOT NULL CHECK (kind IN ('message', 'summary')),
    row_id          INTEGER NOT NULL,
    conversation_id INTEGER NOT NULL,
    vector          BLOB NOT NULL,
    PRIMARY KEY (kind, row_id)
) WITHOUT ROWID;

INSERT INTO embed_queue (kind, row_id) SELECT 'message', id FROM messages;
INSERT INTO embed_queue (kind, row_id) SELECT 'summary', id FROM summaries;
"""

# Version 6: identical text is embedded once. Each vector records a hash of the
# text it was made from (the embedder is fixed per database, see V5), so a row
# whose text was embedded before takes that vector instead of embedding again.
# Rows stored before this version have no hash and are simply not reused.
_V6: Final = """
ALTER TABLE vectors ADD COLUMN text_hash BLOB;
CREATE INDEX vectors_text_hash ON vectors(text_hash) WHERE text_hash IS NOT NULL;
"""

SCRIPTS: Final[tuple[str, ...]] = (_V1, _V2, _V3, _V4, _V5, _V6)
"""The scripts to versions 1 to 6, in order."""
