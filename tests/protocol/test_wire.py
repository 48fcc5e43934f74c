"""Request parsing never raises, and always says whom to answer."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import errors
from protocol.wire import Rejected, Request, error_frame, parse_request, result_frame


def test_a_plain_request_parses() -> None:
    req = parse_request(b'{"id": 7, "method": "ping", "params": {}}')
    assert req == Request(7, "ping", {}, notification=False, jsonrpc=False)


def test_missing_params_mean_empty_params_and_jsonrpc_is_noted() -> None:
    req = parse_request(b'{"jsonrpc": "2.0", "id": "a", "method": "info"}')
    assert isinstance(req, Request)
    assert req.params == {}
    assert req.jsonrpc


def test_a_request_without_id_is_a_notification() -> None:
    req = parse_request(b'{"method": "ping"}')
    assert isinstance(req, Request)
    assert req.notification


@pytest.mark.parametrize(
    ("line", "code", "answer_id"),
    [
        (b"not json", errors.ParseError.CODE, None),
        (b"\xff\xfe{}", errors.ParseError.CODE, None),
        (b'{"id": 1, "method": "ping"', errors.ParseError.CODE, None),
        (b"[1, 2]", errors.InvalidRequest.CODE, None),
        (b"42", errors.InvalidRequest.CODE, None),
        (b'{"id": 3}', errors.InvalidRequest.CODE, 3),
        (b'{"id": 3, "method": 5}', errors.InvalidRequest.CODE, 3),
        (b'{"id": [1], "method": "ping"}', errors.InvalidRequest.CODE, None),
        (b'{"id": true, "method": "ping"}', errors.InvalidRequest.CODE, None),
        (b'{"id": 4, "method": "ping", "extra": 1}', errors.InvalidRequest.CODE, 4),
        (b'{"id": 5, "method": "ping", "jsonrpc": "1.0"}', errors.InvalidRequest.CODE, 5),
        (b'{"id": 6, "method": "ping", "params": [1]}', errors.InvalidParams.CODE, 6),
    ],
)
def test_bad_lines_are_rejected_with_the_documented_code(
    line: bytes, code: int, answer_id: object
) -> None:
    rejected = parse_request(line)
    assert isinstance(rejected, Rejected)
    assert rejected.error.code == code
    assert rejected.id == answer_id


def test_invalid_utf8_is_named_as_such() -> None:
    rejected = parse_request(b'{"id": 1, "method": "\xc3\x28"}')
    assert isinstance(rejected, Rejected)
    assert "UTF-8" in rejected.error.message


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    rejected = parse_request(b"[" * 100_000 + b"]" * 100_000)
    assert isinstance(rejected, Rejected)
    assert rejected.error.code in (errors.ParseError.CODE, errors.InvalidRequest.CODE)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_parse_request_never_raises_on_arbitrary_bytes(line: bytes) -> None:
    result = parse_request(line)
    assert isinstance(result, Request | Rejected)


def test_response_frames_echo_jsonrpc_only_when_asked() -> None:
    assert orjson.loads(result_frame(1, {"ok": True})) == {"id": 1, "result": {"ok": True}}
    assert orjson.loads(result_frame(1, None, jsonrpc=True)) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": None,
    }
    frame = orjson.loads(error_frame(None, errors.ParseError("bad")))
    assert frame == {"id": None, "error": {"code": -32700, "message": "bad"}}


def test_a_grant_member_is_carried_on_requests_and_notifications() -> None:
    line = b'{"id": 1, "method": "grep", "params": {}, "grant": "grt_0123456789abcdef"}'
    assert parse_request(line) == Request(1, "grep", {}, grant="grt_0123456789abcdef")
    parsed = parse_request(b'{"method": "ping", "grant": "grt_0123456789abcdef"}')
    assert isinstance(parsed, Request)
    assert parsed.notification
    assert parsed.grant == "grt_0123456789abcdef"
    assert parse_request(b'{"id": 1, "method": "ping"}') == Request(1, "ping", {})


@pytest.mark.parametrize("grant", [b"1", b'""', b"null", b'["grt_0123456789abcdef"]'])
def test_a_grant_member_that_is_not_a_non_empty_string_is_rejected(grant: bytes) -> None:
    parsed = parse_request(b'{"id": 7, "method": "ping", "grant": ' + grant + b"}")
    assert isinstance(parsed, Rejected)
    assert parsed.id == 7
    assert parsed.error.code == errors.InvalidRequest.CODE
