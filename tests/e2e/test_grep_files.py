"""grep scope files through a real daemon: a word deep inside a big tool result is found,
and the hit's id leads ``describe`` to the payload."""

from __future__ import annotations

from pathlib import Path

from protocol.client import Client


def _tool_log(lines: int) -> str:
    body = [f"{i:06d} INFO request served in 12 ms" for i in range(lines)]
    body[lines - 10] = f"{lines - 10:06d} ERROR checksum mismatch in shard quetzalcoatl-7"
    return "\n".join(body)


def test_a_word_inside_a_big_tool_result_is_found_with_scope_files_and_described(
    tmp_path: Path,
) -> None:
    lines = 20_000  # about 700 KB: far over the default payload threshold
    messages = [
        {
            "id": "a1",
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "logs", "arguments": "{}"}}
            ],
        },
        {"id": "t1", "role": "tool", "tool_call_id": "c1", "content": _tool_log(lines)},
    ]
    with Client.spawn(tmp_path / "files.db") as client:
        client.call("ingest", {"session": "s", "messages": messages})
        assert client.call("info")["large_files"] == 1
        plain = client.call("grep", {"query": "quetzalcoatl", "session": "s"})
        assert plain["hits"] == []
        found = client.call("grep", {"query": "quetzalcoatl", "session": "s", "scope": "files"})
        (hit,) = found["hits"]
        assert hit["kind"] == "file"
        assert hit["session"] == "s"
        assert hit["id"].startswith("file_")
        assert "[quetzalcoatl]" in hit["snippet"]
        regex = client.call(
            "grep",
            {"query": r"shard \w+-\d", "mode": "regex", "session": "s", "scope": "files"},
        )
        assert [h["id"] for h in regex["hits"]] == [hit["id"]]
        described = client.call(
            "describe", {"id": hit["id"], "session": "s", "lines": [lines - 10, lines - 9]}
        )
        assert described["kind"] == "file"
        assert described["message_id"] == "t1"
        assert "checksum mismatch in shard quetzalcoatl-7" in described["content"]
        # Another session (one that exists: a name that does not is NotFound) sees none of it.
        client.call("ingest", {"session": "other", "message": {"role": "user", "content": "hi"}})
        elsewhere = client.call(
            "grep", {"query": "quetzalcoatl", "session": "other", "scope": "files"}
        )
        assert elsewhere["hits"] == []
        assert client.close() == 0
