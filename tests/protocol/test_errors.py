"""The error tree: unique stable codes, round trips through the wire shape."""

from __future__ import annotations

import pytest

from protocol import errors


def test_every_code_is_unique() -> None:
    codes = [cls.CODE for cls in errors.ERROR_TYPES]
    assert len(codes) == len(set(codes))
    assert set(errors.ERROR_CODES) == set(codes)


def test_standard_json_rpc_codes_are_the_standard_numbers() -> None:
    assert errors.ParseError.CODE == -32700
    assert errors.InvalidRequest.CODE == -32600
    assert errors.MethodNotFound.CODE == -32601
    assert errors.InvalidParams.CODE == -32602
    # pylsp-jsonrpc once shipped -32602 for internal errors; ours must be -32603.
    assert errors.InternalError.CODE == -32603


def test_domain_codes_sit_in_the_server_error_range() -> None:
    standard = {-32700, -32600, -32601, -32602, -32603}
    for code in set(errors.ERROR_CODES) - standard:
        assert -32099 <= code <= -32000


@pytest.mark.parametrize("cls", errors.ERROR_TYPES)
def test_an_error_survives_the_wire_shape(cls: type[errors.RPCError]) -> None:
    original = cls("what happened", {"field": "params.x"})
    rebuilt = errors.error_from_obj(original.to_obj())
    assert type(rebuilt) is cls
    assert rebuilt.code == cls.CODE
    assert rebuilt.message == "what happened"
    assert rebuilt.data == {"field": "params.x"}


def test_an_unknown_code_is_kept_as_sent() -> None:
    rebuilt = errors.error_from_obj({"code": -32050, "message": "new in a later version"})
    assert type(rebuilt) is errors.RPCError
    assert rebuilt.code == -32050


def test_every_error_class_has_a_default_message() -> None:
    for cls in errors.ERROR_TYPES:
        assert cls().message == cls.MESSAGE
        assert cls.MESSAGE
