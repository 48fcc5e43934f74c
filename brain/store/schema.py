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
from brain.tokens import CJK_CLASS

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

# Version 7: CJK text is searchable. unicode61 makes a whole run of CJK characters
# one token (Chinese and Japanese do not put spaces between words), so a word
# inside a sentence was never found. Rows with CJK characters are also indexed
# by trigrams, and a query's CJK runs are looked up there as substrings. Only
# those rows are copied, so text without CJK costs nothing. Ingest inserts the
# message rows itself (see V1 on triggers and FTS5); the GLOB below is the same
# character class as ``brain.tokens.has_cjk``.
CJK_GLOB: Final = "*" + CJK_CLASS + "*"
_V7: Final = f"""
CREATE VIRTUAL TABLE messages_cjk USING fts5(content, tokenize='trigram');
CREATE VIRTUAL TABLE summaries_cjk USING fts5(content, tokenize='trigram');
INSERT INTO messages_cjk (rowid, content)
    SELECT id, content FROM messages WHERE content GLOB '{CJK_GLOB}';
INSERT INTO summaries_cjk (rowid, content)
    SELECT id, content FROM summaries WHERE content GLOB '{CJK_GLOB}';
CREATE TRIGGER messages_cjk_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_cjk WHERE rowid = old.id;
END;
CREATE TRIGGER messages_cjk_update AFTER UPDATE OF content ON messages BEGIN
    DELETE FROM messages_cjk WHERE rowid = old.id;
    INSERT INTO messages_cjk (rowid, content)
        SELECT new.id, new.content WHERE new.content GLOB '{CJK_GLOB}';
END;
CREATE TRIGGER summaries_cjk_insert AFTER INSERT ON summaries
WHEN new.content GLOB '{CJK_GLOB}' BEGIN
    INSERT INTO summaries_cjk (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER summaries_cjk_delete AFTER DELETE ON summaries BEGIN
    DELETE FROM summaries_cjk WHERE rowid = old.id;
END;
CREATE TRIGGER summaries_cjk_update AFTER UPDATE OF content ON summaries BEGIN
    DELETE FROM summaries_cjk WHERE rowid = old.id;
    INSERT INTO summaries_cjk (rowid, content)
        SELECT new.id, new.content WHERE new.content GLOB '{CJK_GLOB}';
END;
"""  # noqa: S608 (a constant, no input)

# Version 8: the words inside payload files are searchable (``brain.payloads.filetext``).
# files_fts is contentless: the payloads stay on disk, the database holds their
# terms only. large_files is WITHOUT ROWID, so files_index gives each payload the
# integer rowid FTS5 needs and its state: 'text' (indexed), 'skipped' (image,
# binary, base64: no words) or 'pending'. SQL cannot read the files, so existing
# payloads are queued as 'pending' here and indexed by ``filetext.index_pending``
# when the store opens.
_V8: Final = """
CREATE TABLE files_index (
    id      INTEGER PRIMARY KEY,
    file_id TEXT NOT NULL UNIQUE REFERENCES large_files(file_id),
    state   TEXT NOT NULL CHECK (state IN ('pending', 'text', 'skipped'))
);
CREATE INDEX files_index_pending ON files_index(id) WHERE state = 'pending';
CREATE VIRTUAL TABLE files_fts USING fts5(
    text, content='', contentless_delete=1,
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER large_files_index_delete AFTER DELETE ON large_files BEGIN
    DELETE FROM files_fts WHERE rowid = (SELECT id FROM files_index WHERE file_id = old.file_id);
    DELETE FROM files_index WHERE file_id = old.file_id;
END;
INSERT INTO files_index (file_id, state)
    SELECT file_id, 'pending' FROM large_files ORDER BY created_at, file_id;
"""

# Version 9: the retrieval graph. Nodes (taught facts, corrections, directives,
# workspace chunks, and one node per summary, which reads the summary's text),
# weighted directed edges (both directions indexed), and query traces. The
# vector tables gain the 'node' kind: SQLite cannot change a CHECK in place, so
# they are rebuilt (same rows).
_V9: Final = """
CREATE TABLE embed_queue_v9 (
    kind   TEXT NOT NULL CHECK (kind IN ('message', 'summary', 'node')),
    row_id INTEGER NOT NULL,
    PRIMARY KEY (kind, row_id)
) WITHOUT ROWID;
INSERT INTO embed_queue_v9 SELECT kind, row_id FROM embed_queue;
DROP TABLE embed_queue;
ALTER TABLE embed_queue_v9 RENAME TO embed_queue;

-- A rowid table, not WITHOUT ROWID: a WITHOUT ROWID row keeps at most about
-- 1,000 bytes in its page with 4 KiB pages, so every 1 KiB vector spilled into an
-- overflow page of its own, mostly empty (4.7 KB on disk per vector, now ~1.1).
CREATE TABLE vectors_v9 (
    id              INTEGER PRIMARY KEY,
    kind            TEXT NOT NULL CHECK (kind IN ('message', 'summary', 'node')),
    row_id          INTEGER NOT NULL,
    conversation_id INTEGER NOT NULL,
    vector          BLOB NOT NULL,
    text_hash       BLOB,
    UNIQUE (kind, row_id)
);
INSERT INTO vectors_v9 (kind, row_id, conversation_id, vector, text_hash)
    SELECT kind, row_id, conversation_id, vector, text_hash FROM vectors;
DROP TABLE vectors;
ALTER TABLE vectors_v9 RENAME TO vectors;
CREATE INDEX vectors_text_hash ON vectors(text_hash) WHERE text_hash IS NOT NULL;

CREATE TABLE nodes (
    -- AUTOINCREMENT: a deleted node's id is never reused, so a stored trace never
    -- credits a later node for steps an earlier one took.
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id       TEXT NOT NULL UNIQUE,
    kind          TEXT NOT NULL
                  CHECK (kind IN ('teaching', 'correction', 'directive', 'chunk', 'summary')),
    content       TEXT,
    summary_id    INTEGER UNIQUE REFERENCES summaries(id),
    authority     TEXT NOT NULL DEFAULT 'overlay'
                  CHECK (authority IN ('constitutional', 'canonical', 'overlay')),
    source        TEXT,
    line_start    INTEGER,
    line_end      INTEGER,
    metadata      TEXT NOT NULL DEFAULT '{}',
    dedup_key     TEXT UNIQUE,
    created_at    TEXT NOT NULL,
    last_fired_at TEXT,
    fire_count    INTEGER NOT NULL DEFAULT 0,
    -- Learned prior, added to the node's similarity when it is a candidate seed.
    prior         REAL NOT NULL DEFAULT 0 CHECK (prior BETWEEN -1.0 AND 1.0),
    CHECK ((kind = 'summary') = (summary_id IS NOT NULL)),
    CHECK ((kind = 'summary') = (content IS NULL))
);
CREATE INDEX nodes_source ON nodes(source) WHERE source IS NOT NULL;

CREATE TABLE edges (
    source     INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    target     INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    weight     REAL NOT NULL CHECK (weight BETWEEN -1.0 AND 1.0),
    kind       TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (source, target),
    CHECK (source <> target)
) WITHOUT ROWID;
CREATE INDEX edges_target ON edges(target, source);

CREATE TABLE traces (
    id         INTEGER PRIMARY KEY,
    trace_id   TEXT NOT NULL UNIQUE,
    chat_id    TEXT,
    query      TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    outcome    REAL,
    learned_at TEXT
);
CREATE INDEX traces_chat ON traces(chat_id, id) WHERE chat_id IS NOT NULL;

INSERT INTO nodes (node_id, kind, summary_id, created_at)
    SELECT summary_id, 'summary', id, created_at FROM summaries;
-- Every graph query skips suppressed summary nodes: this keeps finding them cheap.
CREATE INDEX summaries_suppressed ON summaries(id) WHERE suppressed_at IS NOT NULL;
"""

# Version 10: a grant's hold. Several daemons may serve one database; the call
# running under a grant holds it (owner and lease end) so that calls under the
# same grant in other processes wait, and the token cap holds across processes
# (``brain.ops.grants.admit``).
_V10: Final = """
ALTER TABLE grants ADD COLUMN held_by TEXT;
ALTER TABLE grants ADD COLUMN held_until TEXT;
"""

# Version 11: suppression reaches summaries made before it. A summary whose text
# came from a source that is now suppressed (a message, a child summary, or a
# child that is itself withheld) is withheld: ``hidden_by = 'source'``, kept
# apart from ``suppressed_at`` so that unsuppress restores exactly what the user
# set. The suppression transaction maintains it. A withheld summary in the
# context list is rebuilt from its remaining sources into a replacement
# (``replaces`` names the original); a replacement swapped out again, because
# the original came back or a newer replacement took its place, is
# ``hidden_by = 'replaced'`` (kept, never shown). ``summary_sources.omitted``
# marks sources whose text was left out when the summary was made (suppressed
# then): their suppression never withholds it. Summaries stored before this
# version cannot tell, so any with a suppressed source is withheld and rebuilt.
_V11: Final = """
ALTER TABLE summaries ADD COLUMN hidden_by TEXT CHECK (hidden_by IN ('source', 'replaced'));
ALTER TABLE summaries ADD COLUMN replaces INTEGER REFERENCES summaries(id);
ALTER TABLE summary_sources ADD COLUMN omitted INTEGER NOT NULL DEFAULT 0;
-- Every agent-facing path skips these; the graph and the rebuild find them here.
CREATE INDEX summaries_hidden ON summaries(conversation_id, id)
    WHERE suppressed_at IS NOT NULL OR hidden_by IS NOT NULL;
CREATE INDEX summaries_replaces ON summaries(replaces) WHERE replaces IS NOT NULL;
UPDATE summaries SET hidden_by = 'source' WHERE id IN (
    WITH RECURSIVE withheld(id) AS (
        SELECT ss.summary_id FROM summary_sources ss JOIN messages m ON m.id = ss.message_id
            WHERE m.suppressed_at IS NOT NULL
        UNION
        SELECT ss.summary_id FROM summary_sources ss JOIN summaries c ON c.id = ss.child_id
            WHERE c.suppressed_at IS NOT NULL
        UNION
        SELECT ss.summary_id FROM withheld w JOIN summary_sources ss ON ss.child_id = w.id
    )
    SELECT id FROM withheld
);
"""

# Version 12: message-level fields the SDKs send besides the pinned columns
# (``refusal``, ``annotations``, ``audio``, ...), kept as a JSON object exactly
# as sent, and the marker of content sent as null or left out
# (``"__brain_content__": "null" | "absent"``; such content is stored as an
# empty string). NULL when there is neither.
_V12: Final = """
ALTER TABLE messages ADD COLUMN extra TEXT;
"""

# Version 13: the budget a session is assembled with (``brain.lcm.budgets``), so
# background compaction follows the host's budget across restarts and
# processes: ``assemble_budget`` (NULL: never assembled) and the last message
# seq when it was set (``assemble_budget_seq``: a larger budget takes over only
# once the smaller one has not been set for a while).
_V13: Final = """
ALTER TABLE conversations ADD COLUMN assemble_budget INTEGER;
ALTER TABLE conversations ADD COLUMN assemble_budget_seq INTEGER;
"""

MIGRATIONS: Final[tuple[str, ...]] = (
    _V1,
    _V2,
    _V3,
    _V4,
    _V5,
    _V6,
    _V7,
    _V8,
    _V9,
    _V10,
    _V11,
    _V12,
    _V13,
)
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
