"""brain.store.connection: open_store's setup steps, the nestable transaction, the tracer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from brain import (
    Brain,
    BrainConfig,
    DatabaseFileLost,
    DatabaseMissing,
    MessageIn,
    StorageError,
    Store,
    StoreBusy,
    open_store,
)
from brain.store.connection import SETUP_STEPS, files_dir_for


class Boom(Exception):
    """Raised by tests to force a rollback."""


def _fails(body: Callable[[], object]) -> None:
    """Run ``body`` and check that the Boom it raises gets through the transaction."""
    with pytest.raises(Boom):
        body()


def _rows(store: Store) -> list[str]:
    return [str(r[0]) for r in store.execute("SELECT value FROM meta ORDER BY key")]


def _put(store: Store, key: str) -> None:
    store.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, key))


# -- open_store ---------------------------------------------------------------


def test_open_store_names_its_setup_steps_in_order() -> None:
    assert [name for name, _ in SETUP_STEPS] == [
        "busy_timeout",
        "auto_vacuum",
        "wal",
        "synchronous",
        "foreign_keys",
        "no_double_quoted_strings",
        "journal_size_limit",
        "sqlite_vec",
        "fts_functions",
    ]


def test_open_store_applies_every_setup_step(db_path: Path) -> None:
    store = open_store(db_path, BrainConfig(busy_timeout_ms=1234, synchronous="NORMAL"))
    try:
        assert store.scalar("PRAGMA journal_mode") == "wal"
        assert store.scalar("PRAGMA foreign_keys") == 1
        assert store.waiting.timeout_s == 1.234  # its busy handler's (PRAGMA busy_timeout: 0)
        assert store.scalar("PRAGMA synchronous") == 1  # NORMAL
        assert str(store.scalar("SELECT vec_version()")).startswith("v")
        assert store.scalar("PRAGMA journal_size_limit") == 4 * 1024 * 1024
        with pytest.raises(apsw.SQLError, match="no such column"):
            store.execute('SELECT "not_a_column"')  # double quotes mean identifiers only
    finally:
        store.close()


def test_default_config_uses_full_synchronous_and_five_second_busy_timeout(db_path: Path) -> None:
    store = open_store(db_path)
    try:
        assert store.scalar("PRAGMA synchronous") == 2  # FULL
        assert store.waiting.timeout_s == 5.0
    finally:
        store.close()


def test_every_connection_gets_its_own_setup(db_path: Path) -> None:
    first = open_store(db_path, BrainConfig(busy_timeout_ms=100))
    second = open_store(db_path, BrainConfig(busy_timeout_ms=200))
    try:
        assert first.waiting.timeout_s == 0.1
        assert second.waiting.timeout_s == 0.2
        assert second.scalar("PRAGMA foreign_keys") == 1
        assert str(second.scalar("SELECT vec_version()")).startswith("v")
    finally:
        first.close()
        second.close()


def test_open_store_creates_parent_directory_and_files_directory(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "memory.db"
    store = open_store(path)
    try:
        assert path.is_file()
        assert (
            store.files_dir == files_dir_for(path) == tmp_path / "deep" / "er" / "memory.db-files"
        )
        assert store.files_dir.is_dir()
        assert store.path == path
    finally:
        store.close()


def test_open_store_on_a_directory_raises_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "a-directory.db"
    path.mkdir()
    with pytest.raises(StorageError, match="cannot open database"):
        open_store(path)


def test_open_store_on_a_file_that_is_not_a_database_raises_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 300)
    with pytest.raises(StorageError, match="not a database"):
        open_store(path)
    assert path.read_bytes() == b"this is not sqlite" * 300


def test_foreign_keys_are_enforced(store: Store) -> None:
    with pytest.raises(apsw.ConstraintError):
        store.execute(
            "INSERT INTO messages (conversation_id, seq, role, content, content_shape, "
            "token_count, created_at, replay_hash) VALUES (999, 1, 'user', 'x', 'string', 1, "
            "'2024-01-01T00:00:00.000Z', x'00')"
        )


def test_close_twice_is_safe(db_path: Path) -> None:
    store = open_store(db_path)
    store.close()
    store.close()
    with pytest.raises(apsw.ConnectionClosedError):
        store.execute("SELECT 1")


def test_open_store_without_create_refuses_a_missing_file_and_creates_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sub" / "brain.db"
    with pytest.raises(DatabaseMissing, match="does not exist"):
        open_store(db, create=False)
    assert not (tmp_path / "sub").exists()


def test_open_store_never_creates_a_database_where_a_moved_one_left_its_files_directory(
    tmp_path: Path,
) -> None:
    db = tmp_path / "brain.db"
    open_store(db).close()
    db.rename(tmp_path / "moved.db")
    with pytest.raises(DatabaseMissing, match="moved or deleted"):
        open_store(db)
    assert not db.exists()


def test_a_first_open_that_another_process_beats_to_creating_the_file_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race of two first starts: our open fails (no file yet), then the other
    # process creates the database before we look whether it exists.
    db = tmp_path / "brain.db"
    exists = Path.exists
    raced: list[bool] = []

    def created_meanwhile(self: Path, **kwargs: Any) -> bool:
        if self == db and not raced:
            raced.append(True)
            monkeypatch.undo()  # the other process opens with the real check
            open_store(db).close()
        return exists(self, **kwargs)

    monkeypatch.setattr(Path, "exists", created_meanwhile)
    store = open_store(db)
    try:
        assert store.schema_version() > 0
    finally:
        store.close()


# -- the file under the store ---------------------------------------------------------


def test_a_commit_after_the_file_was_moved_is_refused_and_so_is_every_later_write(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    with store.transaction():
        _put(store, "before")
    db_path.rename(tmp_path / "moved.db")
    with pytest.raises(DatabaseFileLost), store.transaction():
        _put(store, "after")
    db_path.touch()  # even with some file back at the path, no write goes in again
    with pytest.raises(DatabaseFileLost), store.transaction():
        _put(store, "later")
    assert _rows(store) == ["before"]  # reads go on, from the file it opened


def test_a_file_replaced_at_the_path_is_not_the_opened_database(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    open_store(tmp_path / "other.db").close()
    (tmp_path / "other.db").replace(db_path)
    assert not store.at_path()
    with pytest.raises(DatabaseFileLost), store.transaction():
        _put(store, "x")


# -- transactions ---------------------------------------------------------------


def test_transaction_commits_when_the_block_ends(store: Store, db_path: Path) -> None:
    with store.transaction():
        _put(store, "a")
        _put(store, "b")
    assert not store.conn.in_transaction
    other = open_store(db_path)
    try:
        assert _rows(other) == ["a", "b"]
    finally:
        other.close()


def test_transaction_rolls_back_and_reraises_on_exception(store: Store) -> None:
    def body() -> None:
        with store.transaction():
            _put(store, "a")
            raise Boom

    _fails(body)
    assert _rows(store) == []
    assert not store.conn.in_transaction


def test_transaction_holds_the_write_lock_from_the_start(store: Store, db_path: Path) -> None:
    other = open_store(db_path, BrainConfig(busy_timeout_ms=20))
    try:
        with store.transaction():  # BEGIN IMMEDIATE: no write yet, lock already held
            with pytest.raises(StoreBusy), other.transaction():
                pass
            assert not other.conn.in_transaction
    finally:
        other.close()


def test_a_batch_statement_blocked_by_another_writer_is_store_busy(
    store: Store, db_path: Path
) -> None:
    # Callers batch through the store, not its connection, so a lock timeout
    # surfaces as the engine's StoreBusy, not apsw's BusyError.
    other = open_store(db_path, BrainConfig(busy_timeout_ms=20))
    try:
        with store.transaction():
            with pytest.raises(StoreBusy):
                other.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [("batch_a", "1")])
            store.execute("INSERT INTO meta (key, value) VALUES ('mine', '1')")
    finally:
        other.close()
    assert store.scalar("SELECT count(*) FROM meta WHERE key = 'batch_a'") == 0


def test_the_store_reports_inserted_rowids_and_changed_rows(store: Store) -> None:
    store.execute("CREATE TABLE t (v TEXT)")
    before = store.total_changes()
    store.executemany("INSERT INTO t (v) VALUES (?)", [("a",), ("b",)])
    assert store.total_changes() - before == 2
    assert store.last_rowid() == store.scalar("SELECT rowid FROM t WHERE v = 'b'")
    store.execute("UPDATE t SET v = 'c'")
    assert store.changes() == 2


def test_nested_rollback_undoes_only_the_inner_savepoint(store: Store) -> None:
    def inner() -> None:
        with store.transaction():
            _put(store, "inner")
            raise Boom

    with store.transaction():
        _put(store, "outer-before")
        _fails(inner)
        _put(store, "outer-after")
    assert _rows(store) == ["outer-after", "outer-before"]


def test_nested_commit_is_undone_when_the_outer_rolls_back(store: Store) -> None:
    def body() -> None:
        with store.transaction():
            with store.transaction():
                _put(store, "inner")
            assert _rows(store) == ["inner"]
            raise Boom

    _fails(body)
    assert _rows(store) == []


def test_three_levels_roll_back_independently(store: Store) -> None:
    def third() -> None:
        with store.transaction():
            _put(store, "3")
            raise Boom

    with store.transaction():
        _put(store, "1")
        with store.transaction():
            _put(store, "2")
            _fails(third)
            with store.transaction():
                _put(store, "4")
    assert _rows(store) == ["1", "2", "4"]


def test_a_store_is_reusable_after_a_rollback(store: Store) -> None:
    def body() -> None:
        with store.transaction():
            _put(store, "a")
            raise Boom

    _fails(body)
    with store.transaction():
        _put(store, "a")
    assert _rows(store) == ["a"]


def test_rollback_runs_undo_hooks_newest_first(store: Store) -> None:
    ran: list[str] = []

    def body() -> None:
        with store.transaction() as txn:
            txn.on_rollback(lambda: ran.append("first"))
            txn.on_rollback(lambda: ran.append("second"))
            raise Boom

    _fails(body)
    assert ran == ["second", "first"]


def test_commit_does_not_run_undo_hooks(store: Store) -> None:
    ran: list[str] = []
    with store.transaction() as outer:
        outer.on_rollback(lambda: ran.append("outer"))
        with store.transaction() as inner:
            inner.on_rollback(lambda: ran.append("inner"))
    assert ran == []


def test_inner_rollback_runs_only_inner_hooks(store: Store) -> None:
    ran: list[str] = []

    def inner() -> None:
        with store.transaction() as txn:
            txn.on_rollback(lambda: ran.append("inner"))
            raise Boom

    with store.transaction() as outer:
        outer.on_rollback(lambda: ran.append("outer"))
        _fails(inner)
        assert ran == ["inner"]
    assert ran == ["inner"]


def test_hooks_of_a_committed_inner_level_run_when_the_outer_rolls_back(store: Store) -> None:
    ran: list[str] = []

    def body() -> None:
        with store.transaction() as outer:
            outer.on_rollback(lambda: ran.append("outer"))
            with store.transaction() as inner:
                inner.on_rollback(lambda: ran.append("inner"))
            raise Boom

    _fails(body)
    assert ran == ["inner", "outer"]  # newest first, across levels


def test_hooks_of_a_rolled_back_inner_level_run_once_even_if_the_outer_rolls_back(
    store: Store,
) -> None:
    ran: list[str] = []

    def inner() -> None:
        with store.transaction() as txn:
            txn.on_rollback(lambda: ran.append("inner"))
            raise Boom

    def outer() -> None:
        with store.transaction():
            _fails(inner)
            raise Boom

    _fails(outer)
    assert ran == ["inner"]


def test_a_failing_undo_hook_does_not_stop_the_others_or_mask_the_error(store: Store) -> None:
    ran: list[str] = []

    def broken() -> None:
        raise OSError("undo failed")

    def body() -> None:
        with store.transaction() as txn:
            txn.on_rollback(lambda: ran.append("first"))
            txn.on_rollback(broken)
            _put(store, "a")
            raise Boom

    _fails(body)
    assert ran == ["first"]
    assert _rows(store) == []


def test_a_failed_statement_inside_a_savepoint_leaves_the_outer_writes(store: Store) -> None:
    with store.transaction():
        _put(store, "a")
        with pytest.raises(apsw.ConstraintError), store.transaction():
            _put(store, "a")  # primary key violation
    assert _rows(store) == ["a"]


# -- tracer, versions, checkpoint --------------------------------------------------


def test_tracer_sees_each_statement_with_its_bindings(store: Store) -> None:
    seen: list[tuple[str, Any]] = []
    store.set_tracer(lambda sql, bindings: seen.append((sql, bindings)))
    with store.transaction():
        _put(store, "k")
    assert seen == [
        ("BEGIN IMMEDIATE", None),
        ("INSERT INTO meta (key, value) VALUES (?, ?)", ("k", "k")),
        ("COMMIT", None),
    ]


def test_removing_the_tracer_stops_tracing(store: Store) -> None:
    seen: list[str] = []
    store.set_tracer(lambda sql, _bindings: seen.append(sql))
    store.execute("SELECT 1")
    store.set_tracer(None)
    store.execute("SELECT 2")
    assert seen == ["SELECT 1"]


def test_data_version_changes_when_another_connection_commits(store: Store, db_path: Path) -> None:
    before = store.data_version()
    other = open_store(db_path)
    try:
        with other.transaction():
            _put(other, "from-other")
    finally:
        other.close()
    assert store.data_version() != before


def test_data_version_does_not_change_for_our_own_commits(store: Store) -> None:
    before = store.data_version()
    with store.transaction():
        _put(store, "mine")
    assert store.data_version() == before


def test_checkpoint_moves_every_wal_frame_into_the_database(store: Store) -> None:
    with store.transaction():
        _put(store, "a")
    frames, done = store.checkpoint()
    assert frames > 0
    assert done == frames


def test_opening_a_store_leaves_payloads_queued_for_indexing_to_the_engine(db_path: Path) -> None:
    brain = Brain(db_path, BrainConfig(large_payload_tokens=100))
    brain.ingest("s", [MessageIn("tool", "zanzibarite " * 200, client_id="t", tool_call_id="c")])
    brain.store.execute("UPDATE files_index SET state = 'pending'")
    brain.close()
    store = open_store(db_path, create=False)
    try:
        assert store.scalar("SELECT state FROM files_index") == "pending"
    finally:
        store.close()
    again = Brain(db_path, BrainConfig(large_payload_tokens=100))
    try:
        assert again.store.scalar("SELECT state FROM files_index") == "text"
    finally:
        again.close()
