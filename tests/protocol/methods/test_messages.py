"""protocol.methods.messages: ingest messages parse in every SDK shape; bad ones name the field."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import InvalidParams
from protocol.methods import IngestParams


def _ingest(**params: Any) -> IngestParams:
    return IngestParams.from_obj(params)


def test_a_batch_and_a_single_message_both_parse() -> None:
    batch = _ingest(session="s", messages=[{"role": "user", "content": "hi", "id": "m1"}])
    assert batch.messages[0].id == "m1"
    assert not batch.single
    one = _ingest(session="s", message={"role": "assistant", "content": [{"type": "text"}]})
    assert one.single
    assert one.messages[0].content == [{"type": "text"}]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "params.session"),
        ({"session": 5, "message": {"role": "user", "content": "x"}}, "params.session"),
        ({"session": "", "message": {"role": "user", "content": "x"}}, "params.session"),
        ({"session": "s"}, "params.messages"),
        ({"session": "s", "messages": []}, "params.messages"),
        (
            {"session": "s", "messages": [], "message": {"role": "user", "content": "x"}},
            "params.messages",
        ),
        ({"session": "s", "messages": {"role": "user"}}, "params.messages"),
        ({"session": "s", "message": {"role": "robot", "content": "x"}}, "params.message.role"),
        ({"session": "s", "message": {"role": "user"}}, "params.message.content"),
        ({"session": "s", "message": {"role": "user", "content": 5}}, "params.message.content"),
        (
            {"session": "s", "messages": [{"role": "user", "content": "a"}, {"role": "user"}]},
            "params.messages[1].content",
        ),
        (
            {"session": "s", "message": {"role": "user", "content": [{"text": "no type"}]}},
            "params.message.content[0].type",
        ),
        (
            {"session": "s", "message": {"role": "user", "content": ["str"]}},
            "params.message.content[0]",
        ),
        (
            {"session": "s", "message": {"role": "user", "content": "x", "id": 7}},
            "params.message.id",
        ),
        (
            {"session": "s", "message": {"role": "user", "content": "x", "__brain_role__": "x"}},
            "params.message.__brain_role__",
        ),
        (
            {"session": "s", "message": {"role": "user", "content": "x"}, "sesion": 1},
            "params.sesion",
        ),
        (
            {"session": "s", "message": {"role": "assistant", "content": "", "tool_calls": [1]}},
            "params.message.tool_calls[0]",
        ),
        ({"session": "s", "message": {"role": "assistant"}}, "params.message.content"),
        (
            {"session": "s", "message": {"role": "assistant", "content": None, "tool_calls": []}},
            "params.message.content",
        ),
        (
            {"session": "s", "message": {"role": "user", "content": None, "refusal": "no"}},
            "params.message.content",
        ),
        (
            {"session": "s", "message": {"role": "tool", "tool_call_id": "c", "content": None}},
            "params.message.content",
        ),
    ],
)
def test_bad_ingest_params_name_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        IngestParams.from_obj(params)
    assert caught.value.message.startswith(field + ":"), caught.value.message


def test_null_valued_unknown_message_fields_from_sdks_are_ignored() -> None:
    params = _ingest(
        session="s", message={"role": "assistant", "content": "x", "refusal": None, "audio": None}
    )
    assert params.messages[0].content == "x"


CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}


def test_an_openai_sdk_assistant_message_dump_parses_with_null_content() -> None:
    # ChatCompletionMessage.model_dump() of a tool-calling answer.
    dump = {
        "content": None,
        "refusal": None,
        "role": "assistant",
        "annotations": [],
        "audio": None,
        "function_call": None,
        "tool_calls": [CALL],
    }
    [message] = _ingest(session="s", message=dump).messages
    assert message.content is None
    assert not message.content_absent
    assert message.tool_calls == [CALL]
    assert message.extra == {"annotations": []}  # null members say nothing and are not kept


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "assistant", "refusal": "I can't help with that."},
        {"role": "assistant", "audio": {"id": "audio_1"}},
        {"role": "assistant", "function_call": {"name": "ls", "arguments": "{}"}},
    ],
)
def test_an_assistant_message_with_something_else_to_say_may_leave_content_out(
    message: dict[str, Any],
) -> None:
    [parsed] = _ingest(session="s", message=message).messages
    assert parsed.content is None
    assert parsed.content_absent


def test_sdk_message_fields_are_accepted_and_kept_as_sent() -> None:
    fields = {
        "refusal": "no",
        "annotations": [{"type": "url_citation", "url_citation": {"url": "https://x"}}],
        "audio": {"id": "a", "data": "AAAA", "expires_at": 1, "transcript": "t"},
        "function_call": {"name": "f", "arguments": "{}"},
        "reasoning_content": "because",
        "reasoning": "because",
        "type": "message",
        "status": "completed",
        "model": "claude-x",
        "stop_reason": "end_turn",
        "stop_sequence": "###",
        "usage": {"input_tokens": 1, "output_tokens": 2},
        "container": {"id": "c"},
    }
    [parsed] = _ingest(session="s", message={"role": "assistant", "content": "x"} | fields).messages
    assert parsed.extra == fields


def test_message_members_brain_does_not_know_are_kept_as_sent() -> None:
    # Anthropic Message.model_dump() grew stop_details and diagnostics; the next
    # SDK release will grow something else: a message is the host's data.
    fields = {
        "stop_details": {"type": "refusal", "category": "cyber", "explanation": "no"},
        "diagnostics": {"cache_miss_reason": {"type": "unavailable"}},
        "a_field_of_2030": [1, {"x": True}],
    }
    [parsed] = _ingest(session="s", message={"role": "assistant", "content": "x"} | fields).messages
    assert parsed.extra == fields


@pytest.mark.parametrize("role", ["developer", "function"])
def test_openai_developer_and_legacy_function_roles_parse(role: str) -> None:
    [parsed] = _ingest(session="s", message={"role": role, "content": "x", "name": "f"}).messages
    assert parsed.role == role
    assert parsed.extra is None
