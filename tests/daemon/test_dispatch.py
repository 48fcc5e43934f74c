"""The exception-to-wire boundary and the handler table."""

from __future__ import annotations

from pathlib import Path

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
        (apsw.LockedError("database table is locked"), wire.Busy),
        (apsw.CorruptError("database disk image is malformed"), wire.StorageFailure),
        (apsw.NotADBError("file is not a database"), wire.StorageFailure),
        (apsw.ConstraintError("UNIQUE constraint failed: messages.id"), wire.Conflict),
        (apsw.SQLError("no such table: messages"), wire.InternalError),
        (engine.PayloadMissing("file_0123456789abcdef"), wire.StorageFailure),
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


def test_a_corrupt_database_is_a_storage_failure_that_says_run_brain_doctor() -> None:
    for exc in (apsw.CorruptError("database disk image is malformed"), apsw.NotADBError("x")):
        err = to_wire(exc)
        assert err.code == -32008
        assert "run brain doctor" in err.message
        assert err.data == {"reason": "corrupt"}


def test_a_constraint_failure_is_a_conflict_that_says_nothing_was_written() -> None:
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(apsw.ConstraintError) as raised:
        conn.execute("INSERT INTO t VALUES (1)")
    err = to_wire(raised.value)
    assert err.code == -32002
    assert "nothing was written" in err.message
    assert err.data == {"reason": "constraint"}
    assert "t.id" not in err.message  # the schema stays private


def test_errors_name_paths_relative_to_the_database_directory(tmp_path: Path) -> None:
    db_dir = tmp_path / "data"
    leak = f"cannot write payload file file_1: [Errno 20] Not a directory: '{db_dir}/b.db-files/x'"
    err = to_wire(engine.StorageError(leak), hide=(db_dir,))
    assert str(tmp_path) not in err.message
    assert "'b.db-files/x'" in err.message
    not_found = to_wire(engine.NotFound(f"no file in {db_dir}", where=str(db_dir / "b.db")))
    assert str(db_dir) in not_found.message  # nothing hidden: kept
    hidden = to_wire(
        engine.NotFound(f"no file in {db_dir}", where=str(db_dir / "b.db")), hide=(db_dir,)
    )
    assert hidden.to_obj() == {"code": -32001, "message": "no file in .", "data": {"where": "b.db"}}


def test_storage_failures_keep_only_the_last_component_of_any_other_absolute_path() -> None:
    err = to_wire(engine.StorageError("cannot read /srv/elsewhere/workspace/notes.md: gone"))
    assert err.message == "cannot read notes.md: gone"
    # A not-found answer echoes the caller's own text, which stays as sent.
    echoed = to_wire(engine.NotFound("no message '/a/b'"))
    assert echoed.message == "no message '/a/b'"
