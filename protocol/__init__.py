"""protocol: the wire contract of the brain daemon.

Request/response frames (``protocol.wire``), NDJSON framing
(``protocol.framing``), the error tree and code table (``protocol.errors``),
method params (``protocol.methods``) and clients that spawn and talk to the
daemon (``protocol.client``). It never imports the engine.

The re-exports resolve on first access (PEP 562), as in ``brain``: the daemon
imports ``protocol.wire`` and ``protocol.framing`` without loading the clients.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from protocol.client import AsyncClient, Client, ClientClosed, daemon_command
    from protocol.errors import ERROR_CODES, ERROR_TYPES, RPCError, error_from_obj
    from protocol.framing import DEFAULT_MAX_LINE, OVERSIZED, LineSplitter, encode_frame
    from protocol.methods import METHODS, IngestParams, Message, MethodSpec, NoParams
    from protocol.wire import Rejected, Request, error_frame, parse_request, result_frame

_WHERE: dict[str, str] = {
    "AsyncClient": "protocol.client",
    "Client": "protocol.client",
    "ClientClosed": "protocol.client",
    "daemon_command": "protocol.client",
    "ERROR_CODES": "protocol.errors",
    "ERROR_TYPES": "protocol.errors",
    "RPCError": "protocol.errors",
    "error_from_obj": "protocol.errors",
    "DEFAULT_MAX_LINE": "protocol.framing",
    "OVERSIZED": "protocol.framing",
    "LineSplitter": "protocol.framing",
    "encode_frame": "protocol.framing",
    "METHODS": "protocol.methods",
    "IngestParams": "protocol.methods",
    "Message": "protocol.methods",
    "MethodSpec": "protocol.methods",
    "NoParams": "protocol.methods",
    "Rejected": "protocol.wire",
    "Request": "protocol.wire",
    "error_frame": "protocol.wire",
    "parse_request": "protocol.wire",
    "result_frame": "protocol.wire",
}
"""Each re-exported name and the module that defines it."""


def __getattr__(name: str) -> Any:
    """Import the module defining ``name`` on first access (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'protocol' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later accesses skip this hook
    return value


__all__ = [
    "DEFAULT_MAX_LINE",
    "ERROR_CODES",
    "ERROR_TYPES",
    "METHODS",
    "OVERSIZED",
    "AsyncClient",
    "Client",
    "ClientClosed",
    "IngestParams",
    "LineSplitter",
    "Message",
    "MethodSpec",
    "NoParams",
    "RPCError",
    "Rejected",
    "Request",
    "daemon_command",
    "encode_frame",
    "error_frame",
    "error_from_obj",
    "parse_request",
    "result_frame",
]
