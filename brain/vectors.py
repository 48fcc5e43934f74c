"""The vector index: message and summary vectors in SQLite, mirrored in a hot numpy matrix.

Embedding is off the ingest path. Ingest and compaction queue rows in ``embed_queue``
(same transaction as the row itself); ``drain`` embeds a batch, writes the vectors and
deletes the queue rows in one transaction, so the queue survives restarts and nothing is
embedded twice. Searches answer from what is embedded; ``pending`` says how much is not.

The embedder's identity (name, dim) is stored in ``meta``. Opening with a different
embedder deletes every vector and queues every row again: vectors of two embedders are
never mixed. A counter in ``meta`` (``vectors_epoch``) changes on every write to
``vectors``, so a process notices another process's writes and reloads its matrix.

Suppressed rows are embedded like any other (unsuppressing needs no re-embedding); the
search layer filters them out, as it does for full text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt

from brain.embedders import Embedder
from brain.store import Store

__all__ = ["Pending", "VectorIndex"]

Kind = Literal["message", "summary"]
_KINDS: Final[tuple[Kind, Kind]] = ("message", "summary")
_EPOCH_KEY: Final = "vectors_epoch"


@dataclass(frozen=True, slots=True)
class Pending:
    """Rows taken from the queue for embedding: keys, conversations and texts."""

    keys: tuple[tuple[Kind, int], ...]
    conversations: tuple[int, ...]
    texts: tuple[str, ...]


class VectorIndex:
    """Vectors of one database for one embedder; safe to share between threads."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._epoch: int | None = None  # the vectors_epoch the hot matrix reflects
        # Buffers with spare capacity (doubling), the first ``_n`` rows in use:
        # appending a drained batch must not copy the whole matrix each time.
        self._n = 0
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._kinds = np.zeros(0, dtype=np.int8)
        self._row_ids = np.zeros(0, dtype=np.int64)
        self._convs = np.zeros(0, dtype=np.int64)

    # -- identity -------------------------------------------------------------------

    def check_identity(self, store: Store, embedder: Embedder) -> bool:
        """Make the stored vectors the embedder's; True if everything was queued again.

        When the stored identity differs (or none is stored while vectors exist), every
        vector is deleted and every message and summary queued, in one transaction.
        """
        name, dim = embedder.name, str(embedder.dim)
        with store.transaction():
            stored = dict(
                store.execute(
                    "SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dim')"
                )
            )
            if stored.get("embedder_name") == name and stored.get("embedder_dim") == dim:
                return False
            reset = bool(stored) or store.scalar("SELECT count(*) FROM vectors") > 0
            if reset:
                store.execute("DELETE FROM vectors")
                store.execute(
                    "INSERT OR IGNORE INTO embed_queue (kind, row_id) "
                    "SELECT 'message', id FROM messages"
                )
                store.execute(
                    "INSERT OR IGNORE INTO embed_queue (kind, row_id) "
                    "SELECT 'summary', id FROM summaries"
                )
                _bump_epoch(store)
            store.execute(
                "INSERT INTO meta (key, value) VALUES ('embedder_name', ?), ('embedder_dim', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (name, dim),
            )
        with self._lock:
            self._epoch = None
        return reset

    # -- the queue ------------------------------------------------------------------

    def pending(self, store: Store) -> int:
        """How many rows wait to be embedded."""
        return int(store.scalar("SELECT count(*) FROM embed_queue"))

    def take(self, store: Store, batch: int = 256) -> Pending:
        """Up to ``batch`` queued rows with their texts (the queue is left as it is).

        Rows that no longer exist are dropped from the queue here.
        """
        rows = list(
            store.execute(
                "SELECT q.kind, q.row_id, coalesce(m.conversation_id, s.conversation_id), "
                "coalesce(m.content, s.content) FROM embed_queue q "
                "LEFT JOIN messages m ON q.kind = 'message' AND m.id = q.row_id "
                "LEFT JOIN summaries s ON q.kind = 'summary' AND s.id = q.row_id "
                "ORDER BY q.kind, q.row_id LIMIT ?",
                (batch,),
            )
        )
        gone = [(r[0], r[1]) for r in rows if r[3] is None]
        if gone:
            with store.transaction():
                for kind, row_id in gone:
                    store.execute(
                        "DELETE FROM embed_queue WHERE kind = ? AND row_id = ?", (kind, row_id)
                    )
        live = [r for r in rows if r[3] is not None]
        return Pending(
            tuple((r[0], int(r[1])) for r in live),
            tuple(int(r[2]) for r in live),
            tuple(str(r[3]) for r in live),
        )

    def put(self, store: Store, pending: Pending, vectors: npt.NDArray[np.float32]) -> int:
        """Store vectors for rows still queued, dequeue them, append to the hot matrix.

        A row dequeued meanwhile (another process drained it, or an embedder change
        requeued everything and a newer drain took it) is skipped. Returns rows stored.
        """
        if vectors.shape != (len(pending.keys), self.dim):
            raise ValueError(f"expected {len(pending.keys)} vectors of dim {self.dim}")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        stored: list[int] = []
        replaced = False
        with store.transaction():
            for i, (kind, row_id) in enumerate(pending.keys):
                taken = store.one(
                    "DELETE FROM embed_queue WHERE kind = ? AND row_id = ? RETURNING row_id",
                    (kind, row_id),
                )
                if taken is None:
                    continue
                # A row queued again while it has a vector gets a new one; the hot
                # matrix then holds a stale row, so it is reloaded instead of appended to.
                replaced |= (
                    store.one(
                        "DELETE FROM vectors WHERE kind = ? AND row_id = ? RETURNING 1",
                        (kind, row_id),
                    )
                    is not None
                )
                store.execute(
                    "INSERT INTO vectors (kind, row_id, conversation_id, vector) "
                    "VALUES (?, ?, ?, ?)",
                    (kind, row_id, pending.conversations[i], vectors[i].tobytes()),
                )
                stored.append(i)
            epoch = _bump_epoch(store) if stored else 0
        if stored:
            with self._lock:
                if not replaced and self._epoch is not None and self._epoch == epoch - 1:
                    idx = np.asarray(stored, dtype=np.int64)
                    self._append(
                        vectors[idx],
                        np.asarray([_KINDS.index(pending.keys[i][0]) for i in stored], np.int8),
                        np.asarray([pending.keys[i][1] for i in stored], np.int64),
                        np.asarray([pending.conversations[i] for i in stored], np.int64),
                    )
                    self._epoch = epoch
                else:
                    self._epoch = None  # someone else wrote too: reload on next search
        return len(stored)

    def drain(self, store: Store, embedder: Embedder, batch: int = 256) -> int:
        """Embed one batch of queued rows; return how many were stored (0: queue empty)."""
        pending = self.take(store, batch)
        if not pending.keys:
            return 0
        return self.put(store, pending, embedder.embed(list(pending.texts)))

    # -- search ---------------------------------------------------------------------

    def search(
        self,
        store: Store,
        query: npt.NDArray[np.float32],
        k: int,
        conversations: Sequence[int] | None = None,
    ) -> list[tuple[Kind, int, float]]:
        """The ``k`` nearest vectors by dot product (cosine: rows are unit length)."""
        self._refresh(store)
        with self._lock:
            n = self._n  # slices stay valid even if a later append reallocates
            matrix, kinds = self._matrix[:n], self._kinds[:n]
            row_ids, convs = self._row_ids[:n], self._convs[:n]
        if k <= 0 or not len(row_ids):
            return []
        scores = matrix @ np.asarray(query, dtype=np.float32).reshape(self.dim)
        if conversations is not None:
            mask = np.isin(convs, np.asarray(list(conversations), dtype=np.int64))
            scores = np.where(mask, scores, -np.inf)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [
            (_KINDS[int(kinds[i])], int(row_ids[i]), float(scores[i]))
            for i in top
            if np.isfinite(scores[i])
        ]

    def _refresh(self, store: Store) -> None:
        epoch = _epoch(store)
        with self._lock:
            if self._epoch == epoch:
                return
        rows = list(store.execute("SELECT kind, row_id, conversation_id, vector FROM vectors"))
        matrix = np.zeros((len(rows), self.dim), dtype=np.float32)
        for i, r in enumerate(rows):
            matrix[i] = np.frombuffer(r[3], dtype=np.float32)
        with self._lock:
            self._matrix = matrix
            self._kinds = np.asarray([_KINDS.index(r[0]) for r in rows], dtype=np.int8)
            self._row_ids = np.asarray([r[1] for r in rows], dtype=np.int64)
            self._convs = np.asarray([r[2] for r in rows], dtype=np.int64)
            self._n = len(rows)
            self._epoch = epoch

    def _append(
        self,
        vectors: npt.NDArray[np.float32],
        kinds: npt.NDArray[np.int8],
        row_ids: npt.NDArray[np.int64],
        convs: npt.NDArray[np.int64],
    ) -> None:
        start, end = self._n, self._n + len(vectors)
        if end > len(self._matrix):
            capacity = max(end, 2 * len(self._matrix), 1024)
            self._matrix = _grown(self._matrix, start, capacity)
            self._kinds = _grown(self._kinds, start, capacity)
            self._row_ids = _grown(self._row_ids, start, capacity)
            self._convs = _grown(self._convs, start, capacity)
        self._matrix[start:end] = vectors
        self._kinds[start:end] = kinds
        self._row_ids[start:end] = row_ids
        self._convs[start:end] = convs
        self._n = end


def _grown(array: npt.NDArray[Any], used: int, capacity: int) -> npt.NDArray[Any]:
    """A new buffer of ``capacity`` rows holding the first ``used`` rows of ``array``."""
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


def _epoch(store: Store) -> int:
    value = store.scalar("SELECT value FROM meta WHERE key = ?", (_EPOCH_KEY,))
    return 0 if value is None else int(value)


def _bump_epoch(store: Store) -> int:
    row = store.one(
        "INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE "
        "SET value = CAST(value AS INTEGER) + 1 RETURNING value",
        (_EPOCH_KEY,),
    )
    assert row is not None
    return int(row[0])
