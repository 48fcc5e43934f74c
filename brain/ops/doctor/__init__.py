"""``brain doctor``: check a database's invariants and repair what can be repaired losslessly.

Each check has a stable name (``integrity``, ``schema``, ``fts``, ``vectors``,
``files``, ``context``, ``graph``, ``suppression``, ``rollups``, ``counts``), a status
(``ok``, ``warning``, ``error``), a message naming each problem and the counts
it measured. ``repair=True`` runs, for every check that found something, the
repairs that lose nothing: derived data is rebuilt (FTS and CJK indexes,
running totals, summary nodes, the embed queue, the row counters ``info``
reports; broken rollups are dropped and
every leaf queued for their refresh), ghost or malformed vectors are deleted
and their rows queued again, orphan payload files are moved aside (never
deleted) and stale temp files removed. Messages and summaries are never
deleted or changed. Then every check runs again, and the report is that second
run plus what each repair did.

Every repair is its own short ``BEGIN IMMEDIATE`` transaction, and each one
that changes something a serving process mirrors bumps the counter that
process watches (``vectors_epoch:<kind>``, ``graph_epoch``, a conversation's
``context_version``), so a doctor may run beside a daemon on the same database.

The database is not migrated by a plain check: the schema version is read on a
bare connection first, and a database older than this code is only reported
(``--repair`` migrates it, as the next open would); one newer is refused.
"""

from brain.ops.doctor.report import (
    CHECKS,
    Check,
    DoctorReport,
    Status,
    format_report,
    report_json,
)
from brain.ops.doctor.runner import doctor

__all__ = ["CHECKS", "Check", "DoctorReport", "Status", "doctor", "format_report", "report_json"]
