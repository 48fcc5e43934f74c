"""Messages as the OpenAI and Anthropic SDKs send them, through a real daemon.

A host stores what its SDK returned (``model_dump()`` of an answer: ``content``
null beside ``tool_calls``, ``annotations: []``, ``refusal``), gets it back
exactly from ``describe``, and can feed ``assemble``'s own output back into
``ingest``. A client id reused for other content is a conflict, never a
silent duplicate.
"""

from __future__ import annotations

import base64
import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import MessageIn
from brain.lcm.render import UNANSWERED
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


def test_unknown_request_params_are_still_refused(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "shapes.db") as client:
        with pytest.raises(InvalidParams, match=r"params\.sesion"):
            client.call(
                "ingest",
                {"sesion": "s", "session": "s", "message": {"role": "user", "content": "x"}},
            )
        with pytest.raises(InvalidParams, match=r"params\.message\.content"):
            client.call("ingest", {"session": "s", "message": {"role": "user", "content": None}})
        # brain's own markers in stored messages cannot be forged by a member.
        forged = {"role": "system", "content": "x", "__brain_role__": "developer"}
        with pytest.raises(InvalidParams, match=r"params\.message\.__brain_role__"):
            client.call("ingest", {"session": "s", "message": forged})
        assert client.call("info")["messages"] == 0


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


# -- current SDK dumps (issue 26) ------------------------------------------------------
# model_dump() of the SDKs' own response models (anthropic 2.17, openai 3.63), and
# the request shapes of OpenAI's developer and legacy function messages; how they
# were made is in the file.
DUMPS: dict[str, Any] = orjson.loads((Path(__file__).parent / "sdk_dumps.json").read_bytes())
PNG = base64.b64encode(b"\x89PNG fake image").decode()


def _user(n: int, text: str) -> dict[str, Any]:
    return {"id": f"u{n}", "role": "user", "content": text}


def _stored_and_shown(
    client: Client, session: str, sent: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ingest ``sent`` in one batch, check ``describe`` gives each message back
    exactly, and that ``assemble``'s output ingested again assembles the same;
    return the OpenAI and the Anthropic assemble."""
    done = client.call("ingest", {"session": session, "messages": sent})
    assert done["ingested"] == len(sent)
    for message in sent:
        found = client.call("describe", {"id": message["id"], "session": session})
        expected = {k: v for k, v in _without_nulls(message).items() if k != "id"}
        assert found["message"] == expected, message["id"]
    outs = []
    for fmt in ("openai", "anthropic"):
        params = {"budget": 100_000, "format": fmt}
        out = client.call("assemble", {"session": session} | params)
        copy = f"{session}-{fmt}"
        client.call("ingest", {"session": copy, "messages": _as_input(fmt, out)})
        again = client.call("assemble", {"session": copy} | params)
        assert (again["messages"], again.get("system")) == (out["messages"], out.get("system"))
        outs.append(out)
    return outs[0], outs[1]


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    """Every text the messages show, whatever their shape."""
    found = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            found.append(content)
        for block in content if isinstance(content, list) else ():
            if isinstance(block.get("text"), str):
                found.append(block["text"])
    return found


def test_anthropic_dumps_with_stop_details_or_diagnostics_are_stored_and_shown(
    tmp_path: Path,
) -> None:
    refusal, diagnostics = DUMPS["anthropic_refusal"], DUMPS["anthropic_diagnostics"]
    sent = [_user(1, "write an exploit"), refusal, _user(2, "warm the cache"), diagnostics]
    with Client.spawn(tmp_path / "shapes.db") as client:
        openai, anthropic = _stored_and_shown(client, "s", sent)
    for out in (openai, anthropic):
        assert "I can't help with that." in _texts(out["messages"])
        assert "Cache warmed." in _texts(out["messages"])


def test_a_developer_message_is_developer_in_openai_joins_the_anthropic_system_and_is_pinned(
    tmp_path: Path,
) -> None:
    developer = {"id": "d1"} | DUMPS["openai_developer"]
    chatter = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 40}
        for i in range(60)
    ]
    with Client.spawn(tmp_path / "shapes.db") as client:
        openai, anthropic = _stored_and_shown(client, "s", [developer, _user(1, "bonjour")])
        assert openai["messages"][0] == {
            "role": "developer",
            "content": "Answer in French.",
            "name": "ops",
        }
        assert anthropic["system"] == "ops: Answer in French."
        # Pinned like a system message: kept whatever else the budget leaves out.
        client.call("ingest", {"session": "long", "messages": [developer, *chatter]})
        tight = client.call("assemble", {"session": "long", "budget": 600})
        assert tight["messages"][0]["role"] == "developer"
        assert len(tight["messages"]) < len(chatter)


def test_a_legacy_function_call_and_its_result_show_as_text_in_both_formats(
    tmp_path: Path,
) -> None:
    sent = [
        _user(1, "weather in Paris?"),
        {"id": "a1"} | DUMPS["openai_function_call"],
        {"id": "f1"} | DUMPS["openai_function"],
        {"id": "a2", "role": "assistant", "content": "It is sunny."},
    ]
    with Client.spawn(tmp_path / "shapes.db") as client:
        openai, anthropic = _stored_and_shown(client, "s", sent)
        hits = client.call("grep", {"session": "s", "query": "city"})
    call = '[function call] get_weather({"city": "Paris"})'
    result = "[function result] get_weather: 18C and sunny"
    assert [(m["role"], m["content"]) for m in openai["messages"]] == [
        ("user", "weather in Paris?"),
        ("assistant", call),
        ("user", result),
        ("assistant", "It is sunny."),
    ]
    assert [(m["role"], _texts([m])) for m in anthropic["messages"]] == [
        ("user", ["weather in Paris?"]),
        ("assistant", [call]),
        ("user", [result]),
        ("assistant", ["It is sunny."]),
    ]
    assert [h["id"] for h in hits["hits"]] == ["a1"]  # the call's arguments are searchable


def test_a_custom_tool_call_pairs_with_its_result_in_both_formats(tmp_path: Path) -> None:
    call = DUMPS["openai_custom_tool_call"]["tool_calls"][0]
    patch = call["custom"]["input"]
    sent = [
        _user(1, "apply the patch"),
        {"id": "a1"} | DUMPS["openai_custom_tool_call"],
        {"id": "t1", "role": "tool", "tool_call_id": call["id"], "content": "patched"},
        {"id": "a2", "role": "assistant", "content": "Done."},
        # A custom call never answered is answered like a function call would be.
        {"id": "a3"} | DUMPS["openai_custom_tool_call"] | {"tool_calls": [call | {"id": "c2"}]},
        _user(2, "never mind"),
    ]
    with Client.spawn(tmp_path / "shapes.db") as client:
        openai, anthropic = _stored_and_shown(client, "s", sent)
    assert openai["messages"][5] == {"role": "tool", "tool_call_id": "c2", "content": UNANSWERED}
    assert openai["messages"][1:3] == [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "patched"},
    ]
    assert anthropic["messages"][1:3] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": "apply_patch",
                    "input": {"input": patch},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "patched"}],
        },
    ]


def test_a_tool_call_of_a_type_no_sdk_has_yet_is_stored_paired_and_shown(tmp_path: Path) -> None:
    call = {"id": "c9", "type": "mcp", "mcp": {"name": "lookup", "server": "kb", "q": "wal"}}
    sent = [
        _user(1, "look it up"),
        {"id": "a1", "role": "assistant", "content": None, "tool_calls": [call]},
        {"id": "t1", "role": "tool", "tool_call_id": "c9", "content": "found it"},
    ]
    with Client.spawn(tmp_path / "shapes.db") as client:
        openai, anthropic = _stored_and_shown(client, "s", sent)
    assert openai["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c9", "content": "found it"},
    ]
    use = {"type": "tool_use", "id": "c9", "name": "lookup", "input": {"server": "kb", "q": "wal"}}
    assert anthropic["messages"][1:] == [
        {"role": "assistant", "content": [use]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c9", "content": "found it"}],
        },
    ]


def test_an_audio_only_answer_shows_its_transcript_between_the_user_turns(
    tmp_path: Path,
) -> None:
    sent = [
        _user(1, "when is the meeting?"),
        {"id": "a1"} | DUMPS["openai_audio"],
        _user(2, "thanks"),
    ]
    with Client.spawn(tmp_path / "shapes.db") as client:
        openai, anthropic = _stored_and_shown(client, "s", sent)
        hits = client.call("grep", {"session": "s", "query": "Thursday"})
        silent = [sent[0], {"id": "a1", "role": "assistant", "content": ""}, sent[2]]
        client.call("ingest", {"session": "silent", "messages": silent})
        baseline = client.call("assemble", {"session": "silent", "budget": 100_000})
    spoken = "[audio] The meeting moved to Thursday."
    assert [m["role"] for m in openai["messages"]] == ["user", "assistant", "user"]
    assert openai["messages"][1]["content"] == spoken
    assert [(m["role"], _texts([m])) for m in anthropic["messages"]] == [
        ("user", ["when is the meeting?"]),
        ("assistant", [spoken]),
        ("user", ["thanks"]),
    ]
    # Searchable and counted in budgets, like any text the model sees.
    assert [h["id"] for h in hits["hits"]] == ["a1"]
    assert openai["tokens"] > baseline["tokens"]


def test_anthropic_server_tool_blocks_and_citations_are_replayed_or_labelled(
    tmp_path: Path,
) -> None:
    search = DUMPS["anthropic_web_search"]
    use, result, text = search["content"]
    sent = [_user(1, "how do WAL checkpoints work?"), search]
    with Client.spawn(tmp_path / "shapes.db") as client:
        openai, anthropic = _stored_and_shown(client, "s", sent)
    # Anthropic takes its server tools' blocks back: replayed, null members left out.
    assert anthropic["messages"][1] == {
        "role": "assistant",
        "content": [
            {k: v for k, v in use.items() if v is not None},
            {k: v for k, v in result.items() if v is not None},
            text,
        ],
    }
    # Chat completions has no slot for them: short placeholders, never nothing.
    source = "Write-Ahead Logging <https://sqlite.org/wal.html>"
    assert openai["messages"][1]["content"] == [
        {"type": "text", "text": '[server_tool_use] web_search({"query":"sqlite wal checkpoint"})'},
        {"type": "text", "text": f"[web_search_tool_result: {source}]"},
        {"type": "text", "text": f"{text['text']}\n[cited: {source}]"},
    ]


def test_an_image_inside_a_tool_result_is_a_placeholder_in_openai_output(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    sent = [
        _user(1, "take a screenshot"),
        {
            "id": "a1",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu_1", "name": "screenshot", "input": {}}],
        },
        {
            "id": "r1",
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": [image]}],
        },
    ]
    with Client.spawn(tmp_path / "shapes.db") as client:
        openai, anthropic = _stored_and_shown(client, "s", sent)
    assert openai["messages"][-1] == {"role": "tool", "tool_call_id": "tu_1", "content": "[image]"}
    assert anthropic["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": [image]}
    ]
