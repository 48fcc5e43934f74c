"""Schema v21: each message's conversation token in ``messages_fts``, rebuilt on upgrade,
and a process killed during that rebuild leaves the file as it was."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import apsw

from brain import Brain, BrainConfig, GrepOptions
from brain.ops.doctor.runner import doctor
from brain.store.migrations import vectors_int8
from brain.store.schema import MIGRATIONS, SCHEMA_VERSION

_V20 = 20
_WORDS = ("deploy", "budget", "review", "server", "release", "meeting")


def _version_20_database(path: Path, messages: int) -> None:
    """A database as schema v20 wrote it: two interleaved sessions, FTS rows of
    (content, name) written the way v20's ingest wrote them."""
    conn = apsw.Connection(str(path))
    with conn:
        vectors_int8.functions(conn)
        for script in MIGRATIONS[:_V20]:
            conn.execute(script)
        conn.execute(f"PRAGMA user_version = {_V20}")
        for session in ("s", "t"):
            conn.execute(
                "INSERT INTO conversations (session_id, created_at, updated_at) "
                "VALUES (?, 't', 't')",
                (session,),
            )
        for i in range(messages):
            conv = 1 + (i // 50) % 2  # 50-message batches, alternating sessions
            text = f"{_WORDS[i % 6]} {_WORDS[(i * 7) % 6]} note {i}"
            conn.execute(
                "INSERT INTO messages (conversation_id, seq, role, content, content_shape, "
                "token_count, created_at, client_id, replay_hash) "
                "VALUES (?, ?, 'user', ?, 'string', 4, '2026-01-01T00:00:00Z', ?, x'00')",
                (conv, i, text, f"m{i}"),
            )
            conn.execute(
                "INSERT INTO messages_fts (rowid, content, name) VALUES (?, ?, NULL)",
                (conn.last_insert_rowid(), text),
            )
    conn.close()


def _user_version(path: Path) -> int:
    conn = apsw.Connection(str(path))
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def _fts_check(db: Path) -> str:
    return next(c.status for c in doctor(db).checks if c.name == "fts")


def test_a_version_20_database_is_searched_by_conversation_token_after_upgrading(
    tmp_path: Path,
) -> None:
    db = tmp_path / "v20.db"
    _version_20_database(db, 400)
    brain = Brain(db, BrainConfig())
    try:
        tokens = brain.store.execute(
            "SELECT m.conversation_id, count(*) FROM messages_fts f "
            "JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH 'conv : c2' "
            "GROUP BY m.conversation_id"
        )
        assert list(tokens) == [(2, 200)]
        options = GrepOptions("deploy budget", scope="messages", limit=500)
        in_t = brain.grep(options, session="t")
        assert in_t
        assert all(h.session == "t" for h in in_t)
        assert len(in_t) + len(brain.grep(options, session="s")) == len(brain.grep(options))
    finally:
        brain.close()
    assert _fts_check(db) == "ok"


_KILLED_MID_MIGRATION = """
import os, signal, sys
import apsw
import brain.store.schema as schema

real = schema.migrate

def migrate(conn):
    steps = [0]
    def progress():
        steps[0] += 1
        # Inside the index rebuild: it reads the 6,000 rows at ~10 steps each, the
        # statements before it take a few hundred.
        if steps[0] > 20:
            os.kill(os.getpid(), signal.SIGKILL)
        return False
    conn.set_progress_handler(progress, 1_000)
    return real(conn)

schema.migrate = migrate
import brain.store.connection as connection
connection.migrate = migrate
from brain import Brain
Brain(sys.argv[1])
"""


def test_a_process_killed_while_the_index_is_rebuilt_leaves_version_20_and_the_next_open_upgrades(
    tmp_path: Path,
) -> None:
    db = tmp_path / "v20.db"
    _version_20_database(db, 6_000)
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_MIGRATION, str(db)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert _user_version(db) == _V20
    conn = apsw.Connection(str(db))
    try:
        # Untouched: the old two-column index, whole.
        columns = [r[1] for r in conn.execute("PRAGMA table_info(messages_fts)")]
        assert columns == ["content", "name"]
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()
    brain = Brain(db, BrainConfig())
    try:
        assert _user_version(db) == SCHEMA_VERSION
        scoped = brain.grep(GrepOptions("note", scope="messages", limit=10_000), session="s")
        assert len(scoped) == 3_000
    finally:
        brain.close()
    assert _fts_check(db) == "ok"
