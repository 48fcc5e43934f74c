"""The maintained row counts ``info`` reports (schema v18).

``counts`` holds one row per counted table, kept by triggers in the same
transaction as every insert and delete, so it can never disagree with the rows
that committed (a ``kill -9`` rolls both back together) and ``info`` reads nine
integers instead of counting millions of rows. Nothing in the engine deletes or
replaces rows without firing the triggers: no ``INSERT OR REPLACE`` (whose
implicit deletes would fire no trigger) and no table dropped at run time; the
doctor's ``counts`` check compares them with ``count(*)`` and rewrites them.

Tested in tests/brain/store/test_counts.py.
"""

from __future__ import annotations

from typing import Final

COUNTED: Final[tuple[str, ...]] = (
    "conversations",
    "messages",
    "large_files",
    "summaries",
    "nodes",
    "edges",
    "vectors",
    "embed_queue",
    "entity_backlog",
)
"""The tables whose rows are counted, by table name (the counter's name too)."""


_PER_TABLE: Final = """
INSERT OR IGNORE INTO counts (name, n) VALUES ('@', (SELECT count(*) FROM @));
CREATE TRIGGER IF NOT EXISTS counts_@_insert AFTER INSERT ON @ BEGIN
    UPDATE counts SET n = n + 1 WHERE name = '@';
END;
CREATE TRIGGER IF NOT EXISTS counts_@_delete AFTER DELETE ON @ BEGIN
    UPDATE counts SET n = n - 1 WHERE name = '@';
END;
"""
"""Seeds a table's counter from ``count(*)`` and keeps it (``@``: the table's name)."""

COUNTS: Final = (
    "CREATE TABLE IF NOT EXISTS counts (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;"
    + "".join(_PER_TABLE.replace("@", table) for table in COUNTED)
)

SCRIPTS: Final[tuple[str, ...]] = (COUNTS,)
"""The counters' migration."""
