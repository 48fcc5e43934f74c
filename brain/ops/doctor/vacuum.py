"""The ``vacuum`` check and its repair: can freed pages go back to the file system?

A database made since schema v20 keeps a page map (``auto_vacuum = INCREMENTAL``),
so a retention pass (``brain.ops.retention``) shrinks the file in small steps. An
older file has none: its free pages are only reused by later writes. The repair
switches it with one ``VACUUM`` (the whole file rewritten, under the write lock:
a serving daemon's writes wait meanwhile, up to ``busy_timeout_ms``, and the disk
needs room for a second copy). Tested through the runner in
tests/brain/ops/doctor/test_runner.py and tests/brain/ops/test_retention.py.
"""

from __future__ import annotations

import time

from brain.ops.doctor.report import Finding
from brain.store.connection import Store

__all__ = ["check", "repair"]


def check(store: Store) -> Finding:
    """The file's vacuum mode and free pages; a warning without a page map."""
    found = Finding("vacuum")
    mode = int(store.scalar("PRAGMA auto_vacuum"))
    found.count("auto_vacuum", mode)
    found.count("free_pages", int(store.scalar("PRAGMA freelist_count")))
    found.problem(
        "warning",
        "not_incremental",
        int(mode != 2),
        "database without incremental vacuum: freed pages never leave the file "
        "(--repair switches it with one VACUUM)",
    )
    return found


def repair(store: Store, found: Finding) -> list[str]:
    """Switch the file to incremental vacuum: one ``VACUUM`` (outside any transaction)."""
    if not found.has("not_incremental"):
        return []
    started = time.perf_counter()
    before = int(store.scalar("PRAGMA page_count"))
    store.execute("PRAGMA auto_vacuum = INCREMENTAL")
    store.execute("VACUUM")
    after = int(store.scalar("PRAGMA page_count"))
    with store.transaction():  # what ``info`` reports (brain.store.migrations.retention)
        store.execute(
            "INSERT INTO retention_totals (name, n) SELECT 'auto_vacuum', auto_vacuum "
            "FROM pragma_auto_vacuum WHERE true ON CONFLICT (name) DO UPDATE SET n = excluded.n"
        )
    took = time.perf_counter() - started
    return [f"switched to incremental vacuum (VACUUM: {before} -> {after} pages, {took:.1f} s)"]
