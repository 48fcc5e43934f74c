"""The ``suppression`` check and its repair: each summary's withheld mark against its sources.

Tested through the runner in tests/brain/ops/doctor/test_runner.py and, for the marks themselves,
tests/brain/lcm/test_suppress.py.
"""

from __future__ import annotations

from typing import Final

from brain.lcm.suppress import restore_originals
from brain.ops.doctor.report import Finding
from brain.store.connection import Store

__all__ = ["check", "repair"]


# A summary is withheld (``hidden_by = 'source'``) exactly when a source that reached
# its text is hidden now (``brain.lcm.suppress``); retired replacements keep their state.
_SHOULD_WITHHOLD: Final = (
    "EXISTS (SELECT 1 FROM summary_sources ss LEFT JOIN messages m ON m.id = ss.message_id "
    "LEFT JOIN summaries k ON k.id = ss.child_id WHERE ss.summary_id = s.id AND ss.omitted = 0 "
    "AND (m.suppressed_at IS NOT NULL OR k.suppressed_at IS NOT NULL OR k.hidden_by IS NOT NULL))"
)
_WRONG_WITHHELD: Final = (
    f"(s.hidden_by IS NULL OR s.hidden_by = 'source') "
    f"AND (s.hidden_by IS NOT NULL) <> {_SHOULD_WITHHOLD}"
)
_SHOWN_IN_CONTEXT: Final = (
    "FROM context_items c JOIN summaries s ON s.id = c.summary_id "
    "WHERE s.suppressed_at IS NULL AND s.hidden_by = ?"
)


def check(store: Store) -> Finding:
    """Count wrong withheld marks, retired replacements in context, and rebuilds awaited."""
    found = Finding("suppression")
    found.count(
        "withheld",
        int(store.scalar("SELECT count(*) FROM summaries WHERE hidden_by = 'source'") or 0),
    )
    wrong = int(store.scalar(f"SELECT count(*) FROM summaries s WHERE {_WRONG_WITHHELD}") or 0)  # noqa: S608
    found.problem(
        "error",
        "wrong_withheld",
        wrong,
        "summaries whose withheld mark disagrees with their sources' suppression",
    )
    found.problem(
        "error",
        "retired_in_context",
        int(store.scalar(f"SELECT count(*) {_SHOWN_IN_CONTEXT}", ("replaced",)) or 0),
        "context items showing a retired replacement (not repairable automatically)",
    )
    found.problem(
        "warning",
        "awaiting_rebuild",
        int(store.scalar(f"SELECT count(*) {_SHOWN_IN_CONTEXT}", ("source",)) or 0),
        "withheld summaries in a context list awaiting their rebuild (a daemon serving the "
        "session, or `compact`, rebuilds them)",
    )
    return found


def repair(store: Store, found: Finding) -> list[str]:
    """Recompute wrong withheld marks, children before parents, and bump every context version."""
    if not found.has("wrong_withheld"):
        return []
    fixed = 0
    with store.transaction():
        # Depth by depth, children before parents: a parent's mark reads its children's.
        depths = [int(r[0]) for r in store.execute("SELECT DISTINCT depth FROM summaries")]
        cleared: set[int] = set()
        for depth in sorted(depths):
            rows = store.execute(
                f"SELECT s.id, s.hidden_by FROM summaries s WHERE s.depth = ? "  # noqa: S608
                f"AND {_WRONG_WITHHELD}",
                (depth,),
            ).fetchall()
            for row_id, hidden_by in rows:
                store.execute(
                    "UPDATE summaries SET hidden_by = ? WHERE id = ?",
                    (None if hidden_by else "source", row_id),
                )
                if hidden_by:
                    cleared.add(int(str(row_id)))
            fixed += len(rows)
        restore_originals(store, cleared)
        store.execute(
            "UPDATE conversations SET suppress_epoch = suppress_epoch + 1, "
            "context_version = context_version + 1"
        )
    return [f"recomputed the withheld mark of {fixed} summaries"]
