"""Each message's conversation in its full-text row (schema v21).

``messages_fts`` gains a third column, ``conv``, holding one token, ``c<conversation
id>``, so a search scoped to conversations narrows inside FTS5: ``conv : c12 AND
{content name} : (...)`` walks the conversation's short posting list and seeks in
the words' lists, instead of reading every match of the words and dropping the
other conversations' rows in the join. The rowid span that did this before fails
when a long session's messages interleave with other sessions' (its span is the
whole table): at 1M messages a 50k-message session cost what the whole table did.

The index stays external-content. Its content is the view ``messages_fts_source``
(the messages with their ``conv`` token), which FTS5 reads for snippets and for
``rebuild``. The migration rebuilds the index from the messages; like every
migration it runs in the one transaction ``migrate`` opens, so a process killed
during it leaves the file at version 20, untouched, and the next open starts it
again (tests/brain/store/test_fts_scope.py). The token adds one to every row's
length and to the average, so bm25 scores shift by about 1% of the length term;
``conv`` has weight 0 in ranking (``brain.recall.search.fulltext``).
"""

from __future__ import annotations

from typing import Final

FTS_SCOPE: Final = """
DROP TRIGGER IF EXISTS messages_fts_delete;
DROP TRIGGER IF EXISTS messages_fts_update;
DROP TABLE IF EXISTS messages_fts;
DROP VIEW IF EXISTS messages_fts_source;
CREATE VIEW messages_fts_source AS
    SELECT id, content, name, 'c' || conversation_id AS conv FROM messages;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, name, conv, content='messages_fts_source', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, name, conv)
        VALUES ('delete', old.id, old.content, old.name, 'c' || old.conversation_id);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, name, conversation_id ON messages
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, name, conv)
        VALUES ('delete', old.id, old.content, old.name, 'c' || old.conversation_id);
    INSERT INTO messages_fts(rowid, content, name, conv)
        VALUES (new.id, new.content, new.name, 'c' || new.conversation_id);
END;
"""

SCRIPTS: Final[tuple[str, ...]] = (FTS_SCOPE,)
"""The conversation token's migration."""
