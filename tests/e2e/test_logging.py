"""The daemon's stderr: ``--log-format json`` makes every line JSON, libraries' lines
included, and a failure caught at a boundary is logged with its traceback."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import apsw
import orjson

from brain import Brain, BrainConfig
from tests.brain.lcm.helpers import chat
from tests.e2e.conftest import DEADLINE, Daemon, Spawn, serve_argv
from tests.openai_server import OpenAIServer, Reply


def _json_lines(daemon: Daemon) -> list[dict[str, Any]]:
    lines = daemon.stderr().splitlines()
    assert lines
    parsed = []
    for line in lines:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise AssertionError(f"a stderr line is not JSON: {line!r}") from None
        assert isinstance(obj, dict), line
        parsed.append(obj)
    return parsed


def test_with_log_format_json_every_stderr_line_is_json_httpx_lines_included(
    db_path: Path, spawn: Spawn
) -> None:
    with OpenAIServer() as server:
        server.enqueue(*[Reply.text("The chat went on about many things.") for _ in range(20)])
        args = [
            "--log-format", "json",
            "--llm-base-url", server.base_url,
            "--llm-model", "tiny-model",
            "--auto-compact", "false",
            "--fresh-tail-count", "4",
            "--leaf-chunk-tokens", "400",
        ]  # fmt: skip
        daemon = spawn(serve_argv(db_path, *args))
        messages = [
            {"id": m.client_id, "role": m.role, "content": m.content} for m in chat(40, words=60)
        ]
        daemon.call(1, "ingest", {"session": "s", "messages": messages})
        report = daemon.call(2, "compact", {"session": "s"})["result"]
        assert report["summaries"]
        assert server.requests  # the summaries came from the provider, through httpx
        code, _frames = daemon.finish()
    assert code == 0
    lines = _json_lines(daemon)
    httpx = [line for line in lines if line.get("logger") == "httpx"]
    assert httpx, lines
    assert all(line["level"] == "info" and "timestamp" in line for line in httpx)
    assert any(line.get("event") == "stopped" for line in lines)  # the daemon's own lines too


def test_a_failing_background_compaction_and_request_log_their_tracebacks(
    db_path: Path, spawn: Spawn
) -> None:
    Brain(db_path, BrainConfig()).close()
    conn = apsw.Connection(str(db_path))
    try:
        # A damaged schema: every summary insert now fails inside SQLite (its trigger
        # feeds a table that is gone), an error the engine does not expect.
        conn.execute("DROP TABLE summaries_fts")
    finally:
        conn.close()
    args = [
        "--log-format", "json",
        "--fresh-tail-count", "2",
        "--leaf-chunk-tokens", "200",
        "--compaction-threshold-tokens", "300",
    ]  # fmt: skip
    daemon = spawn(serve_argv(db_path, *args))
    messages = [
        {"id": m.client_id, "role": m.role, "content": m.content} for m in chat(30, words=60)
    ]
    daemon.call(1, "ingest", {"session": "s", "messages": messages})
    # The ingest started a background compaction (after a quarter second of quiet).
    deadline = time.monotonic() + DEADLINE
    while "background compaction failed" not in daemon.stderr():
        assert time.monotonic() < deadline, daemon.stderr()
        time.sleep(0.05)
    error = daemon.call(2, "compact", {"session": "s"})["error"]
    assert error == {"code": -32603, "message": "internal error"}
    code, _frames = daemon.finish()
    assert code == 0

    lines = _json_lines(daemon)
    background = [line for line in lines if line.get("event") == "background compaction failed"]
    assert background, lines
    assert all("Traceback" in line.get("exception", "") for line in background), background
    (request,) = [line for line in lines if line.get("event") == "internal error"]
    assert request["method"] == "compact"
    assert "SQLError" in request["exception"]
    assert "Traceback" in request["exception"]


def test_a_failing_request_logs_its_traceback_without_the_frames_local_values(
    db_path: Path, spawn: Spawn
) -> None:
    Brain(db_path, BrainConfig()).close()
    conn = apsw.Connection(str(db_path))
    try:
        conn.execute("DROP TABLE summaries_fts")  # every summary insert now fails
    finally:
        conn.close()
    # First in each text: a locals renderer cuts long strings, so the head is what leaks.
    secret = "vault-code-Zanzibar-7731"
    args = [
        "--auto-compact", "false",
        "--fresh-tail-count", "2",
        "--leaf-chunk-tokens", "200",
    ]  # fmt: skip
    daemon = spawn(serve_argv(db_path, *args))  # the console format, the default
    messages = [
        {"id": m.client_id, "role": m.role, "content": f"{secret} {m.content}"}
        for m in chat(30, words=60)
    ]
    daemon.call(1, "ingest", {"session": "s", "messages": messages})
    error = daemon.call(2, "compact", {"session": "s"})["error"]
    assert error == {"code": -32603, "message": "internal error"}
    code, _frames = daemon.finish()
    assert code == 0
    stderr = daemon.stderr()
    assert "Traceback" in stderr, stderr
    assert "SQLError" in stderr, stderr
    assert secret not in stderr
