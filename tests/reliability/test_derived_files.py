"""Derived and payload files beside the database never serve foreign bytes or take the
daemon down: a swapped-in symlink reads as a missing payload."""

from __future__ import annotations

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
