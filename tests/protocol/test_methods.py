"""Params validation names the offending field and rejects what it does not know.

Every method family at once; the ingest messages are in tests/protocol/methods/.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import InvalidParams
from protocol.fields import Fields
from protocol.methods import METHODS, NoParams


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
