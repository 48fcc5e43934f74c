"""The ``integrity`` check: SQLite's own page check and the foreign keys.

It has no repair: a corrupt page or a broken reference has no lossless fix, only a report.
Tested through the runner in tests/brain/ops/doctor/test_runner.py (healthy and deep runs).
"""

from __future__ import annotations

import apsw

from brain.ops.doctor.report import Finding

__all__ = ["check"]


def check(conn: apsw.Connection, deep: bool) -> Finding:
    """Run ``quick_check`` (``integrity_check`` when ``deep``) and ``foreign_key_check``."""
    found = Finding("integrity")
    pragma = "integrity_check" if deep else "quick_check"
    rows = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}(100)")]
    bad = [r for r in rows if r != "ok"]
    found.problem("error", pragma, len(bad), f"{pragma} problems: " + " | ".join(bad[:5]))
    by_table: dict[str, int] = {}
    for row in conn.execute("PRAGMA foreign_key_check"):
        by_table[str(row[0])] = by_table.get(str(row[0]), 0) + 1
    detail = ", ".join(f"{t} {n}" for t, n in sorted(by_table.items()))
    found.problem(
        "error",
        "foreign_key_violations",
        sum(by_table.values()),
        f"foreign key violations ({detail})",
    )
    return found
