"""Error answers of a real daemon: bad ids, a damaged database or files directory.

Each failure gets a stable code a host can act on, and no answer names a
server path (the database's directory is the tests' ``tmp_path``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import apsw
import orjson

from brain import Brain, BrainConfig, MessageIn
from tests.e2e.conftest import Daemon, Spawn, serve_argv

OVERFLOW_IDS = ("msg_9223372036854775808", "msg_" + "9" * 400)
"""Past SQLite's largest rowid (2**63 - 1), by one and by far."""

PAYLOAD = "a large tool result line\n" * 400
"""Well above ``--large-payload-tokens 100``: stored as a payload file."""


def _error(frame: dict[str, Any]) -> dict[str, Any]:
    assert "error" in frame, frame
    error: dict[str, Any] = frame["error"]
    return error


def _no_path(frame: dict[str, Any], directory: Path) -> None:
    text = orjson.dumps(frame).decode()
    for form in {str(directory), str(directory.resolve())}:
        assert form not in text, text


def _serving(spawn: Spawn, db: Path) -> Daemon:
    daemon = spawn(serve_argv(db, "--large-payload-tokens", "100", "--auto-compact", "false"))
    assert "result" in daemon.call("ready", "ping")  # the database is open
    return daemon


def test_message_ids_past_the_rowid_range_are_invalid_params_not_internal_errors(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = _serving(spawn, db_path)
    daemon.call(0, "ingest", {"session": "s", "message": {"role": "user", "content": "hello"}})
    for big in OVERFLOW_IDS:
        for method, params, field in (
            ("describe", {"id": big, "session": "s"}, "params.id"),
            ("describe", {"id": big, "all": True}, "params.id"),
            ("suppress", {"ids": ["msg_1", big], "session": "s"}, "params.ids[1]"),
            ("unsuppress", {"ids": [big], "all": True}, "params.ids[0]"),
        ):
            error = _error(daemon.call(1, method, params))
            assert error["code"] == -32602, (method, error)
            assert error["data"] == {"field": field}
        # expand takes summary ids only: a message id is simply not one.
        assert _error(daemon.call(2, "expand", {"id": big, "session": "s"}))["code"] == -32001
    # Refused before anything was written: msg_1 is still visible.
    described = daemon.call(3, "describe", {"id": "msg_1", "session": "s"})["result"]
    assert described["suppressed"] is False
    code, _frames = daemon.finish()
    assert code == 0


def test_a_read_hitting_a_corrupted_page_is_a_storage_failure_that_says_run_brain_doctor(
    db_path: Path, spawn: Spawn
) -> None:
    engine = Brain(db_path, BrainConfig())
    try:
        words = "alpha beta gamma delta " * 20
        engine.ingest(
            "s", [MessageIn("user", f"message {i} {words}", client_id=f"m{i}") for i in range(400)]
        )
    finally:
        engine.close()
    conn = apsw.Connection(str(db_path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        leaves = [
            int(r[0])
            for r in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' "
                "ORDER BY pageno"
            )
        ]
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])  # type: ignore[index]
    finally:
        conn.close()
    # Garbage over one leaf page of the messages table, in the middle: the daemon
    # starts (it never reads that page), and a scan over every message hits it.
    with db_path.open("r+b") as f:
        f.seek((leaves[len(leaves) // 2] - 1) * page_size)
        f.write(b"\xde\xad\xbe\xef" * (page_size // 4))

    daemon = _serving(spawn, db_path)
    frame = daemon.call(1, "grep", {"session": "s", "query": "message 2", "mode": "regex"})
    error = _error(frame)
    assert error["code"] == -32008
    assert "run brain doctor" in error["message"]
    assert error["data"] == {"reason": "corrupt"}
    _no_path(frame, db_path.parent)
    assert "result" in daemon.call(2, "ping")  # still serving
    daemon.kill()


def test_a_payload_written_after_the_files_directory_was_removed_recreates_it(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = _serving(spawn, db_path)
    files_dir = db_path.with_name(db_path.name + "-files")
    assert files_dir.is_dir()
    shutil.rmtree(files_dir)

    big = {"role": "tool", "tool_call_id": "t1", "content": PAYLOAD, "id": "big"}
    frame = daemon.call(1, "ingest", {"session": "s", "message": big})
    assert "result" in frame, frame
    assert files_dir.is_dir()
    described = daemon.call(2, "describe", {"id": "big", "session": "s"})["result"]
    assert described["message"]["content"] == PAYLOAD
    assert described["missing_files"] == []
    code, _frames = daemon.finish()
    assert code == 0


def test_describe_of_a_message_whose_payload_file_is_gone_names_the_missing_file(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = _serving(spawn, db_path)
    big = {"role": "tool", "tool_call_id": "t1", "content": PAYLOAD, "id": "big"}
    daemon.call(1, "ingest", {"session": "s", "message": big})
    small = {"role": "user", "content": "a small message", "id": "small"}
    daemon.call(2, "ingest", {"session": "s", "message": small})
    files_dir = db_path.with_name(db_path.name + "-files")
    (file_path,) = [p for p in files_dir.iterdir() if p.name.startswith("file_")]
    file_path.unlink()

    described = daemon.call(3, "describe", {"id": "big", "session": "s"})
    result = described["result"]
    assert result["missing_files"] == [file_path.name]
    assert result["message"]["role"] == "tool"
    assert result["message"]["tool_call_id"] == "t1"
    assert file_path.name in orjson.dumps(result["message"]).decode()  # the marker stays
    # Describing the payload itself: damage, with the file named, never "not found".
    frame = daemon.call(4, "describe", {"id": file_path.name, "session": "s"})
    error = _error(frame)
    assert error["code"] == -32008
    assert file_path.name in error["message"]
    assert "run brain doctor" in error["message"]
    assert error["data"]["missing_files"] == [file_path.name]
    _no_path(frame, db_path.parent)
    # A message without payloads says nothing is missing.
    plain = daemon.call(5, "describe", {"id": "small", "session": "s"})["result"]
    assert plain["missing_files"] == []
    code, _frames = daemon.finish()
    assert code == 0


def test_a_failed_payload_write_names_no_server_path(db_path: Path, spawn: Spawn) -> None:
    daemon = _serving(spawn, db_path)
    files_dir = db_path.with_name(db_path.name + "-files")
    shutil.rmtree(files_dir)
    files_dir.write_bytes(b"not a directory")  # every payload write now fails

    big = {"role": "tool", "tool_call_id": "t1", "content": PAYLOAD, "id": "big"}
    frame = daemon.call(1, "ingest", {"session": "s", "message": big})
    error = _error(frame)
    assert error["code"] == -32008
    assert "brain.db-files" in error["message"]  # named relative to the database directory
    _no_path(frame, db_path.parent)
    # Nothing was stored: the write is refused whole.
    assert _error(daemon.call(2, "describe", {"id": "big", "session": "s"}))["code"] == -32001
    daemon.kill()
