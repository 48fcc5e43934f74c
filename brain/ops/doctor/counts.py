"""The ``counts`` check and its repair: the maintained counters ``info`` reports
(``brain.store.migrations.counts``) against ``count(*)`` of their tables.

Triggers keep them in the writes' own transactions, so a difference means
something wrote around them (a hand edit, a tool with triggers off). The
repair rewrites every counter from ``count(*)`` in one transaction: they are
derived, nothing is lost. Tested through the runner in
tests/brain/ops/doctor/test_runner.py.
"""

from __future__ import annotations

from typing import Final

from brain.ops.doctor.report import Finding
from brain.store.connection import Store
from brain.store.migrations.counts import COUNTED

__all__ = ["check", "repair"]


_PAIRS: Final = " UNION ALL ".join(
    f"SELECT '{t}', (SELECT n FROM counts WHERE name = '{t}'), (SELECT count(*) FROM {t})"  # noqa: S608
    for t in COUNTED
)
"""Each counter beside its table's ``count(*)``, in one statement: one snapshot, so a
daemon committing meanwhile (a row and its counter together) cannot make them differ."""


def _drifted(store: Store) -> list[str]:
    return [str(table) for table, kept, counted in store.execute(_PAIRS) if kept != counted]


def check(store: Store) -> Finding:
    """Count the counters that differ from their table's ``count(*)`` (or are missing)."""
    found = Finding("counts")
    found.count("counters", len(COUNTED))
    found.problem(
        "warning",
        "drifted",
        len(_drifted(store)),
        "maintained row counters differ from count(*) (info reports them)",
    )
    return found


def repair(store: Store, found: Finding) -> list[str]:
    """Rewrite every counter from ``count(*)``, in one transaction."""
    if not found.has("drifted"):
        return []
    with store.transaction():
        drifted = _drifted(store)
        for table in COUNTED:
            store.execute(
                "INSERT INTO counts (name, n) VALUES (?, (SELECT count(*) FROM "  # noqa: S608
                f"{table})) ON CONFLICT (name) DO UPDATE SET n = excluded.n",
                (table,),
            )
    return [f"recounted {', '.join(drifted)} from count(*)"]
