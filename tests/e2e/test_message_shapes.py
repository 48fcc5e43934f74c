"""Messages as the OpenAI and Anthropic SDKs send them, through a real daemon.

A host stores what its SDK returned (``model_dump()`` of an answer: ``content``
null beside ``tool_calls``, ``annotations: []``, ``refusal``), gets it back
exactly from ``describe``, and can feed ``assemble``'s own output back into
``ingest``. A client id reused for other content is a conflict, never a
silent duplicate.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import MessageIn
from protocol.client import Client
from protocol.errors import Conflict, InvalidParams
from tests.brain.strategies import as_sent, conversations, tool_conversations

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "ls", "arguments": '{"path": "."}'},
}

# ChatCompletionMessage.model_dump() of a tool-calling answer, and of a plain one.
SDK_TOOL_CALL = {
    "content": None,
    "refusal": None,
    "role": "assistant",
    "annotations": [],
    "audio": None,
    "function_call": None,
    "tool_calls": [CALL],
}
SDK_ANSWER = {
    "content": "Two files.",
    "refusal": None,
    "role": "assistant",
    "annotations": [{"type": "url_citation", "url_citation": {"url": "https://x", "title": "x"}}],
    "audio": None,
}
# Anthropic Message.model_dump() of an answer, blocks with citations and cache_control.
ANTHROPIC_ANSWER = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [
        {
            "type": "text",
            "text": "See the doc.",
            "citations": [{"type": "char_location", "cited_text": "doc", "document_index": 0}],
            "cache_control": {"type": "ephemeral"},
        }
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
ANTHROPIC_RESULT = {
    "role": "user",
    "content": [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": "boom", "is_error": True},
    ],
}


def _without_nulls(message: dict[str, Any]) -> dict[str, Any]:
    """What is kept of a message: null members other than content say nothing."""
    return {k: v for k, v in message.items() if v is not None or k == "content"}


def test_sdk_message_dumps_are_accepted_and_given_back_exactly(tmp_path: Path) -> None:
    sent = [
        {"id": "u1", "role": "user", "content": "what is here?", "name": "alice"},
        {"id": "a1"} | SDK_TOOL_CALL,
        {"id": "t1", "role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"},
        {"id": "a2"} | SDK_ANSWER,
        {"id": "a3", "role": "assistant", "tool_calls": [CALL | {"id": "call_2"}]},
        {"id": "a4", "role": "assistant", "content": None, "refusal": "I can't do that."},
        ANTHROPIC_ANSWER,
        ANTHROPIC_RESULT | {"id": "r1"},
    ]
    with Client.spawn(tmp_path / "shapes.db") as client:
        done = client.call("ingest", {"session": "s", "messages": sent})
        assert done["ingested"] == len(sent)
        for message in sent:
            found = client.call("describe", {"id": message["id"], "session": "s"})
            expected = {k: v for k, v in _without_nulls(message).items() if k != "id"}
            assert found["message"] == expected, message["id"]

        out = client.call("assemble", {"session": "s", "budget": 100_000})
        calls = [m for m in out["messages"] if m.get("tool_calls")]
        assert calls
        assert calls[0]["content"] is None  # what the OpenAI API itself returns
        # assemble's own output is accepted back, and assembles to the same context.
        copy = client.call("ingest", {"session": "copy", "messages": out["messages"]})
        assert copy["ingested"] == len(out["messages"])
        again = client.call("assemble", {"session": "copy", "budget": 100_000})
        assert again["messages"] == out["messages"]


def test_a_reused_client_id_with_other_content_is_a_conflict_naming_it(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "shapes.db") as client:
        client.call(
            "ingest", {"session": "s", "message": {"id": "m1", "role": "user", "content": "a"}}
        )
        with pytest.raises(Conflict) as err:
            client.call(
                "ingest",
                {
                    "session": "s",
                    "messages": [
                        {"id": "m2", "role": "user", "content": "b"},
                        {"id": "m1", "role": "user", "content": "changed"},
                    ],
                },
            )
        assert "'m1'" in err.value.message
        assert err.value.data is not None
        assert err.value.data["id"] == "m1"
        # Nothing of the refused call was stored; an exact replay is still a duplicate.
        replay = client.call(
            "ingest", {"session": "s", "message": {"id": "m1", "role": "user", "content": "a"}}
        )
        assert replay["duplicates"] == 1
        assert client.call("info")["messages"] == 1


def test_unknown_message_members_and_request_params_are_still_refused(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "shapes.db") as client:
        message = {"role": "user", "content": "x", "colour": "red"}
        with pytest.raises(InvalidParams, match=r"params\.message\.colour"):
            client.call("ingest", {"session": "s", "message": message})
        with pytest.raises(InvalidParams, match=r"params\.sesion"):
            client.call(
                "ingest",
                {"sesion": "s", "session": "s", "message": {"role": "user", "content": "x"}},
            )
        with pytest.raises(InvalidParams, match=r"params\.message\.content"):
            client.call("ingest", {"session": "s", "message": {"role": "user", "content": None}})


def _wire(msg: MessageIn) -> dict[str, Any]:
    out = as_sent(msg)
    if msg.client_id is not None:
        out["id"] = msg.client_id
    if msg.created_at is not None:
        out["created_at"] = msg.created_at
    return out


def _sdk_shaped(conversation: list[MessageIn]) -> bool:
    """Only assistants make tool calls (no API accepts a ``tool_use`` block from the user)."""
    return not any(
        isinstance(m.content, list) and any(b.get("type") == "tool_use" for b in m.content)
        for m in conversation
        if m.role != "assistant"
    )


def _as_input(fmt: str, out: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of an assemble result as a host would send them on.

    Each gets a client id: without one, two equal messages in a row would be
    taken for a replay of the first (the documented rule for id-less ingest).
    """
    messages = list(out["messages"])
    system = out.get("system")
    if fmt == "anthropic" and system:  # Anthropic keeps system apart from the messages
        messages.insert(0, {"role": "system", "content": system})
    return [m | {"id": f"x{i}"} for i, m in enumerate(messages)]


def test_ingesting_what_assemble_gave_round_trips_in_both_formats(tmp_path: Path) -> None:
    sessions = itertools.count()
    with Client.spawn(tmp_path / "shapes.db") as client:

        @settings(
            max_examples=60,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(
            conversation=conversations(with_ids=False, max_size=8).filter(_sdk_shaped)
            | tool_conversations(max_turns=12),
            fmt=st.sampled_from(["openai", "anthropic"]),
        )
        def check(conversation: list[MessageIn], fmt: str) -> None:
            n = next(sessions)
            original, copy = f"o{n}", f"c{n}"
            client.call(
                "ingest", {"session": original, "messages": [_wire(m) for m in conversation]}
            )
            params = {"budget": 1_000_000, "format": fmt}
            out = client.call("assemble", {"session": original} | params)
            given_back = _as_input(fmt, out)
            if not given_back:
                return
            client.call("ingest", {"session": copy, "messages": given_back})
            again = client.call("assemble", {"session": copy} | params)
            assert again["messages"] == out["messages"]
            assert again.get("system") == out.get("system")

        check()
