"""The doctor's runner: every check in order, then the repairs of what they found, then a re-check.

Tested in tests/brain/ops/doctor/test_runner.py, which runs it on real databases.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import apsw

from brain.config import BrainConfig
from brain.errors import StorageError
from brain.ops.doctor import (
    context,
    counts,
    files,
    fts,
    graph,
    integrity,
    rollups,
    schema,
    suppression,
    vacuum,
    vectors,
)
from brain.ops.doctor.report import Check, DoctorReport, Finding
from brain.store.connection import Store, open_store
from brain.store.schema import SCHEMA_VERSION

__all__ = ["doctor"]


def doctor(
    path: str | os.PathLike[str],
    config: BrainConfig | None = None,
    *,
    repair: bool = False,
    deep: bool = False,
) -> DoctorReport:
    """Check the database at ``path`` (it must exist); with ``repair``, fix what is safe, re-check.

    ``deep`` runs ``PRAGMA integrity_check`` instead of ``quick_check`` and hashes
    every payload file (sha256 against ``large_files``); otherwise payloads are
    checked by presence and size only, which costs a ``stat`` each.
    """
    started = time.perf_counter()
    config = config or BrainConfig()
    db = Path(path).expanduser().absolute()
    if not db.is_file():
        raise StorageError(f"no database at {db}")
    version = _bare_version(db, config)

    def report(checks: list[Check]) -> DoctorReport:
        ms = (time.perf_counter() - started) * 1000
        return DoctorReport(str(db), tuple(checks), repair, deep, ms)

    if version > SCHEMA_VERSION or (version < SCHEMA_VERSION and not repair):
        # open_store would refuse a newer database and migrate an older one; look only.
        conn = _bare_connection(db, config)
        try:
            checked = integrity.check(conn, deep).done()
        finally:
            conn.close()
        return report([checked, schema.check(version, version).done()])

    # migrates an older database (only reached with repair); never creates one
    store = open_store(db, config, create=False)
    try:
        findings = _run_checks(store, deep, version)
        repaired: dict[str, tuple[str, ...]] = {}
        if repair:
            if version < SCHEMA_VERSION:
                repaired["schema"] = (f"migrated from version {version} to {SCHEMA_VERSION}",)
            for finding in findings:
                fix = _REPAIRS.get(finding.name)
                if fix is not None and finding.problems:
                    repaired[finding.name] = repaired.get(finding.name, ()) + tuple(
                        fix(store, finding)
                    )
            findings = _run_checks(store, deep, SCHEMA_VERSION)
        return report([f.done(repaired.get(f.name, ())) for f in findings])
    finally:
        store.close()


def _run_checks(store: Store, deep: bool, version_before: int) -> list[Finding]:
    # The integrity pragma runs on a connection of its own: it also runs FTS5's
    # check, which trusts the index structure FTS5 cached in the connection at
    # its last use and never re-reads it. On the store's connection, after our
    # own FTS queries and repairs, that cache predates a serving daemon's later
    # writes (whose merges drop the segments it names), and the check reported
    # "corruption found reading blob" on a sound database.
    conn = _bare_connection(store.path, store.config)
    try:
        integrity_found = integrity.check(conn, deep)
    finally:
        conn.close()
    return [
        integrity_found,
        schema.check(version_before, store.schema_version()),
        fts.check(store),
        vectors.check(store),
        files.check(store, deep),
        context.check(store),
        graph.check(store),
        suppression.check(store),
        rollups.check(store),
        counts.check(store),
        vacuum.check(store),
    ]


# -- bare connection ----------------------------------------------------------------


def _bare_connection(db: Path, config: BrainConfig) -> apsw.Connection:
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error as exc:
        raise StorageError(f"cannot open database {db}: {exc}") from exc
    conn.set_busy_timeout(config.busy_timeout_ms)
    return conn


def _bare_version(db: Path, config: BrainConfig) -> int:
    conn = _bare_connection(db, config)
    try:
        row = conn.execute("PRAGMA user_version").fetchone()
    except apsw.Error as exc:
        raise StorageError(f"cannot read database {db}: {exc}") from exc
    finally:
        conn.close()
    return 0 if row is None else int(row[0])


_REPAIRS: Final[Mapping[str, Callable[[Store, Finding], list[str]]]] = {
    "fts": fts.repair,
    "vectors": vectors.repair,
    "files": files.repair,
    "context": context.repair,
    "graph": graph.repair,
    "suppression": suppression.repair,
    "rollups": rollups.repair,
    "counts": counts.repair,
    "vacuum": vacuum.repair,
}
