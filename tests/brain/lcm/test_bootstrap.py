"""Bootstrap: a session reconciled from an OpenClaw or plain JSONL transcript file."""

from __future__ import annotations

import tempfile
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, Conflict, InvalidInput, MessageIn
from brain.lcm.assemble import AssembleOptions
from brain.lcm.bootstrap import BATCH

HEADER: dict[str, Any] = {
    "type": "session",
    "version": 3,
    "id": "0f2c9a4e-session",
    "timestamp": "2025-06-01T10:00:00.000Z",
    "cwd": "/home/ada/project",
}


def _message(entry_id: str, parent: str | None, minute: int, message: dict[str, Any]) -> Any:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": f"2025-06-01T10:{minute:02d}:00.000Z",
        "message": message,
    }


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def _assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": list(blocks),
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4",
        "usage": {"input": 120, "output": 40},
        "stopReason": "toolUse",
        "timestamp": 2,
    }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


# e1 user -> e2 assistant (thinking + toolCall) -> e3 toolResult -> e4 assistant,
# then a fork at e4: e5a/e6a (abandoned) and e5b/e6b (later, active), with
# entries of other types in the tree and around it.
BRANCH_A = [
    _message("e5a", "e4", 5, _user("delete both files")),
    _message("e6a", "e5a", 6, _assistant(_text("Deleted README.md and src."))),
]
BRANCH_B = [
    _message("e5b", "e4", 7, _user("describe them instead")),
    {"type": "label", "id": "l1", "parentId": "e5b", "timestamp": "2025-06-01T10:07:30.000Z"},
    _message("e6b", "l1", 8, _assistant(_text("README.md documents the project; src holds code."))),
]
TRUNK = [
    {"type": "model_change", "id": "m0", "parentId": None, "provider": "anthropic"},
    _message("e1", "m0", 1, _user("what is in this directory?")),
    _message(
        "e2",
        "e1",
        2,
        _assistant(
            {"type": "thinking", "thinking": "I should list it.", "thinkingSignature": "sig-1"},
            _text("Let me look."),
            {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "ls"}},
        ),
    ),
    _message(
        "e3",
        "e2",
        3,
        {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "bash",
            "content": [_text("README.md\nsrc")],
            "isError": False,
            "timestamp": 3,
        },
    ),
    _message("e4", "e3", 4, _assistant(_text("There are two entries: README.md and src."))),
]
ACTIVE = ["e1", "e2", "e3", "e4", "e5b", "e6b"]


def _write(path: Path, entries: Sequence[Any], *, header: bool = True) -> Path:
    lines = ([HEADER] if header else []) + list(entries)
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in lines))
    return path


def _stored(brain: Brain, session: str) -> list[str]:
    rows = brain.store.execute(
        "SELECT m.client_id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE c.session_id = ? ORDER BY m.seq",
        (session,),
    )
    return [str(r[0]) for r in rows]


@pytest.fixture
def openclaw(tmp_path: Path) -> Path:
    return _write(tmp_path / "session.jsonl", [*TRUNK, *BRANCH_A, *BRANCH_B])


def test_an_openclaw_session_imports_its_active_path_from_the_last_message_to_the_root(
    brain: Brain, openclaw: Path
) -> None:
    report = brain.bootstrap("s", openclaw)

    assert _stored(brain, "s") == ACTIVE
    assert report.format == "openclaw"
    assert (report.entries, report.messages, report.path_length) == (10, 8, 6)
    assert (report.anchor, report.imported, report.already_present) == (None, 6, 0)
    assert not report.forked
    assert report.fork_point is None


def test_openclaw_tool_calls_and_results_become_anthropic_blocks_paired_by_id(
    brain: Brain, openclaw: Path
) -> None:
    brain.bootstrap("s", openclaw)

    assert brain.get_message("s", "e2")["content"] == [
        {"type": "thinking", "thinking": "I should list it.", "signature": "sig-1"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}},
    ]
    assert brain.get_message("s", "e3") == {
        "id": "e3",
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": [_text("README.md\nsrc")]}
        ],
    }
    rendered = brain.assemble("s", AssembleOptions(budget=10_000)).messages
    assert {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc"} in rendered


def test_entry_timestamps_become_created_at(brain: Brain, openclaw: Path) -> None:
    brain.bootstrap("s", openclaw)
    stamp = brain.store.scalar("SELECT created_at FROM messages WHERE client_id = 'e3'")
    assert stamp == "2025-06-01T10:03:00.000Z"


def test_unknown_blocks_are_kept_as_sent_and_unsupported_roles_are_skipped_and_counted(
    brain: Brain, tmp_path: Path
) -> None:
    custom = {"type": "canvas", "nodes": [1, 2]}
    transcript = _write(
        tmp_path / "t.jsonl",
        [
            _message("u1", None, 1, {"role": "user", "content": [_text("hi"), custom]}),
            _message("b1", "u1", 2, {"role": "bashExecution", "command": "ls", "output": "x"}),
            _message("a1", "b1", 3, {"role": "assistant", "content": "hello"}),
        ],
    )
    report = brain.bootstrap("s", transcript)

    assert (report.path_length, report.imported, report.skipped) == (3, 2, 1)
    assert _stored(brain, "s") == ["u1", "a1"]
    assert brain.get_message("s", "u1")["content"] == [_text("hi"), custom]


def test_running_a_bootstrap_twice_imports_nothing_the_second_time(
    brain: Brain, openclaw: Path
) -> None:
    brain.bootstrap("s", openclaw)
    again = brain.bootstrap("s", openclaw)

    assert (again.anchor, again.imported, again.already_present) == ("e6b", 0, 6)
    assert _stored(brain, "s") == ACTIVE


def test_a_partial_import_resumes_after_its_anchor(brain: Brain, openclaw: Path) -> None:
    # The host had ingested the first three live, with the entry ids.
    brain.ingest("s", [MessageIn("user", "what is in this directory?", client_id="e1")])
    brain.ingest("s", [MessageIn("assistant", "Let me look.", client_id="e2")])
    brain.ingest("s", [MessageIn("user", "README.md\nsrc", client_id="e3")])

    report = brain.bootstrap("s", openclaw)

    assert (report.anchor, report.imported, report.already_present) == ("e3", 3, 3)
    assert not report.forked
    assert _stored(brain, "s") == ACTIVE


def test_a_fork_after_the_anchor_is_refused_and_writes_nothing(
    brain: Brain, tmp_path: Path
) -> None:
    before = _write(tmp_path / "before.jsonl", [*TRUNK, *BRANCH_A])  # branch A was active
    brain.bootstrap("s", before)
    after = _write(tmp_path / "after.jsonl", [*TRUNK, *BRANCH_A, *BRANCH_B])

    with pytest.raises(Conflict) as refused:
        brain.bootstrap("s", after)

    assert refused.value.data == {
        "session": "s",
        "fork_point": "e4",
        "stored_off_path": 2,
        "to_import": 2,
    }
    assert _stored(brain, "s") == ["e1", "e2", "e3", "e4", "e5a", "e6a"]


def test_a_fork_with_on_fork_append_keeps_the_stored_branch_and_appends_the_new_one(
    brain: Brain, tmp_path: Path
) -> None:
    brain.bootstrap("s", _write(tmp_path / "before.jsonl", [*TRUNK, *BRANCH_A]))
    after = _write(tmp_path / "after.jsonl", [*TRUNK, *BRANCH_A, *BRANCH_B])

    report = brain.bootstrap("s", after, on_fork="append")

    assert (report.forked, report.fork_point, report.stored_off_path) == (True, "e4", 2)
    assert (report.anchor, report.imported) == ("e4", 2)
    assert _stored(brain, "s") == ["e1", "e2", "e3", "e4", "e5a", "e6a", "e5b", "e6b"]
    # Appended once: the anchor is now e6b, so a second run is neither a fork nor an import.
    again = brain.bootstrap("s", after)
    assert (again.anchor, again.imported, again.forked) == ("e6b", 0, False)


def test_stored_messages_past_the_end_of_a_shorter_transcript_are_reported_not_refused(
    brain: Brain, openclaw: Path
) -> None:
    brain.bootstrap("s", openclaw)
    brain.ingest("s", [MessageIn("user", "a live turn the file has not caught up with")])

    report = brain.bootstrap("s", openclaw)

    assert (report.forked, report.fork_point, report.imported) == (True, "e6b", 0)


def test_a_plain_transcript_is_imported_with_line_ids_in_order(
    brain: Brain, tmp_path: Path
) -> None:
    lines = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi", "created_at": "2025-06-01T09:00:00Z"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "assistant", "content": "One file."},
    ]
    transcript = tmp_path / "plain.jsonl"
    # A blank line between is skipped; line numbers stay the file's.
    transcript.write_bytes(
        b"\n".join(orjson.dumps(line) for line in lines[:2])
        + b"\n\n"
        + b"".join(orjson.dumps(line) + b"\n" for line in lines[2:])
    )

    report = brain.bootstrap("s", transcript)
    again = brain.bootstrap("s", transcript)

    ids = _stored(brain, "s")
    assert report.format == "plain"
    assert report.imported == 5
    assert [i.split("-")[1] for i in ids] == ["1", "2", "4", "5", "6"]
    assert all(i.startswith("line-") and len(i.split("-")[2]) == 12 for i in ids)
    assert (again.imported, again.anchor) == (0, ids[-1])
    assert brain.get_message("s", ids[3])["tool_call_id"] == "c1"


def test_an_appended_plain_transcript_imports_only_the_new_lines(
    brain: Brain, tmp_path: Path
) -> None:
    transcript = tmp_path / "plain.jsonl"
    first = [{"role": "user", "content": f"turn {i}"} for i in range(3)]
    transcript.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in first))
    brain.bootstrap("s", transcript)
    with transcript.open("ab") as f:
        f.write(orjson.dumps({"role": "assistant", "content": "turn 3"}) + b"\n")

    report = brain.bootstrap("s", transcript)

    assert (report.imported, report.already_present) == (1, 3)


def test_a_line_that_is_not_json_is_named_and_nothing_is_imported(
    brain: Brain, openclaw: Path
) -> None:
    data = openclaw.read_bytes().splitlines(keepends=True)
    data.insert(4, b'{"type": "message", "id": "broken"\n')  # becomes line 5
    openclaw.write_bytes(b"".join(data))

    with pytest.raises(InvalidInput) as bad:
        brain.bootstrap("s", openclaw)

    assert bad.value.field == "line 5"
    assert "not valid JSON" in bad.value.message
    assert _stored(brain, "s") == []


def test_an_unrecognised_first_line_is_refused(brain: Brain, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b'\n{"hello": "world"}\n')
    with pytest.raises(InvalidInput) as bad:
        brain.bootstrap("s", transcript)
    assert bad.value.field == "line 2"


def test_a_missing_or_empty_file_is_invalid_input(brain: Brain, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        brain.bootstrap("s", tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_bytes(b"\n\n")
    with pytest.raises(InvalidInput, match="empty"):
        brain.bootstrap("s", tmp_path / "empty.jsonl")


def test_a_message_ingest_rejects_keeps_the_committed_batches_and_a_rerun_resumes(
    brain: Brain, tmp_path: Path
) -> None:
    transcript = tmp_path / "plain.jsonl"
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(BATCH + 200)]
    messages[BATCH + 99] = {"role": "robot", "content": "beep"}  # line BATCH + 100
    transcript.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in messages))

    with pytest.raises(InvalidInput) as bad:
        brain.bootstrap("s", transcript)

    assert bad.value.field == f"line {BATCH + 100}.role"
    assert len(_stored(brain, "s")) == BATCH  # the first batch committed, the second not
    messages[BATCH + 99] = {"role": "assistant", "content": "beep"}
    transcript.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in messages))
    report = brain.bootstrap("s", transcript)
    assert (report.already_present, report.imported) == (BATCH, 200)


def test_a_session_key_is_recorded_like_ingest_does(brain: Brain, openclaw: Path) -> None:
    brain.bootstrap("s", openclaw, session_key="agent:ada")
    assert brain.store.scalar("SELECT session_key FROM conversations") == "agent:ada"
    with pytest.raises(Conflict):
        brain.bootstrap("s", openclaw, session_key="agent:bob")


def _large_transcript(path: Path, n: int) -> Path:
    """``n`` message entries (a small fork every 100) with tool-output-sized bodies."""
    body = "log line with some words in it\n" * 20
    with path.open("wb") as f:
        f.write(orjson.dumps(HEADER) + b"\n")
        parent: str | None = None
        for i in range(n):
            if i % 100 == 50:  # an abandoned sibling of the next entry
                sibling = _message(f"x{i}", parent, 0, _user(f"abandoned {i}"))
                f.write(orjson.dumps(sibling) + b"\n")
            message = _user(f"turn {i}\n{body}") if i % 2 else _assistant(_text(f"{i} {body}"))
            f.write(orjson.dumps(_message(f"e{i}", parent, i % 60, message)) + b"\n")
            parent = f"e{i}"
    return path


def test_a_large_transcript_streams_in_batches_with_memory_well_below_the_file_size(
    db_path: Path, tmp_path: Path
) -> None:
    n = 20_000
    transcript = _large_transcript(tmp_path / "big.jsonl", n)
    size = transcript.stat().st_size
    calls: list[tuple[int, int | None, str]] = []
    engine = Brain(db_path)
    try:
        tracemalloc.start()
        try:
            report = engine.bootstrap("big", transcript, progress=lambda *a: calls.append(a))
            _current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert (report.path_length, report.imported) == (n, n)
        assert engine.store.scalar("SELECT count(*) FROM messages") == n
    finally:
        engine.close()
    # A property, not a timing: the file is never held whole (peak is per-entry
    # records plus one batch), so the peak stays a fraction of the file.
    assert peak < size / 3, (peak, size)
    imports = [c for c in calls if c[2] == "import"]
    assert len(imports) >= n // BATCH
    assert imports[-1] == (n, n, "import")
    assert {c[2] for c in calls} == {"scan", "import"}
    assert calls[0][2] == "scan"
    assert calls[0][1] == size


def _tree(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 25))
    entries: list[dict[str, Any]] = []
    for i in range(count):
        parent = draw(st.sampled_from([None, *[e["id"] for e in entries]])) if entries else None
        entries.append(_message(f"n{i}", parent, i, _user(f"node {i}")))
    return entries


trees = st.composite(_tree)


def _path_of(entries: list[dict[str, Any]]) -> list[str]:
    parents = {e["id"]: e["parentId"] for e in entries}
    out, at = [], entries[-1]["id"]
    while at is not None:
        out.append(at)
        at = parents[at]
    return out[::-1]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=trees(), data=st.data())
def test_after_any_stored_prefix_of_the_path_a_bootstrap_stores_exactly_the_path(
    entries: list[dict[str, Any]], data: st.DataObject
) -> None:
    path = _path_of(entries)
    stored = data.draw(st.integers(0, len(path)))
    with tempfile.TemporaryDirectory() as tmp:
        engine = Brain(Path(tmp) / "brain.db")
        try:
            for entry_id in path[:stored]:
                engine.ingest("s", [MessageIn("user", entry_id, client_id=entry_id)])
            report = engine.bootstrap("s", _write(Path(tmp) / "t.jsonl", entries))
            again = engine.bootstrap("s", Path(tmp) / "t.jsonl")
            assert _stored(engine, "s") == path
            assert report.imported == len(path) - stored
            assert (again.imported, again.forked) == (0, False)
        finally:
            engine.close()


@pytest.mark.parametrize("target", ["/proc/self/environ", "/proc/self/status", "/dev/null"])
def test_a_proc_or_dev_file_is_refused_before_anything_is_read(
    brain: Brain, tmp_path: Path, target: str
) -> None:
    link = tmp_path / "t.jsonl"
    link.symlink_to(target)
    for path in (Path(target), link):
        with pytest.raises(InvalidInput, match="/proc, /sys or /dev") as bad:
            brain.bootstrap("s", path)
        assert bad.value.field == "path"


def test_a_directory_is_refused_as_not_a_regular_file(brain: Brain, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a regular file") as bad:
        brain.bootstrap("s", tmp_path)
    assert bad.value.field == "path"
