"""Grants are stored: one made before a restart still works after it, until revoked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.framing import encode_frame
from tests.e2e.conftest import Daemon, Spawn, serve_argv, user_message


def _granted(daemon: Daemon, request_id: int, grant: str, params: dict[str, Any]) -> dict[str, Any]:
    daemon.send(
        encode_frame({"id": request_id, "method": "grep", "params": params, "grant": grant})
    )
    frame = daemon.frame()
    assert frame["id"] == request_id, frame
    return frame


def test_a_grant_survives_a_restart_and_is_refused_once_revoked(
    db_path: Path, spawn: Spawn
) -> None:
    first = spawn(serve_argv(db_path))
    for session in ("mine", "theirs"):
        assert "result" in first.call(1, "ingest", {"session": session, "message": user_message(1)})
    made = first.call(
        2, "grant", {"sessions": ["mine"], "methods": ["grep"], "token_cap": 10_000, "ttl_s": 600}
    )
    grant = made["result"]["grant_id"]
    assert "result" in _granted(first, 3, grant, {"query": "message", "session": "mine"})
    code, _ = first.finish()
    assert code == 0

    second = spawn(serve_argv(db_path))
    used = _granted(second, 4, grant, {"query": "message", "session": "mine"})
    assert [h["session"] for h in used["result"]["hits"]] == ["mine"]
    outside = _granted(second, 5, grant, {"query": "message", "session": "theirs"})
    assert outside["error"]["code"] == -32003
    assert second.call(6, "revoke", {"grant_id": grant})["result"] == {"revoked": True}
    revoked = _granted(second, 7, grant, {"query": "message", "session": "mine"})
    assert revoked["error"]["code"] == -32003
    assert revoked["error"]["data"]["reason"] == "revoked"
    code, _ = second.finish()
    assert code == 0
