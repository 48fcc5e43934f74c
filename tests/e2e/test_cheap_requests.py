"""Cheap requests (``ping``, ``info``) are answered on the daemon's reader, with no
task and no worker thread: while every database thread waits on another process's
write lock they still answer, and a burst of them in one write is answered in full
beside the work already running."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import (
    Spawn,
    ingest_frame,
    request_frame,
    serve_argv,
    stored_client_ids,
    user_message,
    write_lock_held,
)

STUCK = ("--busy-timeout-ms", "600000")
"""A write waits ten minutes for another process's lock (the test releases it first)."""

DB_THREADS = 4
"""``Context``'s default number of database worker threads."""


def test_info_and_ping_answer_while_every_database_thread_waits_on_a_write_lock(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path, *STUCK))
    assert daemon.call("first", "ingest", {"session": "s0", "message": user_message(0)})["result"]
    before = daemon.call("warm", "info")["result"]  # its read connection is now idle
    assert before["messages"] == 1
    with write_lock_held(db_path):
        stuck = b"".join(
            ingest_frame(f"w{i}", f"s{i}", [user_message(i + 1)]) for i in range(DB_THREADS + 1)
        )
        daemon.send(stuck + request_frame("i", "info") + request_frame("p", "ping"))
        answered = daemon.frames(2)
        # Both came back while every ingest still waits for the lock (none answered).
        assert sorted(a["id"] for a in answered) == ["i", "p"]
        info = next(a["result"] for a in answered if a["id"] == "i")
        assert info["messages"] == 1
        assert info["compaction"] == {"active": 0, "completed": 0}
    writes = daemon.frames(DB_THREADS + 1)
    assert sorted(w["id"] for w in writes) == [f"w{i}" for i in range(DB_THREADS + 1)]
    assert all("result" in w for w in writes)
    assert daemon.call("after", "info")["result"]["messages"] == DB_THREADS + 2
    assert stored_client_ids(db_path, "s0") == ["m0000", "m0001"]


def test_a_burst_of_pings_and_infos_beside_ingests_is_answered_in_full_once_each(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    lines = []
    for i in range(300):
        lines.append(request_frame(f"p{i}", "ping"))
        lines.append(request_frame(f"i{i}", "info"))
        if i % 10 == 0:
            lines.append(ingest_frame(f"w{i}", "s", [user_message(i)]))
    lines.append(b'{"method":"ping"}\n')  # a notification: never answered
    daemon.send(b"".join(lines))
    expected = 300 * 2 + 30
    answers = daemon.frames(expected)
    ids = [a["id"] for a in answers]
    assert len(set(ids)) == expected
    assert all(a.get("result") is not None for a in answers)
    writes = [a for a in answers if str(a["id"]).startswith("w")]
    assert [w["id"] for w in writes] == [f"w{i}" for i in range(0, 300, 10)]  # one lane: in order
    assert daemon.call("last", "info")["result"]["messages"] == 30
    assert daemon.finish() == (0, [])
