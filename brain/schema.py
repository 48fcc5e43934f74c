"""Schema migrations, versioned by ``PRAGMA user_version``.

Each migration is a SQL script that moves the schema from version ``n - 1`` to
``n``. ``migrate`` runs every pending one inside a single ``BEGIN IMMEDIATE``
transaction and reads the version only after taking the write lock, so two
processes opening a fresh database at once cannot both apply the same step.
Scripts are append-only: a released migration is never edited, only followed.
"""

from __future__ import annotations

from typing import Final

import apsw

from brain.errors import StorageError

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

MIGRATIONS: Final[tuple[str, ...]] = (_V1,)
"""``MIGRATIONS[n - 1]`` takes the schema from version ``n - 1`` to ``n``."""

SCHEMA_VERSION: Final = len(MIGRATIONS)


def migrate(conn: apsw.Connection) -> tuple[int, int]:
    """Apply pending migrations in one transaction; return (version before, after).

    Idempotent: on an up-to-date database it takes the write lock briefly and
    changes nothing. A database newer than this code is refused rather than
    silently misread.
    """
    current = _user_version(conn)
    if current == SCHEMA_VERSION:
        return current, current
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = _user_version(conn)  # re-read under the write lock
        if current > SCHEMA_VERSION:
            raise StorageError(
                f"database schema version {current} is newer than this brain "
                f"({SCHEMA_VERSION}); upgrade brain"
            )
        before = current
        for script in MIGRATIONS[current:]:
            conn.execute(script)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if before != SCHEMA_VERSION:
        conn.execute("PRAGMA optimize")
    return before, SCHEMA_VERSION


def _user_version(conn: apsw.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    assert row is not None
    return int(row[0])
