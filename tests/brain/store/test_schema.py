"""brain.store.schema: migrations by user_version, idempotent, all-or-nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import pytest

from brain import Brain, BrainConfig, MessageIn, StorageError, Store, open_store
from brain.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate

TABLES = {"meta", "conversations", "messages", "large_files", "message_parts", "messages_fts"}


def _schema_objects(conn: apsw.Connection) -> list[tuple[str, str]]:
    return [
        (str(r[0]), str(r[1]))
        for r in conn.execute(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]


def _user_version(path: Path) -> int:
    conn = apsw.Connection(str(path))
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_schema_version_counts_the_migrations() -> None:
    assert SCHEMA_VERSION == len(MIGRATIONS) >= 1


def test_a_fresh_database_is_migrated_to_the_current_version(store: Store) -> None:
    assert store.schema_version() == SCHEMA_VERSION
    names = {name for _type, name in _schema_objects(store.conn)}
    assert names >= TABLES


def test_migrations_are_idempotent_across_opens(db_path: Path) -> None:
    open_store(db_path).close()
    conn = apsw.Connection(str(db_path))
    first = _schema_objects(conn)
    conn.close()
    open_store(db_path).close()
    store = open_store(db_path)
    try:
        objects = _schema_objects(store.conn)
        assert objects == first
        names = [name for _type, name in objects]
        assert len(names) == len(set(names))
        for table in TABLES:
            assert names.count(table) == 1
        assert store.schema_version() == SCHEMA_VERSION
    finally:
        store.close()


def test_migrate_reports_versions_before_and_after(db_path: Path) -> None:
    conn = apsw.Connection(str(db_path))
    try:
        assert migrate(conn) == (0, SCHEMA_VERSION)
        assert migrate(conn) == (SCHEMA_VERSION, SCHEMA_VERSION)
        assert not conn.in_transaction
    finally:
        conn.close()


def test_a_database_from_a_newer_brain_is_refused(db_path: Path) -> None:
    open_store(db_path).close()
    conn = apsw.Connection(str(db_path))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()

    with pytest.raises(StorageError, match="newer than this brain"):
        open_store(db_path)
    assert _user_version(db_path) == SCHEMA_VERSION + 1


def test_a_failing_migration_leaves_the_database_untouched(db_path: Path) -> None:
    # A table the first migration also creates makes that migration fail half-way.
    conn = apsw.Connection(str(db_path))
    conn.execute("CREATE TABLE large_files (x)")
    conn.close()

    with pytest.raises(StorageError, match="already exists"):
        open_store(db_path)

    conn = apsw.Connection(str(db_path))
    try:
        assert _schema_objects(conn) == [("table", "large_files")]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    finally:
        conn.close()


def test_concurrent_first_opens_migrate_exactly_once(db_path: Path) -> None:
    stores: list[Store] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def opener() -> None:
        try:
            opened = open_store(db_path)
        except BaseException as exc:
            with lock:
                errors.append(exc)
            return
        with lock:
            stores.append(opened)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert len(stores) == 4
        names = [name for _type, name in _schema_objects(stores[0].conn)]
        assert len(names) == len(set(names))
        assert all(s.schema_version() == SCHEMA_VERSION for s in stores)
    finally:
        for s in stores:
            s.close()


def test_message_role_is_constrained_by_the_schema(store: Store) -> None:
    store.execute(
        "INSERT INTO conversations (session_id, created_at, updated_at) VALUES ('s', 't', 't')"
    )
    with pytest.raises(apsw.ConstraintError):
        store.execute(
            "INSERT INTO messages (conversation_id, seq, role, content, content_shape, "
            "token_count, created_at, replay_hash) "
            "VALUES (1, 1, 'robot', 'x', 'string', 1, 't', x'00')"
        )


def test_fts_index_follows_message_updates_and_deletes(store: Store) -> None:
    # Inserts index themselves (brain.lcm.ingest, see the schema's note on
    # savepoints); updates and deletes are kept in step by triggers.
    def matches(word: str) -> list[int]:
        return [
            int(r[0])
            for r in store.execute(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (word,)
            )
        ]

    with store.transaction():
        store.execute(
            "INSERT INTO conversations (session_id, created_at, updated_at) VALUES ('s', 't', 't')"
        )
        store.execute(
            "INSERT INTO messages (conversation_id, seq, role, content, content_shape, "
            "token_count, created_at, replay_hash) "
            "VALUES (1, 1, 'user', 'alpha words', 'string', 3, 't', x'00')"
        )
        store.execute(
            "INSERT INTO messages_fts (rowid, content, conv) VALUES (1, 'alpha words', 'c1')"
        )
    assert matches("alpha") == [1]
    store.execute("UPDATE messages SET content = 'beta words' WHERE id = 1")
    assert matches("alpha") == []
    assert matches("beta") == [1]
    store.execute("DELETE FROM messages WHERE id = 1")
    assert matches("beta") == []
    assert matches("words") == []


def test_a_version_13_databases_nodes_are_searchable_by_keyword_after_migrating(
    db_path: Path,
) -> None:
    conn = apsw.Connection(str(db_path))
    with conn:
        for script in MIGRATIONS[:13]:
            conn.execute(script)
        conn.execute("PRAGMA user_version = 13")
        conn.execute(
            "INSERT INTO nodes (node_id, kind, content, created_at) "
            "VALUES ('nd_old', 'teaching', 'the kestrel cluster runs in Frankfurt', 't')"
        )
    conn.close()
    engine = Brain(db_path, BrainConfig())
    try:
        found = engine.store.execute(
            "SELECT n.node_id FROM nodes_fts JOIN nodes n ON n.id = nodes_fts.rowid "
            "WHERE nodes_fts MATCH 'kestrel'"
        )
        assert [r[0] for r in found] == ["nd_old"]
    finally:
        engine.close()


def test_a_version_11_database_gains_the_message_extra_column(db_path: Path) -> None:
    conn = apsw.Connection(str(db_path))
    with conn:
        for script in MIGRATIONS[:11]:
            conn.execute(script)
        conn.execute("PRAGMA user_version = 11")
        conn.execute(
            "INSERT INTO conversations (session_id, created_at, updated_at) VALUES ('s', 't', 't')"
        )
        conn.execute(
            "INSERT INTO messages (conversation_id, seq, role, content, content_shape, "
            "token_count, created_at, client_id, replay_hash) "
            "VALUES (1, 1, 'user', 'before', 'string', 2, 't', 'old', x'00')"
        )
    conn.close()
    engine = Brain(db_path, BrainConfig())
    try:
        assert engine.get_message("s", "old") == {"id": "old", "role": "user", "content": "before"}
        kept = engine.ingest("s", [MessageIn("assistant", "x", extra={"annotations": []})])
        assert engine.get_message("s", kept.messages[0].id)["annotations"] == []
    finally:
        engine.close()
