"""Derived and payload files beside the database never serve foreign bytes or take the
daemon down: a swapped-in symlink reads as a missing payload."""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from tests.e2e.conftest import Spawn, serve_argv
from tests.reliability.conftest import sql_rows

OUTSIDE = "quokkaburrow outside secret"


def test_a_payload_replaced_by_a_symlink_is_reported_missing_never_served(
    tmp_path: Path, spawn: Spawn
) -> None:
    db = tmp_path / "brain.db"
    outside = tmp_path / "outside.txt"
    outside.write_text(f"{OUTSIDE}\n" * 10)
    daemon = spawn(serve_argv(db, "--large-payload-tokens", "500"))
    big = {"id": "big", "role": "tool", "tool_call_id": "c1", "content": "payload " * 2_000}
    stored = daemon.call(1, "ingest", {"session": "s", "messages": [big]})["result"]
    (file_id,) = sql_rows(db, "SELECT file_id FROM large_files")[0]
    payload = tmp_path / "brain.db-files" / file_id
    payload.unlink()
    payload.symlink_to(outside)
    calls = [
        ("describe", {"id": file_id, "session": "s"}),
        ("describe", {"id": stored["ids"][0], "session": "s"}),
        ("grep", {"query": "quokkaburrow", "mode": "full_text", "scope": "files", "session": "s"}),
        ("grep", {"query": "quokka.*secret", "mode": "regex", "scope": "files", "session": "s"}),
    ]
    for n, (method, params) in enumerate(calls):
        frame = daemon.call(10 + n, method, params)
        assert OUTSIDE not in orjson.dumps(frame).decode(), (method, params, frame)
    assert "result" in daemon.call(99, "info", {})
    assert daemon.finish()[0] == 0


def test_a_vector_file_truncated_between_searches_is_rebuilt_and_the_daemon_lives(
    tmp_path: Path, spawn: Spawn
) -> None:
    db = tmp_path / "brain.db"
    daemon = spawn(serve_argv(db))
    turns = [{"id": f"m{i}", "role": "user", "content": f"kestrel note {i}"} for i in range(40)]
    daemon.call(1, "ingest", {"session": "s", "messages": turns})
    query = {"query": "kestrel note", "mode": "semantic", "session": "s", "limit": 50}
    deadline = time.monotonic() + 60
    hits: list[object] = []
    while len(hits) < 40 and time.monotonic() < deadline:
        hits = daemon.call(2, "grep", query)["result"]["hits"]
        time.sleep(0.2)
    assert len(hits) == 40
    # A restart maps a file written with every row (the first one's file predates
    # them, and stays current with the rest read as its tail: remove it).
    assert daemon.finish()[0] == 0
    (tmp_path / "brain.db-vectors.message-summary").unlink()
    daemon = spawn(serve_argv(db))
    assert len(daemon.call(5, "grep", query)["result"]["hits"]) == 40
    matrix_file = tmp_path / "brain.db-vectors.message-summary"
    assert matrix_file.stat().st_size > 4096
    with open(matrix_file, "r+b") as f:
        f.truncate(4096)  # in place: the daemon's mapped pages are gone
    again = daemon.call(3, "grep", query)
    assert len(again["result"]["hits"]) == 40, again
    assert "result" in daemon.call(4, "info", {})
    assert daemon.finish()[0] == 0
