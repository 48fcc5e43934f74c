"""Params validation names the offending field and rejects what it does not know."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import InvalidParams
from protocol.fields import Fields
from protocol.methods import METHODS, IngestParams, NoParams


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
            {"session": "s", "message": {"role": "user", "content": "x", "colour": "red"}},
            "params.message.colour",
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
        (
            {"session": "s", "message": {"role": "user", "content": "x", "annotation": []}},
            "params.message.annotation",
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


def test_methods_without_params_reject_any_param() -> None:
    assert NoParams.from_obj({}) == NoParams()
    with pytest.raises(InvalidParams, match=r"params\.verbose"):
        NoParams.from_obj({"verbose": True})


def test_every_method_has_a_params_type_and_a_summary() -> None:
    for name, spec in METHODS.items():
        assert name.isidentifier()
        assert spec.summary
        assert hasattr(spec.params, "from_obj")


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        (
            "grep",
            {"query": "x", "sesion": "s"},
            "params.sesion: unknown field (did you mean session?)",
        ),
        (
            "ingest",
            {"sesion": "s", "message": {"role": "user", "content": "x"}},
            "params.sesion: unknown field (did you mean session?)",
        ),
        (
            "assemble",
            {"session": "s", "budegt": 9},
            "params.budegt: unknown field (did you mean budget?)",
        ),
        (
            "describe",
            {"id": "m1", "sesion": "s"},
            "params.sesion: unknown field (did you mean session?)",
        ),
        ("compact", {"session": "s", "zzz": 1}, "params.zzz: unknown field"),
        ("correction", {"content": "c", "kind": "teaching"}, "params.kind: unknown field"),
    ],
)
def test_a_misspelt_field_is_named_before_the_field_it_hides_is_missed(
    method: str, params: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidParams) as raised:
        METHODS[method].params.from_obj(params)
    assert str(raised.value) == message
    field = message.split(":", maxsplit=1)[0].removeprefix("params.")
    assert raised.value.data == {"unknown": [field]}


def test_an_unread_member_is_refused_with_the_read_one_it_resembles() -> None:
    fields = Fields({"rol": "user", "role": "user"}, "params.message")
    assert fields.optional_str("role") == "user"
    with pytest.raises(
        InvalidParams, match=r"^params\.message\.rol: unknown field \(did you mean role\?\)$"
    ):
        fields.done()


def test_reading_a_field_a_params_type_does_not_declare_fails_loudly() -> None:
    # Every parse reads every field, so any test of a method catches a stale FIELDS.
    fields = Fields({}, known=("session",))
    with pytest.raises(AssertionError, match=r"params\.sesion"):
        fields.raw("sesion")


def test_every_methods_params_type_resolves_to_a_params_class() -> None:
    for name, spec in METHODS.items():
        params = spec.params
        assert isinstance(params.FIELDS, tuple), name
        assert callable(params.from_obj), name
