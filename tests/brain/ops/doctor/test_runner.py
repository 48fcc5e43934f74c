"""brain doctor: a healthy database is all ok; each real breakage is named and repaired."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import brain.ops.doctor.runner as doctor_module
from brain import Brain, MessageIn, StorageError
from brain.graph.nodes import NewNode
from brain.lcm.ids import public_message_id
from brain.ops.doctor import CHECKS, DoctorReport, doctor
from brain.recall.search import GrepOptions
from brain.store.connection import Store, files_dir_for
from brain.store.schema import SCHEMA_VERSION
from brain.vectors.embedders import HashEmbedder
from tests.brain.lcm.helpers import SMALL_BRAIN, chat

CONFIG = SMALL_BRAIN
OLD = time.time() - 2 * CONFIG.orphan_file_grace_s
"""An mtime older than the grace period (a file a killed writer left long ago)."""


def _populate(db: Path) -> None:
    """Compacted history (summaries, their nodes), CJK text, a payload file, a taught node,
    every row embedded."""
    brain = Brain(db, CONFIG, embedder=HashEmbedder(64))
    try:
        brain.ingest("s", chat(40))
        brain.compact("s")
        brain.refresh_rollups()
        brain.ingest(
            "s", [MessageIn("user", "サーバーの障害について教えてください", client_id="cjk")]
        )
        log = "\n".join(f"{i:04d} worker finished step normally" for i in range(300))
        brain.ingest("s", [MessageIn("tool", log, client_id="big", tool_call_id="call_1")])
        brain.ingest("t", chat(6))
        brain.teach(NewNode("teaching", "deploys always go through the canary cluster"))
        while brain.embed_pending():
            pass
    finally:
        brain.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One populated database, copied for each test (building it is the slow part)."""
    db = tmp_path_factory.mktemp("template") / "brain.db"
    _populate(db)
    return db


@pytest.fixture
def db(template: Path, tmp_path: Path) -> Path:
    """A private copy of the populated database and its payload files."""
    target = tmp_path / "brain.db"
    target.write_bytes(template.read_bytes())
    files = files_dir_for(target)
    files.mkdir()
    for entry in files_dir_for(template).iterdir():
        (files / entry.name).write_bytes(entry.read_bytes())
    return target


@pytest.fixture
def sql(db: Path) -> Iterator[apsw.Connection]:
    """A plain connection for breaking things the way a bug or a bad tool would."""
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA foreign_keys = ON")
    try:
        yield conn
    finally:
        conn.close()


def _problems(report: DoctorReport) -> dict[str, set[str]]:
    return {c.name: set(c.problems) for c in report.checks if c.problems}


def _messages(db: Path) -> list[dict[str, Any]]:
    """Every stored message, restored as the client sent it."""
    conn = apsw.Connection(str(db))
    try:
        rows = list(
            conn.execute(
                "SELECT c.session_id, m.id, m.client_id FROM messages m "
                "JOIN conversations c ON c.id = m.conversation_id ORDER BY m.id"
            )
        )
    finally:
        conn.close()
    brain = Brain(db, CONFIG, embedder=HashEmbedder(64))
    try:
        return [brain.get_message(s, public_message_id(i, c)) for s, i, c in rows]
    finally:
        brain.close()


def _file_id(sql: apsw.Connection) -> str:
    row = sql.execute("SELECT file_id FROM large_files").fetchone()
    assert row is not None
    return str(row[0])


def test_a_healthy_database_reports_every_check_ok(db: Path) -> None:
    report = doctor(db, CONFIG)
    assert [c.name for c in report.checks] == list(CHECKS)
    assert report.ok, report.to_dict()
    assert report.check("fts").counts["large_files"] == 1
    assert report.check("vectors").counts["vectors"] > 0


def test_a_deep_check_hashes_payloads_and_runs_the_full_integrity_check(db: Path) -> None:
    report = doctor(db, CONFIG, deep=True)
    assert report.ok, report.to_dict()
    assert "integrity_check" in report.check("integrity").counts


def _delete_fts_row(sql: apsw.Connection) -> None:
    row = sql.execute("SELECT id, content, name FROM messages ORDER BY id LIMIT 1").fetchone()
    assert row is not None
    sql.execute(
        "INSERT INTO messages_fts (messages_fts, rowid, content, name) VALUES ('delete', ?, ?, ?)",
        tuple(row),
    )


def _delete_a_nodes_fts_row(sql: apsw.Connection) -> None:
    # The newest summary node's (an empty document): the other breakages delete
    # the taught node and the oldest summary node, which must still be indexed then.
    sql.execute(
        "INSERT INTO nodes_fts (nodes_fts, rowid, content) "
        "SELECT 'delete', max(id), NULL FROM nodes WHERE kind = 'summary'"
    )


def _delete_cjk_row(sql: apsw.Connection) -> None:
    sql.execute("DELETE FROM messages_cjk")


def _shorten_a_vector(sql: apsw.Connection) -> None:
    sql.execute(
        "UPDATE vectors SET vector = substr(vector, 1, 10) WHERE id = (SELECT min(id) FROM vectors)"
    )


def _ghost_vector(sql: apsw.Connection) -> None:
    sql.execute(
        "INSERT INTO vectors (kind, row_id, conversation_id, vector) "
        "SELECT 'message', 999999, conversation_id, vector FROM vectors WHERE kind = 'message' "
        "LIMIT 1"
    )


def _unqueue_a_row(sql: apsw.Connection) -> None:
    sql.execute(
        "DELETE FROM vectors WHERE id = (SELECT max(id) FROM vectors WHERE kind = 'message')"
    )


def _tamper_totals(sql: apsw.Connection) -> None:
    sql.execute(
        "UPDATE conversations SET context_tokens = context_tokens + 7 WHERE session_id = 's'"
    )


def _delete_summary_node(sql: apsw.Connection) -> None:
    sql.execute("DELETE FROM nodes WHERE id = (SELECT min(id) FROM nodes WHERE kind = 'summary')")


def _out_of_range_weight(sql: apsw.Connection) -> None:
    ids = [int(r[0]) for r in sql.execute("SELECT id FROM nodes ORDER BY id LIMIT 2")]
    sql.execute("PRAGMA ignore_check_constraints = ON")
    sql.execute(
        "INSERT INTO edges (source, target, weight, kind, updated_at) "
        "VALUES (?, ?, 1.5, 'learned', '2026-01-01T00:00:00Z')",
        ids,
    )


def _drop_a_files_fts_row(sql: apsw.Connection) -> None:
    sql.execute("DELETE FROM files_fts WHERE rowid = (SELECT min(id) FROM files_index)")


def _delete_a_taught_node(sql: apsw.Connection) -> None:
    sql.execute("DELETE FROM nodes WHERE kind = 'teaching'")  # its vector stays behind


def _dangling_edge(sql: apsw.Connection) -> None:
    sql.execute("PRAGMA foreign_keys = OFF")
    sql.execute(
        "INSERT INTO edges (source, target, weight, kind, updated_at) "
        "SELECT min(id), 999999, 0.5, 'learned', '2026-01-01T00:00:00Z' FROM nodes"
    )


def _empty_a_rollup(sql: apsw.Connection) -> None:
    sql.execute("DELETE FROM rollup_sources WHERE rollup_id = (SELECT min(id) FROM rollups)")


def _delete_a_rollups_fts_row(sql: apsw.Connection) -> None:
    sql.execute(
        "INSERT INTO rollups_fts (rollups_fts, rowid, content) "
        "SELECT 'delete', id, content FROM rollups WHERE id = (SELECT max(id) FROM rollups)"
    )


def _withhold_a_clean_summary(sql: apsw.Connection) -> None:
    sql.execute(
        "UPDATE summaries SET hidden_by = 'source' WHERE id = (SELECT min(id) FROM summaries)"
    )


BREAKAGES: list[tuple[Callable[[apsw.Connection], None], str, dict[str, set[str]]]] = [
    (_delete_fts_row, "fts", {"fts": {"messages_fts_missing", "messages_fts_integrity"}}),
    (_delete_a_nodes_fts_row, "fts", {"fts": {"nodes_fts_missing", "nodes_fts_integrity"}}),
    (_delete_cjk_row, "fts", {"fts": {"messages_cjk_missing"}}),
    (_shorten_a_vector, "vectors", {"vectors": {"wrong_dim"}}),
    (_ghost_vector, "vectors", {"vectors": {"ghosts"}}),
    (_unqueue_a_row, "vectors", {"vectors": {"missing"}}),
    (_drop_a_files_fts_row, "fts", {"fts": {"files_fts_missing"}}),
    (_delete_a_taught_node, "vectors", {"vectors": {"ghosts"}}),
    (
        _dangling_edge,
        "graph",
        {"graph": {"dangling_edges"}, "integrity": {"foreign_key_violations"}},
    ),
    (_tamper_totals, "context", {"context": {"wrong_totals"}}),
    (_withhold_a_clean_summary, "suppression", {"suppression": {"wrong_withheld"}}),
    (_empty_a_rollup, "rollups", {"rollups": {"broken"}}),
    (_delete_a_rollups_fts_row, "fts", {"fts": {"rollups_fts_missing", "rollups_fts_integrity"}}),
    (_delete_summary_node, "graph", {"graph": {"summaries_without_node"}}),
    # SQLite's own check sees the violated CHECK constraint too.
    (
        _out_of_range_weight,
        "graph",
        {"graph": {"weights_out_of_range"}, "integrity": {"quick_check"}},
    ),
]


@pytest.mark.parametrize(
    ("breakage", "check", "expected"), BREAKAGES, ids=[b[0].__name__ for b in BREAKAGES]
)
def test_a_breakage_is_named_exactly_and_repair_fixes_it_without_losing_a_message(
    db: Path,
    sql: apsw.Connection,
    breakage: Callable[[apsw.Connection], None],
    check: str,
    expected: dict[str, set[str]],
) -> None:
    before = _messages(db)
    breakage(sql)
    found = doctor(db, CONFIG)
    assert _problems(found) == expected, found.to_dict()
    assert found.check(check).status == ("warning" if "missing" in expected[check] else "error")

    repaired = doctor(db, CONFIG, repair=True)
    assert repaired.ok, repaired.to_dict()
    assert repaired.check(check).repaired
    assert doctor(db, CONFIG).ok
    assert _messages(db) == before


def test_a_missing_payload_file_is_named_and_left_as_an_error_since_its_bytes_are_lost(
    db: Path, sql: apsw.Connection
) -> None:
    (files_dir_for(db) / _file_id(sql)).unlink()
    found = doctor(db, CONFIG, repair=True)
    assert _problems(found) == {"files": {"missing"}}
    assert found.check("files").status == "error"
    assert found.check("files").repaired == ()
    assert not found.ok


def test_a_payload_file_of_the_wrong_size_or_hash_is_named(db: Path, sql: apsw.Connection) -> None:
    path = files_dir_for(db) / _file_id(sql)
    data = path.read_bytes()
    path.write_bytes(data[:-1] + (b"x" if data[-1:] != b"x" else b"y"))
    assert _problems(doctor(db, CONFIG)) == {}  # same size: only a deep check reads the bytes
    assert _problems(doctor(db, CONFIG, deep=True)) == {"files": {"wrong_sha256"}}
    path.write_bytes(data + b"more")
    assert _problems(doctor(db, CONFIG)) == {"files": {"wrong_size"}}


def test_an_old_stray_file_is_moved_to_orphans_and_an_old_temp_file_removed(db: Path) -> None:
    before = _messages(db)
    files = files_dir_for(db)
    stray = files / "file_0123456789abcdef"
    stray.write_bytes(b"nobody names me")
    temp = files / ".tmp-file_fedcba9876543210"
    temp.write_bytes(b"half written")
    fresh = files / "file_00000000000000aa"
    fresh.write_bytes(b"a writer may still commit my row")
    for path in (stray, temp):
        os.utime(path, (OLD, OLD))

    found = doctor(db, CONFIG)
    assert _problems(found) == {"files": {"orphans", "temp_files"}}
    assert found.check("files").status == "warning"

    repaired = doctor(db, CONFIG, repair=True)
    assert repaired.ok, repaired.to_dict()
    assert (files / "orphans" / stray.name).read_bytes() == b"nobody names me"
    assert not stray.exists()
    assert not temp.exists()
    assert fresh.exists()  # inside the grace period: left alone
    assert _messages(db) == before


def test_several_breakages_at_once_are_all_repaired(db: Path, sql: apsw.Connection) -> None:
    before = _messages(db)
    for breakage, _check, _expected in BREAKAGES:
        breakage(sql)
    found = _problems(doctor(db, CONFIG))
    assert set(found) == {
        "integrity",
        "fts",
        "vectors",
        "context",
        "graph",
        "suppression",
        "rollups",
    }
    assert doctor(db, CONFIG, repair=True).ok
    assert _messages(db) == before


def test_a_repaired_summary_node_is_the_summarys_again(db: Path, sql: apsw.Connection) -> None:
    _delete_summary_node(sql)
    doctor(db, CONFIG, repair=True)
    orphaned = sql.execute(
        "SELECT count(*) FROM summaries s JOIN nodes n ON n.summary_id = s.id "
        "WHERE n.node_id = s.summary_id AND n.kind = 'summary'"
    ).fetchone()
    assert orphaned is not None
    assert orphaned[0] == sql.execute("SELECT count(*) FROM summaries").fetchone()[0]  # type: ignore[index]


def test_a_database_newer_than_the_code_is_an_error_and_left_untouched(
    db: Path, sql: apsw.Connection
) -> None:
    sql.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    report = doctor(db, CONFIG, repair=True)
    assert [c.name for c in report.checks] == ["integrity", "schema"]
    assert _problems(report) == {"schema": {"newer"}}
    assert report.check("schema").status == "error"


def test_an_older_database_is_a_warning_and_repair_migrates_it(
    db: Path, sql: apsw.Connection
) -> None:
    # A version-8 database: v9's graph tables and the rowid vectors table did not exist,
    # nor v10's withheld marks, nor v12's messages.extra, nor v13's remembered budget,
    # nor v14's node index and v15's view of its vocabulary.
    sql.execute("PRAGMA foreign_keys = OFF")
    with sql:
        sql.execute(
            "ALTER TABLE messages DROP COLUMN extra; "
            "ALTER TABLE conversations DROP COLUMN assemble_budget; "
            "ALTER TABLE conversations DROP COLUMN assemble_budget_seq; "
            "DROP INDEX summaries_hidden; DROP INDEX summaries_replaces; "
            "ALTER TABLE summaries DROP COLUMN hidden_by; "
            "ALTER TABLE summaries DROP COLUMN replaces; "
            "ALTER TABLE summary_sources DROP COLUMN omitted; "
            "DROP TABLE nodes_fts_vocab; DROP TABLE nodes_fts; "
            "DROP TABLE traces; DROP TABLE edges; DROP TABLE nodes; "
            "DROP INDEX summaries_suppressed; DROP TABLE vectors; DROP TABLE embed_queue; "
            "CREATE TABLE embed_queue (kind TEXT NOT NULL CHECK (kind IN ('message', 'summary')), "
            "row_id INTEGER NOT NULL, PRIMARY KEY (kind, row_id)) WITHOUT ROWID; "
            "CREATE TABLE vectors (kind TEXT NOT NULL CHECK (kind IN ('message', 'summary')), "
            "row_id INTEGER NOT NULL, conversation_id INTEGER NOT NULL, vector BLOB NOT NULL, "
            "text_hash BLOB, PRIMARY KEY (kind, row_id)) WITHOUT ROWID; "
            "DELETE FROM meta WHERE key LIKE 'embedder%'; "
            "ALTER TABLE grants DROP COLUMN held_by; ALTER TABLE grants DROP COLUMN held_until; "
            "INSERT INTO embed_queue SELECT 'message', id FROM messages; "
            "INSERT INTO embed_queue SELECT 'summary', id FROM summaries; "
            "PRAGMA user_version = 8"
        )
    looked = doctor(db, CONFIG)
    assert _problems(looked) == {"schema": {"older"}}
    assert looked.check("schema").status == "warning"
    assert sql.execute("PRAGMA user_version").fetchone()[0] == 8  # type: ignore[index]

    migrated = doctor(db, CONFIG, repair=True)
    assert migrated.ok, migrated.to_dict()
    assert migrated.check("schema").repaired == (f"migrated from version 8 to {SCHEMA_VERSION}",)


def test_a_missing_database_is_an_error_not_a_new_file(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        doctor(tmp_path / "nothing.db", CONFIG)
    assert not (tmp_path / "nothing.db").exists()


def test_a_repair_beside_an_open_engine_is_seen_by_it(db: Path, sql: apsw.Connection) -> None:
    brain = Brain(db, CONFIG, embedder=HashEmbedder(64))
    try:
        brain.grep(GrepOptions("worker", mode="semantic"))  # the engine's vector matrix is loaded
        _ghost_vector(sql)
        _tamper_totals(sql)
        assert doctor(db, CONFIG, repair=True).ok
        brain.ingest("s", [MessageIn("user", "after the repair", client_id="later")])
        assert doctor(db, CONFIG).ok
    finally:
        brain.close()


def test_the_recheck_after_a_repair_is_not_fooled_by_writes_made_meanwhile(
    db: Path, sql: apsw.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As beside a serving daemon: writes land between the first run and the re-check,
    # and their FTS5 merges drop index segments the doctor's connection has seen.
    _tamper_totals(sql)
    repair_context = doctor_module._REPAIRS["context"]

    def repair_while_another_process_writes(store: Store, found: Any) -> list[str]:
        done = repair_context(store, found)
        other = Brain(db, CONFIG, embedder=HashEmbedder(64))
        try:
            for i in range(40):
                other.ingest("w", [MessageIn("user", f"written meanwhile {i}", client_id=f"w{i}")])
        finally:
            other.close()
        return done

    monkeypatch.setitem(doctor_module._REPAIRS, "context", repair_while_another_process_writes)
    report = doctor(db, CONFIG, repair=True)
    assert _problems(report) == {}
    assert report.check("context").repaired
    assert doctor(db, CONFIG, deep=True).ok


def test_a_check_without_repair_writes_nothing_not_even_queued_payload_indexing(
    db: Path, sql: apsw.Connection
) -> None:
    sql.execute("UPDATE files_index SET state = 'pending'")
    queued = sql.execute("SELECT count(*) FROM files_index WHERE state = 'pending'").fetchone()
    version = sql.execute("PRAGMA data_version").fetchone()
    doctor(db, CONFIG)
    # data_version moves when any other connection commits to the database
    assert sql.execute("PRAGMA data_version").fetchone() == version
    assert (
        sql.execute("SELECT count(*) FROM files_index WHERE state = 'pending'").fetchone() == queued
    )


def test_a_damaged_vector_cache_is_an_error_that_repair_removes(db: Path) -> None:
    matrix_file = db.with_name(db.name + "-vectors.message-summary")
    os.mkfifo(matrix_file)  # not a regular file: a search would hang on it
    ivf = db.with_name(db.name + "-vectors.node-summary.ivf")
    ivf.write_bytes(b"not an npz at all")
    found = doctor(db, CONFIG)
    assert found.check("vectors").counts["damaged_cache"] == 2
    assert not found.ok
    doctor(db, CONFIG, repair=True)
    assert not matrix_file.exists()
    assert not ivf.exists()
    assert doctor(db, CONFIG).ok
