"""The engine facade: one ``Brain`` per database, safe to call from many threads.

Callers (the daemon's worker threads, ``brain call``, scripts) go through this
class; it owns the store and serialises access to it with a lock, because an
apsw connection must not be used by two threads at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.config import BrainConfig
from brain.content import MessageIn, restore
from brain.errors import NotFound
from brain.files import read_file, stray_files
from brain.ingest import GENERATED_ID, IngestResult, ingest
from brain.store import Store, open_store
from brain.version import __version__


@dataclass(frozen=True, slots=True)
class Info:
    """Counts and identity of an open database."""

    version: str
    schema_version: int
    db: str
    conversations: int
    messages: int
    summaries: int
    nodes: int
    edges: int
    large_files: int
    db_bytes: int


@dataclass(frozen=True, slots=True)
class SaveResult:
    """What a save did: WAL frames before and checkpointed, and how long it took."""

    wal_frames: int
    checkpointed_frames: int
    took_ms: float


class Brain:
    """An open memory database."""

    def __init__(self, path: str | Path, config: BrainConfig | None = None) -> None:
        self.config = config or BrainConfig()
        self._lock = threading.RLock()
        self._store = open_store(path, self.config)
        self.path = self._store.path
        self._sweep_stray_files()

    @property
    def store(self) -> Store:
        """The underlying store (callers must not share it across threads)."""
        return self._store

    # -- writes -------------------------------------------------------------

    def ingest(
        self,
        session: str,
        messages: Sequence[MessageIn],
        *,
        session_key: str | None = None,
        field: str = "messages",
        batch: bool = True,
    ) -> IngestResult:
        """Append messages to a session; see ``brain.ingest.ingest``."""
        with self._lock:
            return ingest(
                self._store, session, messages, session_key=session_key, field=field, batch=batch
            )

    # -- reads --------------------------------------------------------------

    def info(self) -> Info:
        """Counts of what is stored (always read fresh, so other processes' commits show)."""
        with self._lock:
            store = self._store
            row = store.one(
                "SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages), "
                "(SELECT count(*) FROM large_files)"
            )
            assert row is not None
            page_count = int(store.scalar("PRAGMA page_count"))
            page_size = int(store.scalar("PRAGMA page_size"))
            return Info(
                version=__version__,
                schema_version=store.schema_version(),
                db=str(self.path),
                conversations=int(row[0]),
                messages=int(row[1]),
                summaries=0,
                nodes=0,
                edges=0,
                large_files=int(row[2]),
                db_bytes=page_count * page_size,
            )

    def get_message(self, session: str, message_id: str) -> dict[str, Any]:
        """The message exactly as the client sent it (payload files read back)."""
        with self._lock:
            store = self._store
            row = store.one(
                "SELECT m.id, m.role, m.name, m.content, m.content_shape FROM messages m "
                "JOIN conversations c ON c.id = m.conversation_id "
                "WHERE c.session_id = ? AND m.client_id = ?",
                (session, message_id),
            )
            generated = GENERATED_ID.fullmatch(message_id)
            if row is None and generated:
                row = store.one(
                    "SELECT m.id, m.role, m.name, m.content, m.content_shape FROM messages m "
                    "JOIN conversations c ON c.id = m.conversation_id "
                    "WHERE c.session_id = ? AND m.id = ? AND m.client_id IS NULL",
                    (session, int(generated.group(1))),
                )
            if row is None:
                raise NotFound(f"no message {message_id!r} in session {session!r}")
            parts = [
                (str(p[0]), str(p[1]), p[2], p[3], p[4])
                for p in store.execute(
                    "SELECT kind, origin, tool_call_id, block, file_id FROM message_parts "
                    "WHERE message_id = ? ORDER BY ordinal",
                    (row[0],),
                )
            ]
            files_dir = store.files_dir
            message = restore(
                str(row[1]),
                row[2],
                str(row[3]),
                str(row[4]),
                parts,
                lambda file_id: read_file(files_dir, file_id),
            )
            message["id"] = message_id
            return message

    # -- lifecycle ----------------------------------------------------------

    def save(self) -> SaveResult:
        """Make everything durable in the main file: checkpoint the WAL.

        Every acknowledged write is already committed (durable in the WAL);
        saving moves it into the database file so the WAL stays small.
        """
        started = time.perf_counter()
        with self._lock:
            frames, done = self._store.checkpoint()
        return SaveResult(frames, done, (time.perf_counter() - started) * 1000)

    def reload(self) -> None:
        """Close and reopen the database, rebuilding any in-memory state from disk."""
        with self._lock:
            self._store.close()
            self._store = open_store(self.path, self.config)

    def close(self) -> None:
        """Refresh planner statistics, checkpoint and close; safe to call twice."""
        with self._lock:
            with contextlib.suppress(Exception):
                # SQLite's advice: run optimize before closing a long-lived connection.
                self._store.execute("PRAGMA optimize")
                self._store.checkpoint()
            self._store.close()

    def _sweep_stray_files(self) -> None:
        """Remove payload files left by a write that never committed (a killed process)."""
        store = self._store
        known = {str(r[0]) for r in store.execute("SELECT file_id FROM large_files")}
        for path in stray_files(store.files_dir, known, self.config.orphan_file_grace_s):
            with contextlib.suppress(OSError):
                path.unlink()
