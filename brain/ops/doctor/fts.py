"""The ``fts`` check and its repair: the full-text, CJK and payload-file indexes against their rows.

Every index here is derived data, so the repair rebuilds it (payload files are read again).
Tested through the runner in tests/brain/ops/doctor/test_runner.py (the fts breakages).
"""

from __future__ import annotations

import apsw

from brain.errors import StoreBusy
from brain.ops.doctor.report import Finding
from brain.payloads.filetext import index_pending
from brain.store.connection import Store
from brain.store.schema import CJK_GLOB

__all__ = ["check", "repair"]

_EXTERNAL = (
    ("messages_fts", "messages"),
    ("summaries_fts", "summaries"),
    ("nodes_fts", "nodes"),
    ("rollups_fts", "rollups"),
)
"""The external-content indexes and their rows (each row is in its index)."""


def check(store: Store) -> Finding:
    """Compare each index with its rows and run FTS5's integrity-check on each."""
    found = Finding("fts")
    for table, source in _EXTERNAL:
        found.count(source, store.scalar(f"SELECT count(*) FROM {source}"))  # noqa: S608
        found.problem(
            "error",
            f"{table}_missing",
            store.scalar(
                f"SELECT count(*) FROM {source} WHERE id NOT IN "  # noqa: S608
                f"(SELECT id FROM {table}_docsize)"
            ),
            f"{source} not in {table}",
        )
        found.problem(
            "error",
            f"{table}_stale",
            store.scalar(
                f"SELECT count(*) FROM {table}_docsize WHERE id NOT IN "  # noqa: S608
                f"(SELECT id FROM {source})"
            ),
            f"{table} rows with no {source} row",
        )
        _fts_integrity(store, found, table, external=True)
    for table, source in (("messages_cjk", "messages"), ("summaries_cjk", "summaries")):
        found.problem(
            "error",
            f"{table}_missing",
            store.scalar(
                f"SELECT count(*) FROM {source} WHERE content GLOB ? "  # noqa: S608
                f"AND id NOT IN (SELECT rowid FROM {table})",
                (CJK_GLOB,),
            ),
            f"{source} with CJK text not in {table}",
        )
        found.problem(
            "error",
            f"{table}_stale",
            len(_stale_cjk(store, table, source)),
            f"{table} rows with no matching {source} row",
        )
    found.count("large_files", store.scalar("SELECT count(*) FROM large_files"))
    found.count(
        "files_pending", store.scalar("SELECT count(*) FROM files_index WHERE state = 'pending'")
    )
    found.problem(
        "error",
        "files_index_missing",
        store.scalar(
            "SELECT count(*) FROM large_files "
            "WHERE file_id NOT IN (SELECT file_id FROM files_index)"
        ),
        "payload files not in files_index",
    )
    found.problem(
        "error",
        "files_index_stale",
        store.scalar(
            "SELECT count(*) FROM files_index "
            "WHERE file_id NOT IN (SELECT file_id FROM large_files)"
        ),
        "files_index rows with no payload file row",
    )
    found.problem(
        "error",
        "files_fts_missing",
        store.scalar(
            "SELECT count(*) FROM files_index WHERE state = 'text' "
            "AND id NOT IN (SELECT id FROM files_fts_docsize)"
        ),
        "indexed payload files not in files_fts",
    )
    found.problem(
        "error",
        "files_fts_stale",
        store.scalar(
            "SELECT count(*) FROM files_fts_docsize WHERE id NOT IN "
            "(SELECT id FROM files_index WHERE state = 'text')"
        ),
        "files_fts rows with no indexed payload file",
    )
    _fts_integrity(store, found, "files_fts", external=False)
    return found


def _fts_integrity(store: Store, found: Finding, table: str, *, external: bool) -> None:
    """FTS5's own check; for an external-content table, rank 1 also compares it with its content.

    The command is an INSERT, so it takes the write lock for as long as it reads the index.
    """
    sql = (
        f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)"  # noqa: S608
        if external
        else f"INSERT INTO {table} ({table}) VALUES ('integrity-check')"  # noqa: S608
    )
    try:
        store.execute(sql)
        bad = 0
    except StoreBusy:
        found.problem(
            "warning", f"{table}_unchecked", 1, f"{table}: integrity-check skipped (locked)"
        )
        return
    except apsw.Error:
        bad = 1
    found.problem("error", f"{table}_integrity", bad, f"{table} failed FTS5 integrity-check")


def _stale_cjk(store: Store, table: str, source: str) -> list[int]:
    return [
        int(r[0])
        for r in store.execute(
            f"SELECT c.rowid FROM {table} c LEFT JOIN {source} s ON s.id = c.rowid "  # noqa: S608
            "WHERE s.id IS NULL OR s.content IS NOT c.content OR NOT (s.content GLOB ?)",
            (CJK_GLOB,),
        )
    ]


def repair(store: Store, found: Finding) -> list[str]:
    """Rebuild each index the check found wrong (each in its own transaction)."""
    done: list[str] = []
    for table, _ in _EXTERNAL:
        if any(found.has(f"{table}_{k}") for k in ("missing", "stale", "integrity")):
            with store.transaction():
                store.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")  # noqa: S608
            done.append(f"rebuilt {table}")
    for table, source in (("messages_cjk", "messages"), ("summaries_cjk", "summaries")):
        if found.has(f"{table}_missing") or found.has(f"{table}_stale"):
            with store.transaction():
                stale = _stale_cjk(store, table, source)
                for rowid in stale:
                    store.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
                store.execute(
                    f"INSERT INTO {table} (rowid, content) SELECT id, content FROM {source} "  # noqa: S608
                    f"WHERE content GLOB ? AND id NOT IN (SELECT rowid FROM {table})",
                    (CJK_GLOB,),
                )
                added = store.changes()
            done.append(f"{table}: removed {len(stale)} stale rows, added {added}")
    if any(
        found.has(k)
        for k in (
            "files_index_missing",
            "files_index_stale",
            "files_fts_missing",
            "files_fts_stale",
            "files_fts_integrity",
        )
    ):
        with store.transaction():
            # Contentless: a stale row can only be deleted by rowid, and a payload's terms
            # only come back by reading the file again (index_pending, below).
            store.execute(
                "DELETE FROM files_fts WHERE rowid IN (SELECT id FROM files_fts_docsize "
                "WHERE id NOT IN (SELECT id FROM files_index WHERE state = 'text'))"
            )
            store.execute(
                "DELETE FROM files_index WHERE file_id NOT IN (SELECT file_id FROM large_files)"
            )
            store.execute(
                "UPDATE files_index SET state = 'pending' WHERE state = 'text' "
                "AND id NOT IN (SELECT id FROM files_fts_docsize)"
            )
            store.execute(
                "INSERT INTO files_index (file_id, state) SELECT file_id, 'pending' "
                "FROM large_files WHERE file_id NOT IN (SELECT file_id FROM files_index)"
            )
        indexed = index_pending(store)
        done.append(f"files_fts: re-read and indexed {indexed} payload files")
    return done
