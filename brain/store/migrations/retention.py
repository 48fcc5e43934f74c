"""Retention's bookkeeping (schema v20): how far each session's derived data was
dropped, and what every pass took back.

``retention`` holds, per conversation, the newest ``seq`` whose message lost its
vector to a retention pass (``brain.ops.retention``): those messages are not
queued for embedding again (an embedder switch, doctor's repair) and doctor does
not count them as missing. ``retention_totals`` are the running sums ``info``
reports (passes, vectors and traces dropped, sessions and messages deleted,
pages vacuumed), each updated in the transaction that did the work, so a killed
pass leaves them matching what committed; its ``auto_vacuum`` row records the
file's vacuum mode (set here, and by whatever switches it: doctor's VACUUM), so
``info`` never asks ``PRAGMA auto_vacuum`` on its read path (that pragma, on the
daemon's event loop, stalled ``info`` and ``ping`` behind another process's
write lock: tests/e2e/test_cheap_requests.py, about one run in five).

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
INSERT OR IGNORE INTO retention_totals (name, n)
    SELECT 'auto_vacuum', auto_vacuum FROM pragma_auto_vacuum;
"""

SCRIPTS: Final[tuple[str, ...]] = (RETENTION,)
"""Retention's migration."""
