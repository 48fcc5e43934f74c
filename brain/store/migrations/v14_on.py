"""Migrations from 14 on, as data: the graph's nodes are searchable by keyword (and
their vocabulary readable).

Appended to ``MIGRATIONS`` in ``brain.store.schema`` like the earlier modules; a
released script is never edited. Tested through ``tests/brain/store/test_schema.py``.
"""

from __future__ import annotations

from typing import Final

# Version 14: the words of the graph's nodes are searchable, so a query seeds the
# graph from keyword matches as well as from its nearest vectors (hybrid grep's
# ranking, ``brain.graph.seeding``). A summary node has no text of its own (it reads
# its summary's, already in summaries_fts): it is indexed as an empty document, so
# the index holds every node row and FTS5's integrity-check can compare the two.
# Nodes are written by few paths (teach, sync, maintain's merges and deletions), none
# as hot as ingest, so triggers keep the index in step on every one of them.
_V14: Final = """
CREATE VIRTUAL TABLE nodes_fts USING fts5(
    content, content='nodes', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO nodes_fts (nodes_fts) VALUES ('rebuild');
CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN
    INSERT INTO nodes_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN
    INSERT INTO nodes_fts (nodes_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER nodes_fts_update AFTER UPDATE OF content ON nodes BEGIN
    INSERT INTO nodes_fts (nodes_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO nodes_fts (rowid, content) VALUES (new.id, new.content);
END;
"""

# Version 15: the node index's vocabulary, so a keyword search can leave out words
# that most nodes hold (``brain.graph.seeding``): scoring every node such a word
# matches cost the most and added least. An fts5vocab table stores nothing; it reads
# nodes_fts. Read connections are query_only, so it cannot be made on demand there.
_V15: Final = """
CREATE VIRTUAL TABLE nodes_fts_vocab USING fts5vocab(nodes_fts, row);
"""

SCRIPTS: Final[tuple[str, ...]] = (_V14, _V15)
"""The scripts to versions 14 on, in order."""
