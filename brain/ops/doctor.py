"""``brain doctor``: check a database's invariants and repair what can be repaired losslessly.

Each check has a stable name (``integrity``, ``schema``, ``fts``, ``vectors``,
``files``, ``context``, ``graph``, ``suppression``), a status (``ok``, ``warning``, ``error``), a
message naming each problem and the counts it measured. ``repair=True`` runs,
for every check that found something, the repairs that lose nothing: derived
data is rebuilt (FTS and CJK indexes, running totals, summary nodes, the embed
queue), ghost or malformed vectors are deleted and their rows queued again,
orphan payload files are moved aside (never deleted) and stale temp files
removed. Messages and summaries are never deleted or changed. Then every check
runs again, and the report is that second run plus what each repair did.

Every repair is its own short ``BEGIN IMMEDIATE`` transaction, and each one
that changes something a serving process mirrors bumps the counter that
process watches (``vectors_epoch:<kind>``, ``graph_epoch``, a conversation's
``context_version``), so a doctor may run beside a daemon on the same database.

The database is not migrated by a plain check: the schema version is read on a
bare connection first, and a database older than this code is only reported
(``--repair`` migrates it, as the next open would); one newer is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import apsw
import orjson

from brain.config import BrainConfig
from brain.errors import NotFound, StorageError, StoreBusy
from brain.graph.nodes import bump_epoch
from brain.lcm.suppress import restore_originals
from brain.payloads.files import FILE_ID_RE, file_path, stray_files
from brain.payloads.filetext import index_pending
from brain.store.connection import Store, open_store
from brain.store.schema import CJK_GLOB, SCHEMA_VERSION
from brain.vectors.index import Kind, note_vectors_changed, stored_identity

__all__ = ["CHECKS", "Check", "DoctorReport", "Status", "doctor", "format_report", "report_json"]

Status = Literal["ok", "warning", "error"]
CHECKS: Final = (
    "integrity",
    "schema",
    "fts",
    "vectors",
    "files",
    "context",
    "graph",
    "suppression",
)
"""Every check's name, in the order they run and are reported."""

_ORPHANS_DIR: Final = "orphans"
_HASH_CHUNK: Final = 1024 * 1024
_SEVERITY: Final[Mapping[Status, int]] = {"ok": 0, "warning": 1, "error": 2}


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome: ``counts`` are what it measured, ``repaired`` what a repair did."""

    name: str
    status: Status
    message: str
    counts: Mapping[str, int]
    problems: tuple[str, ...] = ()
    """The keys of ``counts`` that are problems (stable names, e.g. ``wrong_dim``)."""
    repaired: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The check as plain JSON-ready data."""
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "counts": dict(self.counts),
            "problems": list(self.problems),
            "repaired": list(self.repaired),
        }


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Every check of one run (after repairs, when asked), in ``CHECKS`` order."""

    db: str
    checks: tuple[Check, ...]
    repair: bool
    deep: bool
    took_ms: float

    @property
    def ok(self) -> bool:
        """True when every check is ``ok``."""
        return all(c.status == "ok" for c in self.checks)

    @property
    def status(self) -> Status:
        """The worst status of any check."""
        return max((c.status for c in self.checks), key=_SEVERITY.__getitem__, default="ok")

    def check(self, name: str) -> Check:
        """The check called ``name`` (``KeyError`` if it did not run)."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        return {
            "db": self.db,
            "ok": self.ok,
            "status": self.status,
            "repair": self.repair,
            "deep": self.deep,
            "took_ms": round(self.took_ms, 1),
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclass
class _Finding:
    """A check in progress: counts, and the problems among them with their severity."""

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[tuple[Status, str, str]] = field(default_factory=list)  # status, key, text

    def count(self, key: str, value: int) -> None:
        self.counts[key] = int(value)

    def problem(self, status: Status, key: str, value: int, text: str) -> None:
        """Record a count that is a problem when it is not zero."""
        self.counts[key] = int(value)
        if value:
            self.problems.append((status, key, f"{value} {text}"))

    def has(self, key: str) -> bool:
        return any(k == key for _s, k, _t in self.problems)

    def done(self, repaired: tuple[str, ...] = ()) -> Check:
        status: Status = max(
            (s for s, _k, _t in self.problems), key=_SEVERITY.__getitem__, default="ok"
        )
        texts = [t for _s, _k, t in self.problems]
        keys = tuple(k for _s, k, _t in self.problems)
        return Check(self.name, status, "; ".join(texts) or "ok", self.counts, keys, repaired)


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
            integrity = _integrity(conn, deep).done()
        finally:
            conn.close()
        return report([integrity, _schema(version, version).done()])

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


def _run_checks(store: Store, deep: bool, version_before: int) -> list[_Finding]:
    # The integrity pragma runs on a connection of its own: it also runs FTS5's
    # check, which trusts the index structure FTS5 cached in the connection at
    # its last use and never re-reads it. On the store's connection, after our
    # own FTS queries and repairs, that cache predates a serving daemon's later
    # writes (whose merges drop the segments it names), and the check reported
    # "corruption found reading blob" on a sound database.
    conn = _bare_connection(store.path, store.config)
    try:
        integrity = _integrity(conn, deep)
    finally:
        conn.close()
    return [
        integrity,
        _schema(version_before, store.schema_version()),
        _fts(store),
        _vectors(store),
        _files(store, deep),
        _context(store),
        _graph(store),
        _suppression(store),
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


# -- checks ---------------------------------------------------------------------


def _integrity(conn: apsw.Connection, deep: bool) -> _Finding:
    found = _Finding("integrity")
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


def _schema(before: int, now: int) -> _Finding:
    found = _Finding("schema")
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


def _fts(store: Store) -> _Finding:
    found = _Finding("fts")
    for table, source in (("messages_fts", "messages"), ("summaries_fts", "summaries")):
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


def _fts_integrity(store: Store, found: _Finding, table: str, *, external: bool) -> None:
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


_GHOST_VECTORS: Final = (
    "FROM vectors AS v WHERE (v.kind = 'message' AND NOT EXISTS "
    "(SELECT 1 FROM messages m WHERE m.id = v.row_id)) "
    "OR (v.kind = 'summary' AND NOT EXISTS (SELECT 1 FROM summaries s WHERE s.id = v.row_id)) "
    # A summary node reads its summary's vector; only nodes with their own text have one.
    "OR (v.kind = 'node' AND NOT EXISTS "
    "(SELECT 1 FROM nodes n WHERE n.id = v.row_id AND n.content IS NOT NULL))"
)


def _unembedded(kind: str, table: str, where: str = "1") -> str:
    return (
        f"SELECT '{kind}', t.id FROM {table} t WHERE {where} AND NOT EXISTS "  # noqa: S608
        f"(SELECT 1 FROM vectors v WHERE v.kind = '{kind}' AND v.row_id = t.id) AND NOT EXISTS "
        f"(SELECT 1 FROM embed_queue q WHERE q.kind = '{kind}' AND q.row_id = t.id)"
    )


_MISSING_VECTORS: Final = (
    _unembedded("message", "messages"),
    _unembedded("summary", "summaries"),
    _unembedded("node", "nodes", "t.content IS NOT NULL"),
)


def _vectors(store: Store) -> _Finding:
    found = _Finding("vectors")
    identity = stored_identity(store)
    total = int(store.scalar("SELECT count(*) FROM vectors"))
    found.count("vectors", total)
    found.count("queued", store.scalar("SELECT count(*) FROM embed_queue"))
    dim = _stored_dim(identity)
    found.count("dim", dim or 0)
    if identity is None or dim is None:
        found.problem("error", "no_identity", total, "vectors with no embedder identity in meta")
    else:
        found.problem(
            "error",
            "wrong_dim",
            store.scalar("SELECT count(*) FROM vectors WHERE length(vector) <> ?", (dim * 4,)),
            f"vectors whose length is not dim {dim} (float32)",
        )
    found.problem(
        "error",
        "ghosts",
        store.scalar("SELECT count(*) " + _GHOST_VECTORS),
        "ghost vectors (their row is gone)",
    )
    missing = sum(
        int(store.scalar(f"SELECT count(*) FROM ({sql})"))  # noqa: S608
        for sql in _MISSING_VECTORS
    )
    found.problem("warning", "missing", missing, "rows neither embedded nor queued")
    return found


def _stored_dim(identity: tuple[str, str] | None) -> int | None:
    if identity is None:
        return None
    with contextlib.suppress(ValueError):
        return int(identity[1])
    return None


def _files(store: Store, deep: bool) -> _Finding:
    found = _Finding("files")
    rows = list(store.execute("SELECT file_id, byte_size, sha256 FROM large_files"))
    missing = wrong_size = wrong_hash = 0
    for file_id, size, digest in rows:
        try:
            path = file_path(store.files_dir, str(file_id))
            actual = path.stat().st_size
        except (NotFound, FileNotFoundError):
            missing += 1
            continue
        if actual != int(size):
            wrong_size += 1
        elif deep and _sha256(path) != str(digest):
            wrong_hash += 1
    found.count("large_files", len(rows))
    lost = "payload lost: not repairable; restoring its message fails"
    found.problem("error", "missing", missing, f"payload files missing on disk ({lost})")
    found.problem("error", "wrong_size", wrong_size, f"payload files with the wrong size ({lost})")
    found.problem(
        "error", "wrong_sha256", wrong_hash, f"payload files with the wrong sha256 ({lost})"
    )
    orphans, temps = _strays(store)
    found.problem(
        "warning",
        "orphans",
        len(orphans),
        "payload files no row names (older than the grace period)",
    )
    found.problem(
        "warning", "temp_files", len(temps), "leftover temp files (older than the grace period)"
    )
    return found


def _strays(store: Store) -> tuple[list[Path], list[Path]]:
    """Files no row names and temp files, older than the grace (younger ones may be mid-write)."""
    known = {str(r[0]) for r in store.execute("SELECT file_id FROM large_files")}
    strays = stray_files(store.files_dir, known, store.config.orphan_file_grace_s)
    orphans = [p for p in strays if FILE_ID_RE.fullmatch(p.name)]
    return orphans, [p for p in strays if not FILE_ID_RE.fullmatch(p.name)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _context(store: Store) -> _Finding:
    found = _Finding("context")
    max_seq = {
        int(c): int(m)
        for c, m in store.execute("SELECT conversation_id, max(seq) FROM messages GROUP BY 1")
    }
    dangling = misplaced = overlapping = uncovered = items = 0
    current: int | None = None
    end = 0  # the last message seq the items so far cover in ``current``
    for row in store.execute(
        "SELECT c.conversation_id, c.pos, c.message_id, m.conversation_id, m.seq, "
        "s.conversation_id, s.first_seq, s.last_seq FROM context_items c "
        "LEFT JOIN messages m ON m.id = c.message_id "
        "LEFT JOIN summaries s ON s.id = c.summary_id ORDER BY c.conversation_id, c.pos"
    ):
        conv, pos, message_id, m_conv, seq, s_conv, first, last = row
        items += 1
        if conv != current:
            if current is not None:
                uncovered += max(0, max_seq.get(current, 0) - end)
            current, end = conv, 0
        owner, start, stop = (m_conv, seq, seq) if message_id is not None else (s_conv, first, last)
        if owner != conv:  # no such row, or a row of another conversation
            dangling += 1
            continue
        if pos != start:
            misplaced += 1
        if start <= end:
            overlapping += 1
        elif start > end + 1:
            uncovered += start - end - 1
        end = max(end, int(stop))
    if current is not None:
        uncovered += max(0, max_seq.get(current, 0) - end)
    seen = {int(r[0]) for r in store.execute("SELECT DISTINCT conversation_id FROM context_items")}
    uncovered += sum(m for c, m in max_seq.items() if c not in seen)
    found.count("items", items)
    manual = "not repairable automatically"
    found.problem(
        "error",
        "dangling",
        dangling,
        f"context items whose message or summary is missing or in another conversation ({manual})",
    )
    found.problem(
        "error",
        "misplaced",
        misplaced,
        f"context items whose pos is not their first seq ({manual})",
    )
    found.problem(
        "error",
        "overlapping",
        overlapping,
        f"context items covering messages already covered ({manual})",
    )
    found.problem("error", "uncovered", uncovered, f"messages no context item covers ({manual})")
    found.count("conversations", store.scalar("SELECT count(*) FROM conversations"))
    found.problem(
        "error",
        "wrong_totals",
        store.scalar("SELECT count(*) FROM conversations c WHERE " + _TOTALS_DIFFER),  # noqa: S608
        "conversations whose context_tokens or raw_tokens differ from their items' sums",
    )
    return found


_CONTEXT_SUM: Final = (
    "(SELECT coalesce(sum(i.token_count), 0) FROM context_items i WHERE i.conversation_id = c.id)"
)
_RAW_SUM: Final = (
    "(SELECT coalesce(sum(i.token_count), 0) FROM context_items i "
    "WHERE i.conversation_id = c.id AND i.message_id IS NOT NULL)"
)
_TOTALS_DIFFER: Final = f"c.context_tokens <> {_CONTEXT_SUM} OR c.raw_tokens <> {_RAW_SUM}"


def _graph(store: Store) -> _Finding:
    found = _Finding("graph")
    found.count("nodes", store.scalar("SELECT count(*) FROM nodes"))
    found.count("edges", store.scalar("SELECT count(*) FROM edges"))
    found.problem(
        "error",
        "summaries_without_node",
        store.scalar("SELECT count(*) " + _NODELESS_SUMMARIES),
        "summaries without their graph node",
    )
    found.problem(
        "error",
        "summary_nodes_without_summary",
        store.scalar(
            "SELECT count(*) FROM nodes n WHERE n.kind = 'summary' AND NOT EXISTS "
            "(SELECT 1 FROM summaries s WHERE s.id = n.summary_id)"
        ),
        "summary nodes whose summary is missing (not repairable automatically)",
    )
    found.problem(
        "error",
        "dangling_edges",
        store.scalar("SELECT count(*) " + _DANGLING_EDGES),
        "edges to or from a missing node",
    )
    found.problem(
        "error",
        "weights_out_of_range",
        store.scalar("SELECT count(*) FROM edges WHERE NOT (weight BETWEEN -1.0 AND 1.0)"),
        "edges with a weight outside [-1, 1]",
    )
    return found


_NODELESS_SUMMARIES: Final = (
    "FROM summaries s WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.summary_id = s.id)"
)
_DANGLING_EDGES: Final = (
    "FROM edges AS e WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = e.source) "
    "OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = e.target)"
)


# -- repairs --------------------------------------------------------------------------
# Each returns what it did, one line per action; each action is one transaction.


def _repair_fts(store: Store, found: _Finding) -> list[str]:
    done: list[str] = []
    for table in ("messages_fts", "summaries_fts"):
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


def _repair_vectors(store: Store, found: _Finding) -> list[str]:
    done: list[str] = []
    dim = found.counts.get("dim", 0)
    if found.has("wrong_dim") and dim:
        with store.transaction():
            bad = list(
                store.execute(
                    "DELETE FROM vectors WHERE length(vector) <> ? RETURNING kind, row_id",
                    (dim * 4,),
                )
            )
            _queue(store, [(str(k), int(r)) for k, r in bad])
            note_vectors_changed(store, _kinds(bad))
        done.append(f"deleted {len(bad)} vectors of the wrong length and queued their rows")
    if found.has("ghosts"):
        with store.transaction():
            ghosts = list(store.execute("DELETE " + _GHOST_VECTORS + " RETURNING kind, row_id"))
            note_vectors_changed(store, _kinds(ghosts))
        done.append(f"deleted {len(ghosts)} ghost vectors")
    if found.has("missing"):
        with store.transaction():
            queued = 0
            for sql in _MISSING_VECTORS:
                store.execute(f"INSERT OR IGNORE INTO embed_queue (kind, row_id) {sql}")
                queued += store.changes()
        done.append(f"queued {queued} rows for embedding")
    return done


def _queue(store: Store, keys: list[tuple[str, int]]) -> None:
    """Queue the rows that still exist (a ghost's row is gone: nothing to embed)."""
    tables = {"message": "messages", "summary": "summaries", "node": "nodes"}
    for kind, row_id in keys:
        if kind in tables:
            store.execute(
                f"INSERT OR IGNORE INTO embed_queue (kind, row_id) SELECT ?, id "  # noqa: S608
                f"FROM {tables[kind]} WHERE id = ?"
                + (" AND content IS NOT NULL" if kind == "node" else ""),
                (kind, row_id),
            )


def _kinds(rows: list[Any]) -> list[Kind]:
    kinds: list[Kind] = ["message", "summary", "node"]
    present = {str(r[0]) for r in rows}
    return [k for k in kinds if k in present]


def _repair_files(store: Store, found: _Finding) -> list[str]:
    done: list[str] = []
    orphans, temps = _strays(store)
    if orphans and found.has("orphans"):
        target = store.files_dir / _ORPHANS_DIR
        target.mkdir(exist_ok=True)
        moved = 0
        for path in orphans:
            # Checked again just before moving: a row naming it may have committed since.
            if store.scalar("SELECT 1 FROM large_files WHERE file_id = ?", (path.name,)):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, target / path.name)
                moved += 1
        done.append(f"moved {moved} orphan payload files to {target}")
    if temps and found.has("temp_files"):
        removed = 0
        for path in temps:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
        done.append(f"removed {removed} temp files")
    return done


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


def _suppression(store: Store) -> _Finding:
    found = _Finding("suppression")
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


def _repair_suppression(store: Store, found: _Finding) -> list[str]:
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


def _repair_context(store: Store, found: _Finding) -> list[str]:
    if not found.has("wrong_totals"):
        return []
    with store.transaction():
        # Recomputed under the write lock, so an ingest in between cannot be lost; the
        # version bump makes every process's cached view of the conversation rebuild.
        store.execute(
            f"UPDATE conversations AS c SET context_tokens = {_CONTEXT_SUM}, "  # noqa: S608
            f"raw_tokens = {_RAW_SUM}, context_version = context_version + 1 "
            f"WHERE {_TOTALS_DIFFER}"
        )
        fixed = store.changes()
    return [f"recomputed context_tokens and raw_tokens of {fixed} conversations"]


def _repair_graph(store: Store, found: _Finding) -> list[str]:
    done: list[str] = []
    if found.has("summaries_without_node"):
        with store.transaction():
            store.execute(
                "INSERT INTO nodes (node_id, kind, summary_id, created_at) "  # noqa: S608
                "SELECT s.summary_id, 'summary', s.id, s.created_at "
                + _NODELESS_SUMMARIES
                + " AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.node_id = s.summary_id)"
            )
            created = store.changes()
            bump_epoch(store)
        done.append(f"created {created} summary nodes")
    if found.has("dangling_edges"):
        with store.transaction():
            store.execute("DELETE " + _DANGLING_EDGES)
            removed = store.changes()
            bump_epoch(store)
        done.append(f"deleted {removed} edges to or from a missing node")
    if found.has("weights_out_of_range"):
        with store.transaction():
            store.execute(
                "UPDATE edges SET weight = max(-1.0, min(1.0, weight)) "
                "WHERE NOT (weight BETWEEN -1.0 AND 1.0)"
            )
            clamped = store.changes()
            bump_epoch(store)
        done.append(f"clamped {clamped} edge weights into [-1, 1]")
    return done


_REPAIRS: Final[Mapping[str, Callable[[Store, _Finding], list[str]]]] = {
    "fts": _repair_fts,
    "vectors": _repair_vectors,
    "files": _repair_files,
    "context": _repair_context,
    "graph": _repair_graph,
    "suppression": _repair_suppression,
}


def format_report(report: DoctorReport) -> str:
    """A readable table: one line per check, then what each repair did."""
    lines = [f"brain doctor {report.db}"]
    width = max(len(n) for n in CHECKS)
    for check in report.checks:
        lines.append(f"  {check.name:<{width}}  {check.status:<7}  {check.message}")
        lines.extend(f"  {'':<{width}}  {'':<7}  repaired: {r}" for r in check.repaired)
    lines.append(f"{'ok' if report.ok else 'problems remain'} ({report.took_ms:.0f} ms)")
    return "\n".join(lines)


def report_json(report: DoctorReport) -> bytes:
    """The report as one JSON line."""
    return orjson.dumps(report.to_dict())
