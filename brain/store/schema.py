"""Schema migrations, versioned by ``PRAGMA user_version``.

Each migration is a SQL script that moves the schema from version ``n - 1`` to
``n``. ``migrate`` runs every pending one inside a single ``BEGIN IMMEDIATE``
transaction and reads the version only after taking the write lock, so two
processes opening a fresh database at once cannot both apply the same step.
Scripts are append-only: a released migration is never edited, only followed.
The scripts themselves are data, one module per version range, in
``brain.store.migrations``; this module puts them in order and applies them.
"""

from __future__ import annotations

from typing import Final

import apsw

from brain.errors import StorageError
from brain.store.migrations import (
    counts,
    entities,
    fts_scope,
    retention,
    rollups,
    v01_to_v06,
    v07_to_v13,
    v14_on,
    vectors_int8,
)
from brain.store.migrations.v07_to_v13 import CJK_GLOB

__all__ = ["CJK_GLOB", "MIGRATIONS", "SCHEMA_VERSION", "migrate"]

MIGRATIONS: Final[tuple[str, ...]] = (
    *v01_to_v06.SCRIPTS,
    *v07_to_v13.SCRIPTS,
    *v14_on.SCRIPTS,
    *entities.SCRIPTS,
    *rollups.SCRIPTS,
    *counts.SCRIPTS,
    *vectors_int8.SCRIPTS,
    *retention.SCRIPTS,
    *fts_scope.SCRIPTS,
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
        vectors_int8.functions(conn)
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
