"""The ``schema`` check: the database's schema version against this code's.

Its repair is the migration itself, which the runner does by opening the store (so
there is no repair function here). Tested through the runner in
tests/brain/ops/doctor/test_runner.py (older and newer databases).
"""

from __future__ import annotations

from brain.ops.doctor.report import Finding
from brain.store.schema import SCHEMA_VERSION

__all__ = ["check"]


def check(before: int, now: int) -> Finding:
    """Compare the version ``now`` with the code's (``before`` is what it was before a repair)."""
    found = Finding("schema")
    found.count("user_version", now)
    found.count("code_version", SCHEMA_VERSION)
    if now > SCHEMA_VERSION:
        found.problem(
            "error",
            "newer",
            1,
            f"database schema version {now} is newer than this brain ({SCHEMA_VERSION}): "
            "upgrade brain; nothing else was checked",
        )
    elif now < SCHEMA_VERSION:
        found.problem(
            "warning",
            "older",
            1,
            f"database schema version {now} is older than this brain ({SCHEMA_VERSION}): "
            "the next open migrates it (or --repair); the other checks need the current schema",
        )
    return found
