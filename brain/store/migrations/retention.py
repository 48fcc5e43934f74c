"""Retention's bookkeeping (schema v19): how far each session's derived data was
dropped, and what every pass took back.

``retention`` holds, per conversation, the newest ``seq`` whose message lost its
vector to a retention pass (``brain.ops.retention``): those messages are not
queued for embedding again (an embedder switch, doctor's repair) and doctor does
not count them as missing. ``retention_totals`` are the running sums ``info``
reports (passes, vectors and traces dropped, sessions and messages deleted,
pages vacuumed), each updated in the transaction that did the work, so a killed
pass leaves them matching what committed.

Tested in tests/brain/ops/test_retention.py.
"""

from __future__ import annotations

from typing import Final

RETENTION: Final = """
CREATE TABLE IF NOT EXISTS retention (
    conversation_id     INTEGER PRIMARY KEY REFERENCES conversations(id),
    vectors_through_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS retention_totals (
    name TEXT PRIMARY KEY,
    n    INTEGER NOT NULL
) WITHOUT ROWID;
"""

SCRIPTS: Final[tuple[str, ...]] = (RETENTION,)
"""Retention's migration."""
