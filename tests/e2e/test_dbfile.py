"""The database file is the database: a daemon creates one only at the first start on its
path, refuses every write once the file it opened was moved, replaced or deleted (and
exits non-zero for its supervisor to restart it), and a failed ``reload`` keeps the open
database serving."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.errors import StorageFailure
from tests.e2e.conftest import (
    DEADLINE,
    Daemon,
    Spawn,
    create_db,
    ingest_frame,
    integrity,
    request_frame,
    serve_argv,
    stored_client_ids,
    user_message,
)

LOST = "database file was moved, replaced or deleted; restart"


def _acknowledged(daemon: Daemon, n: int) -> list[str]:
    """Ingest ``n`` messages one request each; their client ids, every one acknowledged."""
    for i in range(n):
        answer = daemon.call(i, "ingest", {"session": "s", "message": user_message(i)})
        assert "result" in answer, answer
    return [user_message(i)["id"] for i in range(n)]


def test_reload_after_the_file_was_moved_away_fails_and_the_open_database_keeps_serving(
    db_path: Path, tmp_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    _acknowledged(daemon, 5)
    db_path.rename(tmp_path / "moved.db")

    refused = daemon.call(10, "reload")["error"]
    assert refused["code"] == StorageFailure.CODE
    assert "moved or deleted" in refused["message"]
    assert str(tmp_path) not in refused["message"]
    assert not db_path.exists()  # no new empty database where the real one was
    info = daemon.call(11, "info")["result"]
    assert (info["conversations"], info["messages"]) == (1, 5)


def test_a_write_after_the_file_was_moved_is_refused_and_the_acknowledged_are_in_the_moved_file(
    db_path: Path, tmp_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path))
    acknowledged = _acknowledged(daemon, 5)
    moved = tmp_path / "moved.db"
    db_path.rename(moved)

    refused = daemon.call(10, "ingest", {"session": "s", "message": user_message(5)})
    assert refused["error"] == {"code": StorageFailure.CODE, "message": LOST}
    assert daemon.wait() != 0  # exits by itself (stdin still open): the supervisor restarts it
    assert stored_client_ids(moved, "s") == acknowledged
    assert integrity(moved) == [("ok",)]
    assert not db_path.exists()


def _unlink(db: Path, tmp_path: Path) -> None:
    db.unlink()


def _replace(db: Path, tmp_path: Path) -> None:
    other = create_db(tmp_path / "other.db")
    os.replace(other, db)


@pytest.mark.parametrize("change", [_unlink, _replace], ids=["deleted", "replaced"])
def test_a_daemon_whose_file_was_deleted_or_replaced_refuses_the_next_write_and_exits_nonzero(
    db_path: Path, tmp_path: Path, spawn: Spawn, change: Callable[[Path, Path], None]
) -> None:
    daemon = spawn(serve_argv(db_path))
    _acknowledged(daemon, 3)
    change(db_path, tmp_path)

    # Two writes in one chunk: each is refused, whichever runs first.
    daemon.send(
        ingest_frame(10, "s", [user_message(3)])
        + request_frame(11, "teach", {"content": "never stored"})
    )
    answers = {frame["id"]: frame for frame in daemon.frames(2)}
    assert answers[10]["error"]["code"] == StorageFailure.CODE
    assert "error" in answers[11], answers[11]
    assert LOST in (answers[10]["error"]["message"], answers[11]["error"]["message"])
    assert daemon.wait() != 0
    if db_path.exists():  # the replacement is untouched by the old daemon's writes
        assert stored_client_ids(db_path, "s") == []
        assert integrity(db_path) == [("ok",)]


def test_brain_serve_never_creates_a_database_where_a_moved_one_left_its_files_directory(
    tmp_path: Path,
) -> None:
    db = create_db(tmp_path / "brain.db")
    db.rename(tmp_path / "elsewhere.db")
    done = subprocess.run(
        serve_argv(db),
        input=b'{"id":1,"method":"ping"}\n',
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode != 0
    assert b"moved or deleted" in done.stderr
    assert not db.exists()
