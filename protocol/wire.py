"""Request and response frames.

A request is ``{"id": str|int|null, "method": str, "params": object}``; without
an ``id`` member it is a notification and gets no response. ``"jsonrpc":
"2.0"`` is accepted and echoed. A request (or notification) may carry a grant
as a top-level ``"grant": "grt_..."`` member: it then runs only within that
grant (see ``brain.ops.grants``). ``parse_request`` never raises: it returns a
``Request`` or a ``Rejected`` carrying the error and whatever id it could read,
so the caller can always answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson

from protocol.errors import InvalidParams, InvalidRequest, ParseError, RPCError
from protocol.framing import encode_frame

RequestId = str | int | None
MAX_METHOD_LEN: Final = 128
MAX_GRANT_LEN: Final = 64
_MEMBERS: Final = frozenset({"id", "method", "params", "jsonrpc", "grant", "progress"})


@dataclass(frozen=True, slots=True)
class Request:
    """A well-formed request (params not yet validated against the method)."""

    id: RequestId
    method: str
    params: dict[str, Any]
    notification: bool = False
    jsonrpc: bool = False
    grant: str | None = None
    progress: bool = False
    """The client asked for ``progress`` notifications while this request runs."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """A line that is not a valid request: the error to send and the id to send it to."""

    id: RequestId
    error: RPCError
    notification: bool = False
    jsonrpc: bool = False


def parse_request(line: bytes) -> Request | Rejected:
    """Decode one line into a request, or say exactly why it is not one."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        reason = "invalid UTF-8" if _bad_utf8(line) else "invalid JSON"
        return Rejected(None, ParseError(f"{reason}: {exc}"))
    if not isinstance(obj, dict):
        return Rejected(None, InvalidRequest(f"request must be a JSON object, got {_kind(obj)}"))
    jsonrpc = obj.get("jsonrpc") == "2.0"
    has_id = "id" in obj
    raw_id = obj.get("id")
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, str | int)):
        return Rejected(
            None, InvalidRequest("id must be a string, an integer or null"), False, jsonrpc
        )
    request_id: RequestId = raw_id
    notification = not has_id
    # A malformed request is answered even without an id (with id null, as
    # JSON-RPC requires): only a well-formed request without id is a notification.
    if "jsonrpc" in obj and obj["jsonrpc"] != "2.0":
        return Rejected(request_id, InvalidRequest('jsonrpc must be "2.0"'))
    method = obj.get("method")
    if not isinstance(method, str) or not method or len(method) > MAX_METHOD_LEN:
        return Rejected(
            request_id, InvalidRequest("method must be a non-empty string"), False, jsonrpc
        )
    unknown = obj.keys() - _MEMBERS
    if unknown:
        return Rejected(
            request_id,
            InvalidRequest(f"unknown request member(s): {', '.join(sorted(unknown))}"),
            False,
            jsonrpc,
        )
    grant = obj.get("grant")
    if "grant" in obj and (not isinstance(grant, str) or not grant or len(grant) > MAX_GRANT_LEN):
        return Rejected(
            request_id,
            InvalidRequest(f"grant must be a string of 1..{MAX_GRANT_LEN} characters"),
            False,
            jsonrpc,
        )
    progress = obj.get("progress", False)
    if not isinstance(progress, bool):
        return Rejected(
            request_id, InvalidRequest("progress must be true or false"), False, jsonrpc
        )
    params = obj.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return Rejected(
            request_id,
            InvalidParams(f"params: must be an object, got {_kind(params)}"),
            notification,
            jsonrpc,
        )
    return Request(request_id, method, params, notification, jsonrpc, grant, progress)


def result_frame(request_id: RequestId, result: Any, jsonrpc: bool = False) -> bytes:
    """Encode a success response."""
    frame: dict[str, Any] = {"jsonrpc": "2.0"} if jsonrpc else {}
    frame["id"] = request_id
    frame["result"] = result
    return encode_frame(frame)


def error_frame(request_id: RequestId, error: RPCError, jsonrpc: bool = False) -> bytes:
    """Encode an error response."""
    frame: dict[str, Any] = {"jsonrpc": "2.0"} if jsonrpc else {}
    frame["id"] = request_id
    frame["error"] = error.to_obj()
    return encode_frame(frame)


def notification_frame(method: str, params: dict[str, Any]) -> bytes:
    """Encode a daemon-to-client notification (e.g. progress)."""
    return encode_frame({"method": method, "params": params})


def _bad_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _kind(value: Any) -> str:
    return {
        list: "an array",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)
