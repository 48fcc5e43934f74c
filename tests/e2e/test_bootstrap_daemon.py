"""``bootstrap`` through a real daemon over the protocol, and ``brain bootstrap`` on its file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson

from brain.lcm import content
from protocol import errors, methods
from protocol.methods.messages import RESERVED_PREFIX
from tests.brain.lcm.test_bootstrap import ACTIVE, BRANCH_A, BRANCH_B, TRUNK
from tests.e2e.conftest import (
    BRAIN,
    DEADLINE,
    Spawn,
    create_db,
    serve_argv,
    stored_client_ids,
)


def _write(path: Path, entries: list[Any]) -> Path:
    header = {"type": "session", "version": 3, "id": "sess", "timestamp": "2025-06-01T10:00:00Z"}
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in [header, *entries]))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(BRAIN), "bootstrap", *args], capture_output=True, timeout=DEADLINE, check=False
    )


def test_a_daemon_bootstraps_a_transcript_refuses_a_fork_and_appends_it_when_asked(
    db_path: Path, spawn: Spawn, tmp_path: Path
) -> None:
    before = _write(tmp_path / "before.jsonl", [*TRUNK, *BRANCH_A])
    after = _write(tmp_path / "after.jsonl", [*TRUNK, *BRANCH_A, *BRANCH_B])
    daemon = spawn(serve_argv(db_path))

    first = daemon.call(1, "bootstrap", {"session": "s", "path": str(before)})["result"]
    again = daemon.call(2, "bootstrap", {"session": "s", "path": str(before)})["result"]
    refused = daemon.call(3, "bootstrap", {"session": "s", "path": str(after)})["error"]
    appended = daemon.call(
        4, "bootstrap", {"session": "s", "path": str(after), "on_fork": "append"}
    )

    assert (first["format"], first["imported"], first["anchor"]) == ("openclaw", 6, None)
    assert (again["imported"], again["anchor"]) == (0, "e6a")
    assert refused["code"] == errors.Conflict.CODE
    assert refused["data"]["fork_point"] == "e4"
    result = appended["result"]
    assert (result["forked"], result["fork_point"], result["imported"]) == (True, "e4", 2)
    bad = daemon.call(5, "bootstrap", {"session": "s", "path": str(after), "on_fork": "merge"})
    assert bad["error"]["code"] == errors.InvalidParams.CODE
    assert daemon.finish()[0] == 0
    assert stored_client_ids(db_path, "s") == [*ACTIVE[:4], "e5a", "e6a", "e5b", "e6b"]


def test_a_malformed_line_over_the_protocol_is_invalid_params_naming_the_line(
    db_path: Path, spawn: Spawn, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b'{"role": "user", "content": "hi"}\n{"role": \n')
    daemon = spawn(serve_argv(db_path))

    answer = daemon.call(1, "bootstrap", {"session": "s", "path": str(transcript)})

    assert answer["error"]["code"] == errors.InvalidParams.CODE
    assert "line 2" in answer["error"]["message"]
    assert daemon.finish()[0] == 0
    assert stored_client_ids(db_path, "s") == []


def test_brain_bootstrap_imports_a_file_resumes_it_and_reports_json(
    db_path: Path, tmp_path: Path
) -> None:
    transcript = _write(tmp_path / "t.jsonl", [*TRUNK, *BRANCH_A, *BRANCH_B])
    create_db(db_path)

    done = _cli("--db", str(db_path), "--session", "s", str(transcript))
    assert done.returncode == 0, done.stderr.decode()
    assert b"6 imported" in done.stdout
    again = _cli("--db", str(db_path), "--session", "s", str(transcript), "--json")
    assert again.returncode == 0, again.stderr.decode()
    report: dict[str, Any] = orjson.loads(again.stdout)
    assert (report["imported"], report["already_present"], report["anchor"]) == (0, 6, "e6b")
    assert stored_client_ids(db_path, "s") == ACTIVE

    missing = _cli("--db", str(db_path), "--session", "s", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 1
    assert b"cannot read" in missing.stderr


def test_a_fifo_a_device_or_a_proc_file_is_invalid_params_at_once_and_the_daemon_goes_on(
    db_path: Path, spawn: Spawn, tmp_path: Path
) -> None:
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)  # nobody ever writes: opening it for reading would wait forever
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")  # read, it never ends: memory would grow without bound
    daemon = spawn(serve_argv(db_path))

    # Each answer is awaited with the test deadline: old code never answered the FIFO.
    for request_id, path in enumerate(
        [str(fifo), str(zero), "/dev/zero", "/proc/self/environ", str(tmp_path), "t\0.jsonl"],
        start=1,
    ):
        answer = daemon.call(request_id, "bootstrap", {"session": "s", "path": path})
        assert answer["error"]["code"] == errors.InvalidParams.CODE, (path, answer)
        assert answer["error"]["data"]["field"] == "params.path"
    message = {"role": "user", "content": "hi"}
    stored = daemon.call(9, "ingest", {"session": "s", "message": message})
    assert stored["result"]["ingested"] == 1
    assert daemon.finish()[0] == 0
    assert len(stored_client_ids(db_path, "s")) == 1


def test_a_plain_sdk_dump_with_null_content_beside_tool_calls_is_imported_as_ingest_takes_it(
    db_path: Path, spawn: Spawn, tmp_path: Path
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    # What ``model_dump()`` of OpenAI SDK messages writes, one a line.
    lines: list[dict[str, Any]] = [
        {"role": "user", "content": "what is in the repo?", "name": "alice"},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "annotations": [],
            "audio": None,
            "function_call": None,
            "tool_calls": [call],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"},
        {"role": "assistant", "content": "Two files.", "annotations": [], "refusal": None},
        {"role": "assistant", "refusal": "I can't delete them."},
        # Members no list names (Anthropic's newer stop_details) and OpenAI's
        # developer role are kept as sent, as ingest keeps them.
        {"role": "developer", "content": "Answer briefly."},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "No.", "citations": None}],
            "stop_reason": "refusal",
            "stop_details": {"type": "refusal", "category": "cyber", "explanation": None},
        },
    ]
    transcript = tmp_path / "dump.jsonl"
    transcript.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"role": "user", "content": "hi"}\n{"role": "user", "content": null}\n')
    daemon = spawn(serve_argv(db_path))

    done = daemon.call(1, "bootstrap", {"session": "s", "path": str(transcript)})["result"]
    refused = daemon.call(2, "bootstrap", {"session": "b", "path": str(bad)})["error"]

    assert (done["format"], done["imported"]) == ("plain", len(lines))
    ids = stored_client_ids(db_path, "s")
    for request_id, (line, message_id) in enumerate(zip(lines, ids, strict=True), start=3):
        described = daemon.call(request_id, "describe", {"id": message_id, "session": "s"})
        kept = {k: v for k, v in line.items() if v is not None or k == "content"}
        assert described["result"]["message"] == kept
    # Ingest's rule, with the line named: only an assistant message may omit content.
    assert refused["code"] == errors.InvalidParams.CODE
    assert "line 2.content" in refused["message"]
    assert daemon.finish()[0] == 0


def test_bootstrap_keeps_the_same_sdk_fields_as_the_ingest_request() -> None:
    assert content.MESSAGE_FIELDS == methods.MESSAGE_FIELDS
    assert content.RESERVED_PREFIX == RESERVED_PREFIX
    assert content.NO_CONTENT_NEEDS == methods.NO_CONTENT_NEEDS
    assert frozenset(methods.ROLES) == content.ROLES
