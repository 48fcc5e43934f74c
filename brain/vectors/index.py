"""The vector index: message and summary vectors in SQLite, mirrored in a hot numpy matrix.

Embedding is off the ingest path. Ingest and compaction queue rows in ``embed_queue``
(same transaction as the row itself); ``drain`` embeds a batch, writes the vectors and
deletes the queue rows in one transaction, so the queue survives restarts and nothing is
embedded twice. Searches answer from what is embedded; ``pending`` says how much is not.

Identical text is embedded once: each vector row records ``text_hash`` (blake2b-128 of the
UTF-8 text), ``take`` looks each queued text's hash up in the index on it, and only texts
with no stored vector (one per distinct text in the batch) go to the embedder; ``put``
copies the stored vector for the others.

The embedder's identity (name, dim) is stored in ``meta``. Opening with a different
embedder is refused (``EmbedderMismatch``) unless the caller may switch (``brain serve``
given an embedder explicitly): then every vector is deleted and every row queued again.
Vectors of two embedders are never mixed. Another process may switch while this one runs
(a daemon restarted with another embedder): this index then notices, on its next
``take``, ``put`` or ``verify``, that the stored identity is no longer its own and raises
:class:`~brain.errors.EmbedderMismatch` rather than write or search vectors of another
embedder. The last process allowed to switch owns the index; the others must be
restarted with its embedder.
A counter per kind in ``meta`` (``vectors_epoch:<kind>``) changes on every write of
that kind's vectors, so a process notices another process's writes and reloads its
matrix, and an index reloads only for writes to the kinds it holds.

Suppressed rows are embedded like any other (unsuppressing needs no re-embedding); the
search layer filters them out, as it does for full text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import orjson

from brain.errors import EmbedderMismatch
from brain.store.connection import Store
from brain.store.identity import stored_identity
from brain.vectors.ann import IVF, default_nprobe, top_k
from brain.vectors.embedders import Embedder
from brain.vectors.epochs import KINDS, Kind, bump_epochs, epochs, note_vectors_changed
from brain.vectors.queue import Pending, pending_batch, text_hash
from brain.vectors.writes import enqueue_everything

__all__ = [
    "Kind",
    "Pending",
    "VectorIndex",
    "pending_batch",
    "note_vectors_changed",
    "stored_identity",
    "text_hash",
]

EXACT_BELOW: Final = 200_000
"""Unscoped searches are exact below this many rows (~5 ms at dim 256), IVF above."""
_TAIL_FRACTION: Final = 0.2  # unclustered rows, relative to clustered, before a rebuild


class VectorIndex:
    """Vectors of one database for one embedder; safe to share between threads."""

    def __init__(
        self,
        dim: int,
        *,
        exact_below: int = EXACT_BELOW,
        nprobe: int | None = None,
        background: bool = True,
        kinds: Sequence[Kind] = ("message", "summary"),
    ) -> None:
        """An empty index of ``dim``-wide vectors (filled from the store on first search).

        Unscoped searches over fewer than ``exact_below`` rows are exact; above that an
        IVF index (``brain.vectors.ann``) answers them, probing ``nprobe`` lists (default:
        ``ann.default_nprobe``). ``background=False`` builds it inside the search that
        finds it missing or stale (tests), instead of on a thread while searches go on
        exactly. ``kinds`` are the rows this index holds and searches (grep's index holds
        messages and summaries; the graph's holds nodes and summaries).
        """
        self.dim = dim
        self.kinds: tuple[Kind, ...] = tuple(kinds)
        self._identity: tuple[str, str] | None = None  # (name, dim) once check_identity ran
        self._lock = threading.Lock()
        self._epoch: tuple[int, ...] | None = None  # the kinds' epochs the matrix reflects
        # Buffers with spare capacity (doubling), the first ``_n`` rows in use:
        # appending a drained batch must not copy the whole matrix each time.
        self._n = 0
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._kinds = np.zeros(0, dtype=np.int8)
        self._row_ids = np.zeros(0, dtype=np.int64)
        self._convs = np.zeros(0, dtype=np.int64)
        # The IVF index covers rows [0, _ivf.rows) of the buffers (permuted into list
        # order when it was built); rows after them are the tail, scanned exactly.
        self._exact_below = exact_below
        self._nprobe = nprobe
        self._background = background
        self._ivf: IVF | None = None
        self._trained_rows = 0  # rows the centroids were trained on (retrain at 2x)
        self._generation = 0  # bumped by every reload: an older build is discarded
        self._idle = threading.Event()  # set while no build runs
        self._idle.set()

    # -- identity -------------------------------------------------------------------

    def check_identity(self, store: Store, embedder: Embedder, *, may_switch: bool = False) -> bool:
        """Make the stored vectors the embedder's; True if everything was queued again.

        A database with no embedder recorded and no vectors is claimed for ``embedder``.
        When the stored identity differs (or none is stored while vectors exist), the
        embedder is switched only with ``may_switch``: every vector is deleted and every
        message, summary and node queued, in one transaction. Without it nothing is
        written and :class:`EmbedderMismatch` names the stored embedder: a process that
        was not told to switch (a one-shot command with a default embedder) must not
        wipe the index a serving daemon answers from.
        """
        name, dim = embedder.name, str(embedder.dim)
        if embedder.dim != self.dim:
            raise ValueError(f"embedder {name} has dim {dim}, this index {self.dim}")
        self._identity = (name, dim)
        with store.transaction():
            stored = stored_identity(store)
            if stored == (name, dim):
                return False
            reset = stored is not None or store.scalar("SELECT count(*) FROM vectors") > 0
            if reset and not may_switch:
                theirs = "unnamed" if stored is None else f"{stored[0]} (dim {stored[1]})"
                raise EmbedderMismatch(
                    f"the stored vectors were made by embedder {theirs}; this process embeds "
                    f"with {name} (dim {dim}) and may not switch the database to it: use the "
                    "stored embedder, or start `brain serve` with the new embedder given "
                    "explicitly to re-embed everything",
                    embedder=name,
                    stored_embedder=None if stored is None else stored[0],
                )
            if reset:
                store.execute("DELETE FROM vectors")
                enqueue_everything(store)
                bump_epochs(store, KINDS)
            store.execute(
                "INSERT INTO meta (key, value) VALUES ('embedder_name', ?), ('embedder_dim', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (name, dim),
            )
        with self._lock:
            self._epoch = None
        return reset

    def verify(self, store: Store) -> None:
        """Raise :class:`EmbedderMismatch` if another process gave the vectors another embedder.

        Meant to run before a search, and runs inside ``take`` and ``put``: the vectors in
        the table are then the ones this index's embedder made (``check_identity`` first).
        """
        if self._identity is None:
            raise RuntimeError("check_identity must run before the index is used")
        stored = stored_identity(store)
        if stored != self._identity:
            theirs = "none" if stored is None else f"{stored[0]} (dim {stored[1]})"
            raise EmbedderMismatch(
                f"the stored vectors are now {theirs}'s, this process embeds with "
                f"{self._identity[0]} (dim {self._identity[1]}): another process changed the "
                "embedder; restart this one with the same embedder",
                embedder=self._identity[0],
                stored_embedder=None if stored is None else stored[0],
            )

    # -- the queue ------------------------------------------------------------------

    def pending(self, store: Store) -> int:
        """How many rows wait to be embedded."""
        return int(store.scalar("SELECT count(*) FROM embed_queue"))

    def take(
        self,
        store: Store,
        batch: int = 256,
        *,
        conversations: Sequence[int] | None = None,
        kinds: Sequence[Kind] | None = None,
    ) -> Pending:
        """Up to ``batch`` queued rows with their texts (the queue is left as it is).

        A graph node is embedded from its content and, for a correction, the query it
        corrected (``metadata.query``), so the next similar query finds the correction.
        Rows that no longer exist are dropped from the queue here. ``to_embed`` lists the
        distinct texts of the batch that have no stored vector yet. ``conversations``
        and ``kinds`` (None: any) narrow the rows taken to what one search needs.
        """
        self.verify(store)
        where = []
        bindings: list[Any] = []
        if kinds is not None:
            where.append("q.kind IN (SELECT value FROM json_each(?))")
            bindings.append(orjson.dumps(list(kinds)).decode())
        if conversations is not None:
            where.append(
                "coalesce(m.conversation_id, s.conversation_id) IN (SELECT value FROM json_each(?))"
            )
            bindings.append(orjson.dumps(list(conversations)).decode())
        rows = list(
            store.execute(
                "SELECT q.kind, q.row_id, coalesce(m.conversation_id, s.conversation_id, 0), "
                "coalesce(m.content, s.content, "
                "n.content || coalesce(char(10) || (n.metadata ->> '$.query'), '')) "
                "FROM embed_queue q "
                "LEFT JOIN messages m ON q.kind = 'message' AND m.id = q.row_id "
                "LEFT JOIN summaries s ON q.kind = 'summary' AND s.id = q.row_id "
                "LEFT JOIN nodes n ON q.kind = 'node' AND n.id = q.row_id "
                + (f"WHERE {' AND '.join(where)} " if where else "")
                + "ORDER BY q.kind, q.row_id LIMIT ?",
                (*bindings, batch),
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
        return pending_batch(
            store,
            [(r[0], int(r[1])) for r in live],
            [int(r[2]) for r in live],
            [str(r[3]) for r in live],
        )

    def put(self, store: Store, pending: Pending, embedded: npt.NDArray[np.float32]) -> int:
        """Store vectors for rows still queued, dequeue them, append to the hot matrix.

        ``embedded`` holds the vectors of ``pending.to_embed``, in order; rows whose text
        already had a vector get a copy of it. A row dequeued meanwhile (another process
        drained it, or an embedder change requeued everything and a newer drain took it)
        is skipped, and so is a row whose stored twin has gone (it stays queued). Raises
        :class:`EmbedderMismatch`, writing nothing, if another process changed the
        embedder. Returns rows stored.
        """
        if embedded.shape != (len(pending.to_embed), self.dim):
            raise ValueError(f"expected {len(pending.to_embed)} vectors of dim {self.dim}")
        embedded = np.ascontiguousarray(embedded, dtype=np.float32)
        vectors = np.zeros((len(pending.keys), self.dim), dtype=np.float32)
        stored: list[int] = []
        replaced = False
        with store.transaction():
            self.verify(store)
            for i, (kind, row_id) in enumerate(pending.keys):
                slot = pending.slots[i]
                if slot >= 0:
                    vectors[i] = embedded[slot]
                else:
                    twin = store.one(
                        "SELECT vector FROM vectors WHERE text_hash = ? LIMIT 1",
                        (pending.hashes[i],),
                    )
                    if twin is None:
                        continue
                    vectors[i] = np.frombuffer(twin[0], dtype=np.float32)
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
                    "INSERT INTO vectors (kind, row_id, conversation_id, vector, text_hash) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (
                        kind,
                        row_id,
                        pending.conversations[i],
                        vectors[i].tobytes(),
                        pending.hashes[i],
                    ),
                )
                stored.append(i)
            written = tuple(dict.fromkeys(pending.keys[i][0] for i in stored))
            before = epochs(store, self.kinds)
            bump_epochs(store, written)
            after = epochs(store, self.kinds)
        mine = [i for i in stored if pending.keys[i][0] in self.kinds]
        if mine:
            with self._lock:
                if not replaced and self._epoch is not None and self._epoch == before:
                    idx = np.asarray(mine, dtype=np.int64)
                    self._append(
                        vectors[idx],
                        np.asarray([KINDS.index(pending.keys[i][0]) for i in mine], np.int8),
                        np.asarray([pending.keys[i][1] for i in mine], np.int64),
                        np.asarray([pending.conversations[i] for i in mine], np.int64),
                    )
                    self._epoch = after
                else:
                    self._epoch = None  # someone else wrote too: reload on next search
        return len(stored)

    def drain(self, store: Store, embedder: Embedder, batch: int = 256) -> int:
        """Embed one batch of queued rows; return how many were stored (0: queue empty).

        Only texts with no stored vector reach the embedder, each once.
        """
        pending = self.take(store, batch)
        if not pending.keys:
            return 0
        return self.put(store, pending, pending.embed(embedder, self.dim))

    # -- search ---------------------------------------------------------------------

    def search(
        self,
        store: Store,
        query: npt.NDArray[np.float32],
        k: int,
        conversations: Sequence[int] | None = None,
        kinds: Sequence[Kind] | None = None,
    ) -> list[tuple[Kind, int, float]]:
        """The ``k`` nearest vectors by dot product (cosine: rows are unit length).

        Scoped to ``conversations``, the search is exact and scores only their rows.
        Unscoped, it is exact below ``exact_below`` rows; above, it probes the IVF lists
        nearest the query and scans the rows appended since the index was built exactly.
        """
        self._refresh(store)
        self._maybe_rebuild()
        with self._lock:
            n = self._n  # slices stay valid even if a later append or rebuild reallocates
            matrix, kinds_of = self._matrix[:n], self._kinds[:n]
            row_ids, convs = self._row_ids[:n], self._convs[:n]
            ivf = self._ivf
        if k <= 0 or n == 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(self.dim)
        if conversations is not None or kinds is not None:
            mask = np.ones(n, dtype=bool)
            if conversations is not None:
                wanted = np.asarray(list(conversations), dtype=np.int64)
                # One equality pass is ~0.2 ms at 1M rows; isin sorts when given many ids.
                mask &= convs == wanted[0] if len(wanted) == 1 else np.isin(convs, wanted)
            if kinds is not None:
                codes = np.asarray([KINDS.index(kind) for kind in kinds], dtype=np.int8)
                mask &= np.isin(kinds_of, codes)
            positions = np.flatnonzero(mask)
            scores = matrix[positions] @ q
            best = top_k(scores, k)
            positions, scores = positions[best], scores[best]
        elif ivf is None:
            scores = matrix @ q
            positions = top_k(scores, k)
            scores = scores[positions]
        else:
            covered = ivf.rows
            nprobe = self._nprobe or default_nprobe(ivf.lists)
            found, found_scores = ivf.search(matrix[:covered], q, k, nprobe)
            tail_scores = matrix[covered:] @ q
            tail = top_k(tail_scores, k)
            positions = np.concatenate([found, tail + covered])
            scores = np.concatenate([found_scores, tail_scores[tail]])
            best = top_k(scores, k)
            positions, scores = positions[best], scores[best]
        return [
            (KINDS[int(kinds_of[i])], int(row_ids[i]), float(s))
            for i, s in zip(positions.tolist(), scores.tolist(), strict=True)
        ]

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for a background IVF build to finish; False if ``timeout`` passed first."""
        return self._idle.wait(timeout)

    def _maybe_rebuild(self) -> None:
        """Start an IVF (re)build when the index is missing or its tail has grown too long.

        Appends land in the tail; once it exceeds ``_TAIL_FRACTION`` of the covered rows
        they are assigned to the existing lists (O(tail x lists x d) plus one O(n) copy),
        and once the rows have doubled since training the centroids are retrained (lists
        grow with sqrt(n)). Rebuilds happen at geometric intervals, so their amortised
        cost is O(lists x d) per appended row: ~3 us at 1M rows of dim 256.
        """
        with self._lock:
            if not self._idle.is_set() or self._n < max(1, self._exact_below):
                return
            ivf, n = self._ivf, self._n
            if ivf is not None and n - ivf.rows <= _TAIL_FRACTION * ivf.rows:
                return
            self._idle.clear()
            job = (
                self._generation,
                self._matrix[:n],
                self._kinds[:n],
                self._row_ids[:n],
                self._convs[:n],
            )
        if self._background:
            threading.Thread(target=self._rebuild, args=job, name="brain-ivf", daemon=True).start()
        else:
            self._rebuild(*job)

    def _rebuild(
        self,
        generation: int,
        matrix: npt.NDArray[np.float32],
        kinds: npt.NDArray[np.int8],
        row_ids: npt.NDArray[np.int64],
        convs: npt.NDArray[np.int64],
    ) -> None:
        """Build the index over a snapshot of rows and swap in permuted copies of them.

        Runs without the lock: searches go on over the old buffers (the old index and
        tail, or exactly). The new buffers briefly double the matrix's memory.
        """
        try:
            n0 = len(matrix)
            ivf = self._ivf
            if ivf is None or n0 > 2 * self._trained_rows:
                ivf, order = IVF.build(matrix)
                trained = n0
            else:
                ivf, order = ivf.extended(matrix[ivf.rows :])
                trained = self._trained_rows
            capacity = max(len(self._matrix), n0)
            new_matrix = np.zeros((capacity, self.dim), dtype=np.float32)
            np.take(matrix, order, axis=0, out=new_matrix[:n0])
            new: list[npt.NDArray[Any]] = [
                new_matrix,
                _permuted(kinds, order, capacity),
                _permuted(row_ids, order, capacity),
                _permuted(convs, order, capacity),
            ]
            with self._lock:
                if self._generation != generation:
                    return  # reloaded meanwhile: these rows may be stale
                n = self._n
                if n > capacity:
                    new = [_grown(a, n0, max(n, 2 * capacity)) for a in new]
                old: list[npt.NDArray[Any]] = [
                    self._matrix,
                    self._kinds,
                    self._row_ids,
                    self._convs,
                ]
                for fresh, current in zip(new, old, strict=True):
                    fresh[n0:n] = current[n0:n]  # rows appended while building
                self._matrix, self._kinds, self._row_ids, self._convs = new
                self._ivf, self._trained_rows = ivf, trained
        finally:
            self._idle.set()

    def _refresh(self, store: Store) -> None:
        epoch = epochs(store, self.kinds)
        with self._lock:
            if self._epoch == epoch:
                return
        rows = list(
            store.execute(
                "SELECT kind, row_id, conversation_id, vector FROM vectors "
                "WHERE kind IN (SELECT value FROM json_each(?))",
                (orjson.dumps(self.kinds),),
            )
        )
        # One join and one frombuffer: a row-by-row copy took ~2 s at 1M rows.
        blob = b"".join(r[3] for r in rows)
        matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), self.dim).copy()
        with self._lock:
            self._matrix = matrix
            self._kinds = np.asarray([KINDS.index(r[0]) for r in rows], dtype=np.int8)
            self._row_ids = np.asarray([r[1] for r in rows], dtype=np.int64)
            self._convs = np.asarray([r[2] for r in rows], dtype=np.int64)
            self._n = len(rows)
            self._epoch = epoch
            self._ivf = None  # rows may have gone or changed: rebuilt on a later search
            self._generation += 1

    def _append(
        self,
        vectors: npt.NDArray[np.float32],
        kinds: npt.NDArray[np.int8],
        row_ids: npt.NDArray[np.int64],
        convs: npt.NDArray[np.int64],
    ) -> None:
        # Rows go to the tail (after the IVF's rows): searches scan them exactly.
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


def _permuted(
    array: npt.NDArray[Any], order: npt.NDArray[np.int64], capacity: int
) -> npt.NDArray[Any]:
    """A buffer of ``capacity`` rows starting with ``array[order]``."""
    out = np.zeros(capacity, dtype=array.dtype)
    out[: len(order)] = array[order]
    return out


def _grown(array: npt.NDArray[Any], used: int, capacity: int) -> npt.NDArray[Any]:
    """A new buffer of ``capacity`` rows holding the first ``used`` rows of ``array``."""
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown
