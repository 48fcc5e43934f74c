"""Wire errors: one rooted tree, each class with a stable ``CODE``.

::

    RPCError                      (abstract root; never sent as itself)
    ├── ParseError          -32700  the line is not JSON, not UTF-8, or too long
    ├── InvalidRequest      -32600  JSON, but not a request object
    ├── MethodNotFound      -32601  no such method
    ├── InvalidParams       -32602  params fail validation (the message names the field)
    ├── InternalError       -32603  a bug or an unexpected failure (details on stderr only)
    ├── NotFound            -32001  an id or session that does not exist
    ├── Conflict            -32002  the request contradicts what is stored
    ├── ScopeDenied         -32003  outside the session's or grant's scope
    ├── BudgetExceeded      -32004  a token or grant budget would be exceeded
    ├── Busy                -32005  the database stayed locked; safe to retry
    ├── ShuttingDown        -32006  the daemon is stopping and takes no new work
    ├── ProviderUnavailable -32007  an embedding or LLM provider failed
    └── StorageFailure      -32008  the database or files directory failed

``ERROR_CODES`` is the table the README's protocol reference is checked
against. Codes are public API: never renumber one.
"""

from __future__ import annotations

from typing import Any, ClassVar


class RPCError(Exception):
    """Root of the wire error tree: a code, a message and optional data."""

    CODE: ClassVar[int] = -32603
    MESSAGE: ClassVar[str] = "error"

    def __init__(self, message: str | None = None, data: dict[str, Any] | None = None) -> None:
        self.message = message or self.MESSAGE
        self.data = data
        self.code = self.CODE
        super().__init__(self.message)

    def to_obj(self) -> dict[str, Any]:
        """The ``error`` member of a response frame."""
        obj: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            obj["data"] = self.data
        return obj


class ParseError(RPCError):
    """The line is not valid JSON (or not UTF-8, or over the size limit)."""

    CODE = -32700
    MESSAGE = "parse error"


class InvalidRequest(RPCError):
    """Valid JSON that is not a request object (not an object, or no method)."""

    CODE = -32600
    MESSAGE = "invalid request"


class MethodNotFound(RPCError):
    """The method does not exist."""

    CODE = -32601
    MESSAGE = "method not found"


class InvalidParams(RPCError):
    """Params fail validation; the message starts with the offending field."""

    CODE = -32602
    MESSAGE = "invalid params"


class InternalError(RPCError):
    """An unexpected failure inside the daemon; the traceback goes to stderr only."""

    CODE = -32603
    MESSAGE = "internal error"


class NotFound(RPCError):
    """The referenced id or session does not exist (or is outside the caller's scope)."""

    CODE = -32001
    MESSAGE = "not found"


class Conflict(RPCError):
    """The request contradicts stored state."""

    CODE = -32002
    MESSAGE = "conflict"


class ScopeDenied(RPCError):
    """The request reaches outside its session's or grant's scope, or the grant is invalid.

    For a request carrying a grant, ``data.reason`` says which: ``unknown``
    (also a malformed id), ``expired``, ``revoked``, ``method`` (not granted,
    or never grantable), ``scope`` (another session or key, a session not
    started yet under the grant's key, or ``all``) or ``suppressed``
    (``include_suppressed`` under a grant).
    """

    CODE = -32003
    MESSAGE = "scope denied"


class BudgetExceeded(RPCError):
    """A token or grant budget would be exceeded.

    For a grant: its ``token_cap`` is already used up (``data``: ``token_cap``,
    ``tokens_used``). The call that crossed the cap was answered; later ones are not.
    """

    CODE = -32004
    MESSAGE = "budget exceeded"


class Busy(RPCError):
    """The database stayed locked by another process; the request changed nothing."""

    CODE = -32005
    MESSAGE = "busy"


class ShuttingDown(RPCError):
    """The daemon is shutting down and accepts no new requests."""

    CODE = -32006
    MESSAGE = "shutting down"


class ProviderUnavailable(RPCError):
    """An embedding or LLM provider failed or its circuit breaker is open."""

    CODE = -32007
    MESSAGE = "provider unavailable"


class StorageFailure(RPCError):
    """The database or the files directory failed (disk full, permissions, corruption)."""

    CODE = -32008
    MESSAGE = "storage failure"


ERROR_TYPES: tuple[type[RPCError], ...] = (
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    NotFound,
    Conflict,
    ScopeDenied,
    BudgetExceeded,
    Busy,
    ShuttingDown,
    ProviderUnavailable,
    StorageFailure,
)

ERROR_CODES: dict[int, type[RPCError]] = {cls.CODE: cls for cls in ERROR_TYPES}
"""Every code the daemon may send, mapped to its class."""


def error_from_obj(obj: Any) -> RPCError:
    """Rebuild a typed error from a response's ``error`` member (used by clients)."""
    if not isinstance(obj, dict):
        return InternalError(f"malformed error object: {obj!r}")
    code = obj.get("code")
    message = obj.get("message")
    data = obj.get("data")
    cls = ERROR_CODES.get(code, RPCError) if isinstance(code, int) else RPCError
    err = cls(
        str(message) if message is not None else None, data if isinstance(data, dict) else None
    )
    if isinstance(code, int):
        err.code = code  # keep an unknown (newer) code as sent
    return err
