"""Retention: keep a database within an age and a size by dropping derived data first.

What goes, in this order (each step in batches of its own short transactions, the
write lock released between them, so requests go on during a pass):

1. **Query traces** past ``trace_max_age_days`` or ``trace_max_count`` (the graph's
   own retention, also applied by ``maintain``'s prune).
2. **Vectors of old messages** (``RetentionConfig.max_age_days``, per session key
   ``key_max_age_days``): the largest derived data that can be made again (by
   embedding) from the message. Such a
   message is no longer found by semantic grep; full-text and regex grep, hybrid
   grep's text half, summaries, ``describe``, ``expand`` and the message itself
   are unchanged. A session's dropped prefix is recorded (``retention``, through
   a ``seq``) so nothing queues those messages again.
3. **Vectors of the oldest messages** while the used bytes pass ``max_bytes``,
   oldest message first, whatever their age.
4. **Whole sessions**, only with ``delete_messages``: a session whose newest
   message is past its age, then (over ``max_bytes``) the sessions written least
   recently. Everything of the session goes (messages, parts, payload files,
   summaries, their graph nodes, vectors, entity mentions, context); its name stays,
   as an empty session.

Kept: summaries and their vectors (the DAG a host reads: dropping one loses what
it condensed), full-text indexes (what finds an old message: the lossless path),
rollups (small, read by ``recent``), payload files, the graph. Messages are never
deleted unless ``delete_messages`` says so.

Then the freed pages go back to the file system: ``PRAGMA incremental_vacuum`` in
steps of ``VACUUM_STEP_PAGES`` (each a transaction of its own), and a checkpoint,
which shrinks the file in WAL mode. A database made before schema v20 has no
page map (``auto_vacuum`` NONE): its freed pages are reused by later writes, and
``brain doctor --repair`` switches it once (a VACUUM).

Tested in tests/brain/ops/test_retention.py and, through the daemon,
tests/e2e/test_retention_daemon.py and tests/reliability/test_retention_kill.py.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

import orjson

from brain.clock import iso
from brain.config import BrainConfig
from brain.ops.info import AUTO_VACUUM
from brain.store.access import Access
from brain.store.connection import Store

BATCH: Final = 500
"""Messages whose vectors one transaction drops (~0.5 MiB of pages)."""
VACUUM_STEP_PAGES: Final = 128
"""Pages one ``incremental_vacuum`` step hands back (512 KiB at 4 KiB pages)."""
REST_SHARE: Final = 1.0
"""After each batch the pass rests this many times as long as the batch held the write
lock (at most ``REST_MAX_S``): the engine's lock is not fair, and a pass that took it
back at once kept a waiting ``ingest`` behind several batches (232 ms at 100k
messages). Resting as long as it worked leaves requests at least half the lock."""
REST_MAX_S: Final = 0.05


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What one pass did.

    ``file_bytes_before``/``file_bytes_after``: the database file's size;
    ``used_bytes``: pages in use at the end (what ``max_bytes`` limits);
    ``over_limit``: still above ``max_bytes`` with nothing more it may drop;
    ``stopped``: cut short by the caller (a stopping daemon), the rest left to the
    next pass.
    """

    vectors_dropped: int
    traces_dropped: int
    sessions_deleted: int
    messages_deleted: int
    pages_vacuumed: int
    file_bytes_before: int
    file_bytes_after: int
    used_bytes: int
    over_limit: bool
    stopped: bool
    auto_vacuum: str
    took_ms: float


def used_bytes(store: Store) -> int:
    """Bytes of pages in use: the file less its free pages (what ``max_bytes`` limits)."""
    pages = int(store.scalar("PRAGMA page_count")) - int(store.scalar("PRAGMA freelist_count"))
    return pages * int(store.scalar("PRAGMA page_size"))


def _file_bytes(store: Store) -> int:
    return int(store.scalar("PRAGMA page_count")) * int(store.scalar("PRAGMA page_size"))


def _add(store: Store, name: str, n: int) -> None:
    if n:
        store.execute(
            "INSERT INTO retention_totals (name, n) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET n = n + excluded.n",
            (name, n),
        )


class _Pass:
    """One pass's state: the engine's access, the limits, the clock and the stop flag."""

    def __init__(
        self,
        access: Access,
        config: BrainConfig,
        now: datetime,
        stop: Callable[[], bool],
    ) -> None:
        self.access = access
        self.config = config
        self.limits = config.retention
        self.now = now
        self.stop = stop
        self.stopped = False
        self.vectors = 0
        self.traces = 0
        self.deleted_sessions = 0
        self.messages = 0
        self.message_vectors_changed = False

    def more(self) -> bool:
        """Whether to go on (false once the caller asked to stop)."""
        if self.stop():
            self.stopped = True
        return not self.stopped

    @contextlib.contextmanager
    def batch(self) -> Iterator[Store]:
        """One short write transaction under the engine's lock, then a rest (``REST_SHARE``)."""
        started = time.perf_counter()
        with self.access.locked() as store, store.transaction():
            yield store
        time.sleep(min(REST_MAX_S, (time.perf_counter() - started) * REST_SHARE))

    def cutoff(self, days: float) -> str:
        return iso(self.now - timedelta(days=days))

    # -- 1. traces ---------------------------------------------------------------

    def traces_step(self) -> None:
        from brain.graph.traces import expired_traces

        cutoff = self.cutoff(self.config.trace_max_age_days)
        while self.more():
            with self.batch() as store:
                expired = expired_traces(store, cutoff, self.config.trace_max_count)[:BATCH]
                if not expired:
                    return
                store.execute(
                    "DELETE FROM traces WHERE id IN (SELECT value FROM json_each(?))",
                    (orjson.dumps(expired),),
                )
                _add(store, "traces_dropped", len(expired))
            self.traces += len(expired)

    # -- 2. vectors of old messages ----------------------------------------------

    def session_marks(self) -> list[tuple[int, str | None, int]]:
        """Every session: id, key, and the seq its vectors are dropped through (-1: none)."""
        with self.access.reading() as store:
            return [
                (int(cid), None if key is None else str(key), int(mark))
                for cid, key, mark in store.execute(
                    "SELECT c.id, c.session_key, coalesce(r.vectors_through_seq, -1) "
                    "FROM conversations c LEFT JOIN retention r ON r.conversation_id = c.id "
                    "ORDER BY c.id"
                )
            ]

    def age_step(self) -> None:
        for cid, key, first_mark in self.session_marks():
            mark = first_mark
            days = self.limits.age_days(key)
            if not days or not self.more():
                continue
            with self.access.reading() as store:
                through = store.scalar(
                    "SELECT max(seq) FROM messages WHERE conversation_id = ? AND seq > ? "
                    "AND created_at < ?",
                    (cid, mark, self.cutoff(days)),
                )
            if through is None:
                continue
            while self.more():
                with self.batch() as store:
                    rows = list(
                        store.execute(
                            "SELECT id, seq FROM messages WHERE conversation_id = ? AND seq > ? "
                            "AND seq <= ? ORDER BY seq LIMIT ?",
                            (cid, mark, int(through), BATCH),
                        )
                    )
                    if not rows:
                        break
                    mark = int(rows[-1][1])
                    self.drop_vectors(store, [int(r[0]) for r in rows], {cid: mark})

    def drop_vectors(self, store: Store, message_ids: list[int], marks: dict[int, int]) -> None:
        """Drop the vectors (and queue rows) of ``message_ids``; move each session's mark."""
        from brain.vectors.writes import dequeue
        from brain.vectors.writes import drop_vectors as drop

        dropped = drop(store, "message", message_ids)
        dequeue(store, "message", message_ids)
        store.executemany(
            "INSERT INTO retention (conversation_id, vectors_through_seq) VALUES (?, ?) "
            "ON CONFLICT (conversation_id) DO UPDATE SET vectors_through_seq = "
            "max(vectors_through_seq, excluded.vectors_through_seq)",
            list(marks.items()),
        )
        _add(store, "vectors_dropped", dropped)
        self.vectors += dropped
        self.message_vectors_changed = self.message_vectors_changed or dropped > 0

    # -- 3. vectors of the oldest messages, over max_bytes -----------------------

    def over(self) -> bool:
        if not self.limits.max_bytes:
            return False
        with self.access.reading() as store:
            return used_bytes(store) > self.limits.max_bytes

    def bytes_step(self) -> None:
        """Oldest messages first (by id: a session's ids rise with its seqs, so each
        session loses a prefix), skipping what earlier passes dropped."""
        with self.access.reading() as store:
            cursor = int(
                store.scalar("SELECT n FROM retention_totals WHERE name = 'bytes_cursor'") or 0
            )
        while self.over() and self.more():
            with self.batch() as store:
                rows = list(
                    store.execute(
                        "SELECT id, conversation_id, seq FROM messages WHERE id > ? "
                        "ORDER BY id LIMIT ?",
                        (cursor, BATCH),
                    )
                )
                if not rows:
                    return
                marks: dict[int, int] = {}
                for _id, cid, seq in rows:
                    marks[int(cid)] = max(marks.get(int(cid), -1), int(seq))
                self.drop_vectors(store, [int(r[0]) for r in rows], marks)
                cursor = int(rows[-1][0])
                store.execute(
                    "INSERT INTO retention_totals (name, n) VALUES ('bytes_cursor', ?) "
                    "ON CONFLICT (name) DO UPDATE SET n = excluded.n",
                    (cursor,),
                )

    # -- 4. whole sessions (delete_messages only) ---------------------------------

    def delete_step(self) -> None:
        if not self.limits.delete_messages:
            return
        for cid, key, _mark in self.session_marks():
            days = self.limits.age_days(key)
            if not days or not self.more():
                continue
            with self.access.reading() as store:
                newest = store.scalar(
                    "SELECT max(created_at) FROM messages WHERE conversation_id = ?", (cid,)
                )
            if newest is not None and str(newest) < self.cutoff(days):
                self.delete_session(cid)
        while self.over() and self.more():
            with self.access.reading() as store:
                oldest = store.scalar(
                    "SELECT conversation_id FROM messages GROUP BY conversation_id "
                    "ORDER BY max(id) LIMIT 1"
                )
            if oldest is None:
                return
            self.delete_session(int(oldest))

    def delete_session(self, cid: int) -> None:
        """Delete everything a session holds, in one transaction; its name stays."""
        from brain.graph.nodes import bump_epoch
        from brain.payloads.files import remove_file

        with self.batch() as store:
            summaries = "SELECT id FROM summaries WHERE conversation_id = ?"
            messages = "SELECT id FROM messages WHERE conversation_id = ?"
            files = [
                str(r[0])
                for r in store.execute(
                    "SELECT file_id FROM large_files WHERE conversation_id = ?", (cid,)
                )
            ]
            n_messages = int(store.scalar(f"SELECT count(*) FROM ({messages})", (cid,)))  # noqa: S608
            # Rollups holding one of its leaves go, their other leaves queued to be made again.
            touched = f"SELECT rollup_id FROM rollup_sources WHERE summary_id IN ({summaries})"  # noqa: S608
            store.execute(
                "INSERT OR IGNORE INTO rollup_backlog (summary_id) SELECT summary_id "  # noqa: S608
                f"FROM rollup_sources WHERE rollup_id IN ({touched}) "
                f"AND summary_id NOT IN ({summaries})",
                (cid, cid),
            )
            store.execute(f"DELETE FROM rollups WHERE id IN ({touched})", (cid,))  # noqa: S608
            store.execute(f"DELETE FROM rollup_backlog WHERE summary_id IN ({summaries})", (cid,))  # noqa: S608
            had_nodes = store.scalar(
                f"SELECT count(*) FROM nodes WHERE summary_id IN ({summaries})",  # noqa: S608
                (cid,),
            )
            store.execute(f"DELETE FROM nodes WHERE summary_id IN ({summaries})", (cid,))  # noqa: S608
            store.execute(
                "DELETE FROM vectors WHERE kind IN ('message', 'summary') AND conversation_id = ?",
                (cid,),
            )
            store.execute(
                f"DELETE FROM embed_queue WHERE kind = 'message' AND row_id IN ({messages})",  # noqa: S608
                (cid,),
            )
            store.execute(
                f"DELETE FROM embed_queue WHERE kind = 'summary' AND row_id IN ({summaries})",  # noqa: S608
                (cid,),
            )
            store.execute("DELETE FROM entity_mentions WHERE conversation_id = ?", (cid,))
            store.execute(
                f"DELETE FROM entity_backlog WHERE message_id IN ({messages})",  # noqa: S608
                (cid,),
            )
            store.execute("DELETE FROM context_items WHERE conversation_id = ?", (cid,))
            store.execute(
                f"DELETE FROM summary_sources WHERE summary_id IN ({summaries})",  # noqa: S608
                (cid,),
            )
            store.execute(
                "UPDATE summaries SET replaces = NULL WHERE conversation_id = ? "
                "AND replaces IS NOT NULL",
                (cid,),
            )
            store.execute("DELETE FROM summaries WHERE conversation_id = ?", (cid,))
            store.execute(
                f"DELETE FROM message_parts WHERE message_id IN ({messages})",  # noqa: S608
                (cid,),
            )
            store.execute("DELETE FROM large_files WHERE conversation_id = ?", (cid,))
            store.execute("DELETE FROM messages WHERE conversation_id = ?", (cid,))
            store.execute("DELETE FROM retention WHERE conversation_id = ?", (cid,))
            # Every cache keyed by the session's versions must see a new state.
            store.execute(
                "UPDATE conversations SET context_tokens = 0, raw_tokens = 0, "
                "context_version = context_version + 1, compaction_epoch = compaction_epoch + 1, "
                "suppress_epoch = suppress_epoch + 1, assemble_budget = NULL, "
                "assemble_budget_seq = NULL WHERE id = ?",
                (cid,),
            )
            if had_nodes:
                bump_epoch(store)
            from brain.vectors.epochs import note_vectors_changed

            note_vectors_changed(store, ["message", "summary"])
            _add(store, "sessions_deleted", 1)
            _add(store, "messages_deleted", n_messages)
        # After the commit: a kill before this leaves unnamed files, which doctor
        # reports and moves aside (``files`` check), never a row naming a lost file.
        for file_id in files:
            with contextlib.suppress(OSError):
                remove_file(self.access.store.files_dir, file_id)
        self.deleted_sessions += 1
        self.messages += n_messages

    # -- 5. hand freed pages back --------------------------------------------------

    def vacuum_step(self) -> int:
        """Incremental vacuum in small steps, then a checkpoint (which, in WAL mode, is
        when the file itself shrinks); pages handed back."""
        with self.access.locked() as store:  # the pragma stays off the read path
            if int(store.scalar("PRAGMA auto_vacuum")) != 2:
                return 0
        freed = 0
        while self.more():
            with self.batch() as store:
                before = int(store.scalar("PRAGMA freelist_count"))
                if before == 0:
                    break
                for _ in store.execute(f"PRAGMA incremental_vacuum({VACUUM_STEP_PAGES})"):
                    pass
                step = before - int(store.scalar("PRAGMA freelist_count"))
                _add(store, "pages_vacuumed", step)
                _add(store, "bytes_reclaimed", step * int(store.scalar("PRAGMA page_size")))
            freed += step
            if step == 0:
                break
        if freed:
            with self.access.locked() as store, self.access.checkpoints.paused():
                store.checkpoint()
        return freed


def run_pass(
    access: Access,
    config: BrainConfig,
    *,
    now: datetime | None = None,
    stop: Callable[[], bool] | None = None,
) -> RetentionReport:
    """Apply ``config.retention`` once (see the module docstring for the order).

    ``stop``: asked between batches; true ends the pass early (what committed stays,
    the next pass goes on from there). Every batch is its own transaction, so a
    killed pass loses nothing acknowledged and leaves a consistent database.
    """
    started = time.perf_counter()
    work = _Pass(access, config, now or datetime.now(UTC), stop or (lambda: False))
    with access.reading() as store:
        file_before = _file_bytes(store)
    work.traces_step()
    if work.limits.active:
        work.age_step()
        work.bytes_step()
        work.delete_step()
    if work.message_vectors_changed:
        # Once, not per batch: an index still holding a dropped message's vector
        # finds a message that exists; each bump makes every index reload.
        from brain.vectors.epochs import note_vectors_changed

        with work.batch() as store:
            note_vectors_changed(store, ["message"])
    pages = work.vacuum_step()
    with work.batch() as store:
        _add(store, "passes", 1)
        store.execute(
            "INSERT INTO meta (key, value) VALUES ('retention_last_pass_at', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (iso(work.now),),
        )
    with access.locked() as store:
        used = used_bytes(store)
        file_after = _file_bytes(store)
        mode = AUTO_VACUUM.get(int(store.scalar("PRAGMA auto_vacuum")), "none")
    return RetentionReport(
        vectors_dropped=work.vectors,
        traces_dropped=work.traces,
        sessions_deleted=work.deleted_sessions,
        messages_deleted=work.messages,
        pages_vacuumed=pages,
        file_bytes_before=file_before,
        file_bytes_after=file_after,
        used_bytes=used,
        over_limit=bool(work.limits.max_bytes) and used > work.limits.max_bytes,
        stopped=work.stopped,
        auto_vacuum=mode,
        took_ms=(time.perf_counter() - started) * 1000,
    )
