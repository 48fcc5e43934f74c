"""Vectors stored as int8 with a per-row scale, and deletion counters for the matrix file (v19).

Every float32 vector (``4 * dim`` bytes) is rewritten as ``dim`` int8 codes plus a
float32 scale (``brain.vectors.quantise``) by the SQL function ``brain_quantised``,
which :func:`functions` registers on the migrating connection (numpy is imported only
if a row needs it). Readers still accept float32 blobs, so a row the function skips
(no embedder dimension recorded) is read correctly, and quantised as it is loaded.

``vectors_gone:<kind>`` in ``meta`` (absent: 0) counts deleted or rewritten vectors of each kind,
kept by triggers in the same transaction as the change. The matrix file beside the
database (``brain.vectors.matrix``) holds the rows up to some ``vectors.id``; while
its kinds' counters are unchanged, no row it holds has gone or changed (a reused
rowid needs its predecessor deleted first), so only rows with a larger id must be
read from the database.

Tested in tests/brain/store/test_vectors_int8.py.
"""

from __future__ import annotations

from typing import Any, Final

import apsw

__all__ = ["SCRIPTS", "functions"]

_INT8: Final = """
UPDATE vectors SET vector = brain_quantised(
    vector, (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'embedder_dim'))
WHERE length(vector) = 4 * (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'embedder_dim');

CREATE TRIGGER IF NOT EXISTS vectors_gone_delete AFTER DELETE ON vectors BEGIN
    INSERT INTO meta (key, value) VALUES ('vectors_gone:' || old.kind, '1')
    ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1;
END;
CREATE TRIGGER IF NOT EXISTS vectors_gone_update AFTER UPDATE ON vectors BEGIN
    INSERT INTO meta (key, value) VALUES ('vectors_gone:' || old.kind, '1')
    ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1;
END;
"""

SCRIPTS: Final[tuple[str, ...]] = (_INT8,)
"""The int8 migration (v19)."""


def _quantised(*args: Any) -> Any:
    from brain.vectors.quantise import sql_quantised  # numpy: only when a row needs it

    blob, dim = args
    return sql_quantised(blob, dim)


def functions(conn: apsw.Connection) -> None:
    """Register the SQL functions the migration scripts call."""
    conn.create_scalar_function("brain_quantised", _quantised, 2, deterministic=True)
