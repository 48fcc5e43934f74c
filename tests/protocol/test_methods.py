"""Params validation names the offending field and rejects what it does not know."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import InvalidParams
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


def test_methods_without_params_reject_any_param() -> None:
    assert NoParams.from_obj({}) == NoParams()
    with pytest.raises(InvalidParams, match=r"params\.verbose"):
        NoParams.from_obj({"verbose": True})


def test_every_method_has_a_params_type_and_a_summary() -> None:
    for name, spec in METHODS.items():
        assert name.isidentifier()
        assert spec.summary
        assert hasattr(spec.params, "from_obj")
