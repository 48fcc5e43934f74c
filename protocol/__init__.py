"""protocol: the wire contract of the brain daemon.

Request/response frames (``protocol.wire``), NDJSON framing
(``protocol.framing``), the error tree and code table (``protocol.errors``),
method params (``protocol.methods``) and clients that spawn and talk to the
daemon (``protocol.client``). It never imports the engine.
"""

from protocol.client import AsyncClient, Client, ClientClosed, daemon_command
from protocol.errors import ERROR_CODES, ERROR_TYPES, RPCError, error_from_obj
from protocol.framing import DEFAULT_MAX_LINE, OVERSIZED, LineSplitter, encode_frame
from protocol.methods import METHODS, IngestParams, Message, MethodSpec, NoParams
from protocol.wire import Rejected, Request, error_frame, parse_request, result_frame

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
