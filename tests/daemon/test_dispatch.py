"""The exception-to-wire boundary and the handler table."""

from __future__ import annotations

import apsw
import pytest

import brain.errors as engine
from daemon.dispatch import to_wire
from daemon.handlers import HANDLERS
from protocol import errors as wire
from protocol.methods import METHODS


def test_the_daemon_implements_exactly_the_protocol_methods() -> None:
    assert set(HANDLERS) == set(METHODS)


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (engine.NotFound("no such message"), wire.NotFound),
        (engine.Conflict("taken"), wire.Conflict),
        (engine.StoreBusy(), wire.Busy),
        (engine.StorageError("disk"), wire.StorageFailure),
        (apsw.BusyError("database is locked"), wire.Busy),
        (apsw.FullError("database or disk is full"), wire.StorageFailure),
        (OSError(28, "No space left on device"), wire.StorageFailure),
        (wire.ScopeDenied("nope"), wire.ScopeDenied),
        (KeyError("boom"), wire.InternalError),
    ],
)
def test_exceptions_map_to_stable_codes(exc: Exception, cls: type[wire.RPCError]) -> None:
    assert type(to_wire(exc)) is cls


def test_invalid_input_becomes_invalid_params_naming_the_params_field() -> None:
    err = to_wire(engine.InvalidInput("messages[2].created_at", "must be an ISO-8601 timestamp"))
    assert isinstance(err, wire.InvalidParams)
    assert err.message == "params.messages[2].created_at: must be an ISO-8601 timestamp"
    assert err.data == {"field": "params.messages[2].created_at"}


def test_an_internal_error_hides_the_exception_text() -> None:
    err = to_wire(RuntimeError("password=hunter2"))
    assert err.to_obj() == {"code": -32603, "message": "internal error"}
