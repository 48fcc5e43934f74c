"""Query traces commit without an fsync of their own, and learning still credits only
answered traces: every trace a query answered survives SIGKILL and ``learn`` by chat
finds it; a trace lost with the WAL's unsynced tail (a power cut, simulated by putting
back the files as they were before it) leaves the chat's previous answered trace,
never another chat's, and its own id is then cleanly unknown."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Daemon, Spawn, request_frame, serve_argv
from tests.reliability.test_sigkill import check_consistent

FACTS = (
    "The staging cluster is called kestrel and runs in Frankfurt",
    "Deploys to kestrel happen every Tuesday after the standup",
    "The production cluster is called osprey and runs in Dublin",
    "Osprey deploys need two approvals from the platform team",
)


def _daemon(spawn: Spawn, db: Path) -> Daemon:
    return spawn(serve_argv(db, "--embedder", "hash"))


def _killed(daemon: Daemon) -> None:
    os.kill(daemon.proc.pid, signal.SIGKILL)
    assert daemon.proc.wait() == -signal.SIGKILL
    daemon.cleanup()


def _database_files(db: Path) -> list[Path]:
    """The database file, its WAL and shared-memory index (not the payload directory)."""
    return [p for p in db.parent.iterdir() if p.name.startswith(db.name) and p.is_file()]


def _result(frame: dict[str, Any]) -> Any:
    assert "result" in frame, frame
    return frame["result"]


def test_every_answered_query_trace_survives_sigkill_and_learn_credits_it(
    db_path: Path, spawn: Spawn
) -> None:
    first = _daemon(spawn, db_path)
    for i, fact in enumerate(FACTS):
        _result(first.call(f"t{i}", "teach", {"content": fact}))
    questions = ["which staging cluster?", "when do deploys happen?", "who approves osprey?"]
    # Pipelined: every answer is read, then the process is killed at once.
    first.send(
        b"".join(
            request_frame(f"q{i}", "query", {"query": q, "chat_id": f"chat{i}"})
            for i, q in enumerate(questions)
        )
    )
    answered = {f["id"]: _result(f)["trace_id"] for f in first.frames(len(questions))}
    _killed(first)
    check_consistent(db_path)

    second = _daemon(spawn, db_path)
    for i in range(len(questions)):
        learned = _result(second.call(f"l{i}", "learn", {"outcome": 1, "chat_id": f"chat{i}"}))
        assert learned["trace_id"] == answered[f"q{i}"]
    code, _ = second.finish()
    assert code == 0


def test_a_trace_lost_with_the_unsynced_tail_leaves_the_chats_previous_answered_trace(
    db_path: Path, spawn: Spawn, tmp_path: Path
) -> None:
    first = _daemon(spawn, db_path)
    for i, fact in enumerate(FACTS):
        _result(first.call(f"t{i}", "teach", {"content": fact}))
    kept = _result(first.call("q1", "query", {"query": "which staging cluster?", "chat_id": "c"}))
    other = _result(first.call("q2", "query", {"query": "who approves?", "chat_id": "d"}))
    _killed(first)
    # What a disk holds after the last fsync: the files as they are now.
    saved = tmp_path / "saved"
    saved.mkdir()
    for path in _database_files(db_path):
        shutil.copy2(path, saved / path.name)

    second = _daemon(spawn, db_path)
    lost = _result(second.call("q3", "query", {"query": "when do deploys happen?", "chat_id": "c"}))
    _killed(second)
    # The power cut: the trace committed without an fsync never reached the disk.
    for path in _database_files(db_path):
        path.unlink()
    for path in saved.iterdir():
        shutil.copy2(path, db_path.parent / path.name)
    check_consistent(db_path)

    third = _daemon(spawn, db_path)
    unknown = third.call("l1", "learn", {"outcome": 1, "trace_id": lost["trace_id"]})
    assert unknown["error"]["code"] == -32001  # not found: nothing credited
    learned = _result(third.call("l2", "learn", {"outcome": -1, "chat_id": "c"}))
    assert learned["trace_id"] == kept["trace_id"]  # the chat's own, answered one
    assert learned["trace_id"] != other["trace_id"]
    trace = _result(third.call("tr", "trace", {"chat_id": "c"}))
    assert trace["trace_id"] == kept["trace_id"]
    assert trace["fired_nodes"] == kept["fired_nodes"]
    code, _ = third.finish()
    assert code == 0
