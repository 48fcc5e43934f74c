"""Vectors stored as int8 with a per-row scale, and deletion counters for the matrix file (v19).

Every float32 vector (``4 * dim`` bytes) is rewritten as ``dim`` int8 codes plus a
float32 scale (the format of ``brain.vectors.quantise``) by the SQL function
``brain_quantised`` (:func:`quantised`), which :func:`functions` registers on the
migrating connection (numpy is imported only if a row needs it). Readers still
accept float32 blobs, so a row the function skips (no embedder dimension recorded)
is read correctly, and quantised as it is loaded.

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

__all__ = ["SCRIPTS", "functions", "quantised"]

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


def quantised(*args: Any) -> Any:
    """``brain_quantised(blob, dim)``: a float32 blob of ``dim`` as int8 codes and a scale.

    The same bytes as ``brain.vectors.quantise.encode`` (the store layer may not import
    the vectors layer; tests/brain/vectors/test_quantise.py checks they agree). Blobs
    of any other length are returned as they are (the doctor reports wrong lengths).
    """
    blob, dim = args
    if blob is None or dim is None or len(blob) != 4 * dim:
        return blob
    import numpy as np  # only when a row needs it: opening a database imports no numpy

    vector = np.frombuffer(blob, dtype="<f4")
    scale = np.float32(np.abs(vector).max() / 127.0)
    codes = np.clip(np.rint(vector / (scale if scale > 0 else np.float32(1.0))), -127, 127)
    return codes.astype(np.int8).tobytes() + np.asarray([scale], dtype="<f4").tobytes()


def functions(conn: apsw.Connection) -> None:
    """Register the SQL functions the migration scripts call."""
    conn.create_scalar_function("brain_quantised", quantised, 2, deterministic=True)
