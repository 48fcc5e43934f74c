"""The ``rollups`` check and its repair: day and week rollups against the leaves they
name (``brain.lcm.rollups``).

Rollups are derived, so a broken one is dropped and every leaf queued again: the next
refresh (a serving daemon's background worker, or ``recent``) makes them anew. Tested
through the runner in tests/brain/ops/doctor/test_runner.py.
"""

from __future__ import annotations

from typing import Final

from brain.lcm.rollups.build import requeue_all
from brain.ops.doctor.report import Finding
from brain.store.connection import Store

__all__ = ["check", "repair"]

# A rollup is broken when it names no leaf, or a source that is no leaf summary (gone,
# or another kind): refreshes only ever store visible leaves.
_BROKEN: Final = (
    "SELECT r.id FROM rollups r WHERE NOT EXISTS "
    "(SELECT 1 FROM rollup_sources rs WHERE rs.rollup_id = r.id) "
    "OR EXISTS (SELECT 1 FROM rollup_sources rs LEFT JOIN summaries s ON s.id = rs.summary_id "
    "WHERE rs.rollup_id = r.id AND (s.id IS NULL OR s.kind <> 'leaf'))"
)


def check(store: Store) -> Finding:
    """Count rollups, leaves queued for a refresh, and rollups whose sources are wrong."""
    found = Finding("rollups")
    found.count("rollups", int(store.scalar("SELECT count(*) FROM rollups") or 0))
    found.count("queued", int(store.scalar("SELECT count(*) FROM rollup_backlog") or 0))
    found.problem(
        "error",
        "broken",
        int(store.scalar(f"SELECT count(*) FROM ({_BROKEN})") or 0),  # noqa: S608
        "rollups with no source or a source that is not a leaf summary",
    )
    return found


def repair(store: Store, found: Finding) -> list[str]:
    """Drop the broken rollups and queue every leaf, so the next refresh rebuilds them."""
    if not found.has("broken"):
        return []
    with store.transaction():
        ids = [int(r[0]) for r in store.execute(_BROKEN)]
        for row_id in ids:
            store.execute("DELETE FROM rollup_sources WHERE rollup_id = ?", (row_id,))
            store.execute("DELETE FROM rollups WHERE id = ?", (row_id,))
        queued = requeue_all(store)
    return [f"dropped {len(ids)} broken rollups and queued {queued} leaves for their refresh"]
