"""``brain mcp``'s life over raw pipes: the end of input, SIGTERM, kill -9, a shared database.

The process is driven with the MCP frames a host writes (the 2025 ``initialize``
handshake, then ``tools/call``), so the test controls exactly when stdin
closes and which signal arrives, and sees the exit code.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from mcp_types.version import LATEST_HANDSHAKE_VERSION

from brain import Brain
from protocol.framing import encode_frame
from tests.e2e.conftest import BRAIN, Daemon, Spawn, request_frame, serve_argv


def mcp_argv(db: Path, *args: str) -> list[str]:
    """``brain mcp --db DB [args]`` with the installed script."""
    return [str(BRAIN), "mcp", "--db", str(db), *args]


def rpc(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    """One MCP request line."""
    return encode_frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def tool(request_id: int, name: str, arguments: dict[str, Any]) -> bytes:
    """A ``tools/call`` line."""
    return rpc(request_id, "tools/call", {"name": name, "arguments": arguments})


def start(spawn: Spawn, db: Path, *args: str) -> Daemon:
    """``brain mcp`` past the handshake a host starts with."""
    server = spawn(mcp_argv(db, *args))
    hello = {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "test-host", "version": "0"},
    }
    server.send(rpc(0, "initialize", hello))
    assert server.frame()["id"] == 0
    server.send(encode_frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    return server


def result(server: Daemon, request_id: int) -> dict[str, Any]:
    """The next frame, which must answer ``request_id`` with a tool result that is no error."""
    frame = server.frame()
    assert frame.get("id") == request_id, frame
    assert not frame["result"].get("isError"), frame
    answer: dict[str, Any] = frame["result"]["structuredContent"]
    return answer


def ingest(request_id: int, session: str, text: str, client_id: str) -> bytes:
    message = {"id": client_id, "role": "user", "content": text}
    return tool(request_id, "memory_ingest", {"session": session, "message": message})


def stored(db: Path, session: str, *ids: str) -> list[str]:
    """The content of the session's messages ``ids``, read with no server running."""
    brain = Brain(db, create=False)
    try:
        return [brain.get_message(session, i)["content"] for i in ids]
    finally:
        brain.close()


def test_calls_sent_before_the_end_of_input_are_answered_before_brain_mcp_exits(
    spawn: Spawn, db_path: Path
) -> None:
    server = start(spawn, db_path)
    server.send(
        ingest(1, "s", "first words", "c1")
        + ingest(2, "s", "second words", "c2")
        + tool(3, "memory_grep", {"query": "words"})
    )
    code, frames = server.finish()
    assert code == 0, server.stderr()
    assert sorted(f["id"] for f in frames) == [1, 2, 3]
    assert all(not f["result"].get("isError") for f in frames), frames
    assert stored(db_path, "s", "c1", "c2") == ["first words", "second words"]


def test_sigterm_with_the_host_still_connected_ends_brain_mcp_cleanly(
    spawn: Spawn, db_path: Path
) -> None:
    server = start(spawn, db_path)
    server.send(ingest(1, "s", "kept through a stop", "c1"))
    assert result(server, 1)["ingested"] == 1
    server.proc.send_signal(signal.SIGTERM)  # stdin stays open: the stop must not wait for it
    assert server.wait() == 0, server.stderr()
    assert "closed" in server.stderr()
    assert stored(db_path, "s", "c1") == ["kept through a stop"]


def test_an_ingest_acknowledged_before_kill_9_survives(spawn: Spawn, db_path: Path) -> None:
    server = start(spawn, db_path)
    server.send(ingest(1, "s", "acknowledged then killed", "c1"))
    assert result(server, 1)["ids"] == ["c1"]
    server.proc.send_signal(signal.SIGKILL)
    assert server.wait() == -signal.SIGKILL
    again = start(spawn, db_path)
    again.send(tool(1, "memory_describe", {"id": "c1"}))
    described = result(again, 1)
    assert described["message"]["content"] == "acknowledged then killed"
    again.send(tool(2, "memory_grep", {"query": "killed"}))
    assert [h["id"] for h in result(again, 2)["hits"]] == ["c1"]


def test_brain_mcp_and_brain_serve_share_one_database(spawn: Spawn, db_path: Path) -> None:
    mcp = start(spawn, db_path)
    serve = spawn(serve_argv(db_path))
    mcp.send(ingest(1, "s", "written through mcp", "m1"))
    assert result(mcp, 1)["ingested"] == 1
    found = serve.call(1, "grep", {"query": "mcp", "all": True})
    assert [h["id"] for h in found["result"]["hits"]] == ["m1"]
    serve.send(
        request_frame(
            2,
            "ingest",
            {"session": "s", "message": {"id": "n1", "role": "user", "content": "from serve"}},
        )
    )
    assert serve.frame()["result"]["ingested"] == 1
    mcp.send(tool(2, "memory_grep", {"query": "serve"}))
    assert [h["id"] for h in result(mcp, 2)["hits"]] == ["n1"]
    for process in (mcp, serve):
        code, _ = process.finish()
        assert code == 0, process.stderr()


def test_every_bad_line_gets_an_error_answer_with_its_id_and_the_server_goes_on(
    spawn: Spawn, db_path: Path
) -> None:
    server = start(spawn, db_path)
    server.send(b"this is not json\n")
    frame = server.frame()
    assert frame["id"] is None, frame
    assert frame["error"]["code"] == -32700, frame
    bad: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 11, "method": "tools/list", "params": "str"},
        {"jsonrpc": "1.0", "id": "twelve", "method": "tools/list"},
    ]
    for line in bad:
        server.send(encode_frame(line))
        frame = server.frame()
        assert frame["id"] == line["id"], frame
        assert frame["error"]["code"] == -32600, frame
    server.send(
        b'{"jsonrpc": "2.0", "id": 13, "method": "tools/list", "x": "' + b"a" * (20 << 20) + b'"}\n'
    )
    frame = server.frame()
    assert frame["error"]["code"] == -32700, frame
    server.send(rpc(14, "tools/list", {}))
    assert server.frame()["id"] == 14
