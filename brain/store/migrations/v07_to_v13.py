"""Migrations 7 to 13, as data: CJK search, payload text search, the retrieval graph, a
grant's hold, withheld summaries, SDK message fields and the budget a session follows.

A new migration is appended here (or, past ~500 lines, in a next module of this
package) and to ``MIGRATIONS`` in ``brain.store.schema``. A released script is never
edited. Tested through ``tests/brain/store/test_schema.py`` (every script applied to a
fresh and to an old database): a script means something only as a step of it.
"""

from __future__ import annotations

from typing import Final

from brain.tokens import CJK_CLASS

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

SCRIPTS: Final[tuple[str, ...]] = (_V7, _V8, _V9, _V10, _V11, _V12, _V13)
"""The scripts to versions 7 to 13, in order."""
