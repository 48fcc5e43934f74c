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

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
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
from brain.vectors.matrix import (
    Rows,
    Tail,
    cache_path,
    folded,
    gone,
    last_row,
    listed,
    load,
    load_ivf,
    read_since,
    save_ivf,
)
from brain.vectors.quantise import decode, encode, scores
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

Positions = npt.NDArray[np.int64]

EXACT_BELOW: Final = 200_000
"""Unscoped searches are exact below this many rows (~5 ms at dim 256), IVF above."""
_SCOPES_HELD: Final = 32  # scopes whose base positions are remembered at once...
_SCOPE_ROWS_HELD: Final = 262_144  # ...each of at most this many rows (2 MiB of positions)
_SCOPE_CODES_HELD: Final = 48 << 20
"""Bytes of scoped rows' codes and scales kept gathered (contiguous) at once: scoring a
50k-row scope's rows where they lie in the file gathers them first (~2 of ~3.7 ms)."""
_SCOPE_GATHER_FROM: Final = 4_096  # scopes of fewer rows are cheap to gather each time
ScopeKey = tuple[tuple[int, ...] | None, tuple[str, ...] | None]
_TAIL_FRACTION: Final = 0.2  # tail rows, relative to the base, before a fold (and IVF update)
_FOLD_MIN: Final = 4096  # below the IVF threshold, fold only tails at least this long
QUIET_S: Final = 0.5
"""IVF lists only approximate searches use (the graph's index below ``exact_below``) are
built once no exact search came for this long (the first queries after a start, which
the build would slow, answer first)..."""
QUIET_MAX_S: Final = 5.0
"""...or after this long at most, however busy the queries keep it."""


def _scope_key(conversations: Sequence[int] | None, kinds: Sequence[Kind] | None) -> ScopeKey:
    """A scope as the per-base caches of ``VectorIndex`` key it."""
    return (
        None if conversations is None else tuple(conversations),
        None if kinds is None else tuple(kinds),
    )


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
        file: bool = True,
        approximate_below: int | None = None,
    ) -> None:
        """An empty index of ``dim``-wide vectors (filled from the store on first search).

        Unscoped searches over fewer than ``exact_below`` rows are exact; above that an
        IVF index (``brain.vectors.ann``) answers them, probing ``nprobe`` lists (default:
        ``ann.default_nprobe``). ``background=False`` builds it inside the search that
        finds it missing or stale (tests), instead of on a thread while searches go on
        exactly. ``kinds`` are the rows this index holds and searches (grep's index holds
        messages and summaries; the graph's holds nodes and summaries). ``file``: keep
        the rows in a matrix file beside the database and map it (False: in memory).
        ``approximate_below``: a search that asks for ``approximate`` answers by IVF from
        this many rows already (default: ``exact_below``); the lists are then kept from
        that many rows, built (in the background) after the index's first search.
        """
        self.dim = dim
        self.kinds: tuple[Kind, ...] = tuple(kinds)
        self._identity: tuple[str, str] | None = None  # (name, dim) once check_identity ran
        self._lock = threading.Lock()  # guards the fields below (held briefly)
        self._refreshing = threading.Lock()  # one reload or delta read at a time
        self._epoch: tuple[int, ...] | None = None  # the kinds' epochs the rows reflect
        # The rows: a read-only base (mapped from the matrix file, see brain.vectors.matrix)
        # and a tail of rows read since; searches address base rows then tail rows.
        self._base = Rows.empty(dim)
        self._mapped: tuple[int, int, int] | None = None  # (dev, inode, size) of the file
        self._tail = Tail(dim)
        # Positions of a scope's rows in the base (the base never changes: a fold or a
        # reload makes a new one), so a repeated scoped search skips the column scan.
        self._scoped: tuple[Rows, dict[ScopeKey, npt.NDArray[np.int64]]] | None = None
        # And the codes and scales of the larger scopes, gathered (``_SCOPE_CODES_HELD``).
        self._gathered: tuple[Rows, dict[ScopeKey, _Gathered]] | None = None
        self._gone: tuple[int, ...] | None = None  # deletion counters the rows are valid for
        self._max_id = 0  # every row of the kinds with vectors.id <= this is held
        self._last: tuple[str, int, str] | None = None  # the row at _max_id (for the file)
        self._file = file
        self._path: Path | None = None  # the matrix file (None: rows held in memory)
        self._base_key: tuple[int, ...] | None = None  # (max_id, *gone) of the base's file
        self._layout: str | None = None  # the base file's row order (matrix.Loaded.layout)
        # The IVF index covers base rows [0, _ivf.rows); the rest are scanned exactly.
        self._exact_below = exact_below
        self._approximate_below = exact_below if approximate_below is None else approximate_below
        # Rows from which the IVF is kept: ``approximate_below`` when given (the graph's
        # index: a teach's neighbours come from the lists, so they are built after its
        # first search, not during the first teaches), else ``exact_below``.
        self._ivf_from = self._approximate_below
        self._nprobe = nprobe
        self._background = background
        self._ivf: IVF | None = None
        self._trained_rows = 0  # rows the centroids were trained on (retrain at 2x)
        self._generation = 0  # bumped by every reload: an older build is discarded
        self._searched_at = 0.0  # when the last search ended (a build waits for a pause)
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
        read_only: bool = False,
        after: tuple[Kind, int] | None = None,
    ) -> Pending:
        """Up to ``batch`` queued rows with their texts (the queue is left as it is).

        A graph node is embedded from its content and, for a correction, the query it
        corrected (``metadata.query``), so the next similar query finds the correction.
        Rows that no longer exist are dropped from the queue here. ``to_embed`` lists the
        distinct texts of the batch that have no stored vector yet. ``conversations``
        and ``kinds`` (None: any) narrow the rows taken to what one search needs.
        ``read_only``: ``store`` is a read connection; rows that no longer exist are left
        in ``Pending.gone`` for ``put`` to dequeue. ``after``: only rows after this
        queue key (``embed_ahead``'s next batch, while the one before it is embedded).
        """
        self.verify(store)
        where = []
        bindings: list[Any] = []
        if after is not None:
            where.append("(q.kind, q.row_id) > (?, ?)")
            bindings.extend(after)
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
        if gone and not read_only:
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
            gone if read_only else (),
        )

    def put(self, store: Store, pending: Pending, embedded: npt.NDArray[np.float32]) -> int:
        """Store vectors (int8, ``brain.vectors.quantise``) for rows still queued, dequeue them.

        ``embedded`` holds the vectors of ``pending.to_embed``, in order; rows whose text
        already had a vector get a copy of it. A row dequeued meanwhile (another process
        drained it, or an embedder change requeued everything and a newer drain took it)
        is skipped, and so is a row whose stored twin has gone (it stays queued). Raises
        :class:`EmbedderMismatch`, writing nothing, if another process changed the
        embedder. Returns rows stored. The next search reads the new rows (by id, after
        the ones it holds).
        """
        if embedded.shape != (len(pending.to_embed), self.dim):
            raise ValueError(f"expected {len(pending.to_embed)} vectors of dim {self.dim}")
        blobs = encode(np.ascontiguousarray(embedded, dtype=np.float32))
        with store.transaction():
            self.verify(store)
            if pending.gone:
                store.execute(
                    "DELETE FROM embed_queue WHERE (kind, row_id) IN "
                    "(SELECT value ->> 0, value ->> 1 FROM json_each(?))",
                    (_keys_json(pending.gone),),
                )
            row_blob: dict[int, bytes] = {}
            for i, slot in enumerate(pending.slots):
                if slot >= 0:
                    row_blob[i] = blobs[slot]
                    continue
                twin = store.one(
                    "SELECT vector FROM vectors WHERE text_hash = ? LIMIT 1",
                    (pending.hashes[i],),
                )
                if twin is None:
                    continue  # its stored twin has gone: it stays queued
                blob = bytes(twin[0])
                if len(blob) != self.dim + 4:  # a float32 row from before v19
                    blob = encode(decode(blob, self.dim).reshape(1, self.dim))[0]
                row_blob[i] = blob
            # Set-based: one statement per step for the whole batch (a statement per
            # row cost ~40 us each, as much as embedding the row).
            taken = {
                (str(r[0]), int(r[1]))
                for r in store.execute(
                    "DELETE FROM embed_queue WHERE (kind, row_id) IN "
                    "(SELECT value ->> 0, value ->> 1 FROM json_each(?)) RETURNING kind, row_id",
                    (_keys_json(pending.keys[i] for i in sorted(row_blob)),),
                )
            }
            stored = [i for i in sorted(row_blob) if pending.keys[i] in taken]
            # A row queued again while it has a vector gets a new one (the delete
            # counts as gone: every index holding it reloads).
            store.execute(
                "DELETE FROM vectors WHERE (kind, row_id) IN "
                "(SELECT value ->> 0, value ->> 1 FROM json_each(?))",
                (_keys_json(pending.keys[i] for i in stored),),
            )
            store.executemany(
                "INSERT INTO vectors (kind, row_id, conversation_id, vector, text_hash) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        pending.keys[i][0],
                        pending.keys[i][1],
                        pending.conversations[i],
                        row_blob[i],
                        pending.hashes[i],
                    )
                    for i in stored
                ],
            )
            bump_epochs(store, tuple(dict.fromkeys(pending.keys[i][0] for i in stored)))
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
        *,
        approximate: bool = False,
    ) -> list[tuple[Kind, int, float]]:
        """The ``k`` nearest vectors by dot product (cosine: rows are unit length).

        Scoped to ``conversations``, the search is exact and scores only their rows.
        Unscoped, it is exact below ``exact_below`` rows (``approximate_below`` when
        ``approximate``: a caller content with near neighbours, such as a taught node's
        links); above, it probes the IVF lists nearest the query and scans the rows
        added since the index was built exactly.
        Scores are those of the int8 rows (``brain.vectors.quantise``).
        """
        self._refresh(store)
        if not self._background:
            self._maybe_rebuild()  # built inside this search, which then uses it
        try:
            return self._search(query, k, conversations, kinds, approximate=approximate)
        finally:
            if self._background:
                # Once this answer is computed: a build's first seconds (sampling,
                # training) would otherwise share the CPU with the search that found
                # it due (a cold start's first answer).
                if not approximate:  # a teach wants the lists: it never holds them off
                    self._searched_at = time.monotonic()
                self._maybe_rebuild()

    def _search(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        conversations: Sequence[int] | None,
        kinds: Sequence[Kind] | None,
        *,
        approximate: bool,
    ) -> list[tuple[Kind, int, float]]:
        """``search`` over the rows as they are (refreshed by the caller)."""
        with self._lock:
            base, tail, ivf = self._base, self._tail.view(), self._ivf
        if k <= 0 or len(base) + len(tail) == 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(self.dim)
        found: list[tuple[Rows, npt.NDArray[np.int64], npt.NDArray[np.float32], int]] = []

        def best_of(
            rows: Rows,
            positions: npt.NDArray[np.int64] | None,
            offset: int,
            gathered: _Gathered | None = None,
        ) -> None:
            scores = rows.score(q, positions) if gathered is None else gathered.score(q)
            top = top_k(scores, k)
            at = top if positions is None else positions[top]
            found.append((rows, at, scores[top], offset))

        if conversations is not None or kinds is not None:
            positions = self._base_positions(base, conversations, kinds)
            best_of(base, positions, 0, self._gathered_rows(base, positions, conversations, kinds))
            best_of(tail, _matching(tail, conversations, kinds), len(base))
        elif ivf is None or (not approximate and len(base) + len(tail) < self._exact_below):
            best_of(base, None, 0)
            best_of(tail, None, len(base))
        else:
            nprobe = self._nprobe or default_nprobe(ivf.lists)
            at, scores = ivf.search(
                lambda p: base.score(q, p), q, k, nprobe, lambda s, e: base.score_runs(q, s, e)
            )
            found.append((base, at, scores, 0))
            rest = base.tail_from(ivf.rows)
            best_of(rest, None, ivf.rows)
            best_of(tail, None, len(base))
        out: list[tuple[float, int, Kind, int]] = []
        for rows, at, scores, offset in found:
            # Gathered once per part, not an item at a time (each item a numpy scalar).
            for i, score, kind, row_id in zip(
                at.tolist(),
                scores.tolist(),
                rows.kinds[at].tolist(),
                rows.row_ids[at].tolist(),
                strict=True,
            ):
                out.append((-score, offset + i, KINDS[kind], row_id))
        out.sort()  # best first; ties: the earlier row first
        return [(kind, row_id, -neg) for neg, _, kind, row_id in out[:k]]

    def _base_positions(
        self, base: Rows, conversations: Sequence[int] | None, kinds: Sequence[Kind] | None
    ) -> npt.NDArray[np.int64]:
        """``_matching`` over the base, remembered per scope while the base is the same.

        Finding a conversation's rows reads the whole conversation column (~1.3 ms at
        1M rows, of a ~7 ms scoped search of a 50k-row conversation).
        """
        key = _scope_key(conversations, kinds)
        held = self._scoped
        if held is None or held[0] is not base:
            held = (base, {})
            self._scoped = held
        found = held[1].get(key)
        if found is None:
            found = _matching(base, conversations, kinds)
            if len(held[1]) >= _SCOPES_HELD:
                held[1].clear()
            if len(found) <= _SCOPE_ROWS_HELD:
                held[1][key] = found
        return found

    def _gathered_rows(
        self,
        base: Rows,
        positions: npt.NDArray[np.int64],
        conversations: Sequence[int] | None,
        kinds: Sequence[Kind] | None,
    ) -> _Gathered | None:
        """The codes and scales at a scope's base ``positions``, copied contiguous and
        remembered while the base is the same and they fit ``_SCOPE_CODES_HELD`` (a
        repeated search of a large scope then scores them in place); None for a small
        scope (gathered each time, cheaply)."""
        if len(positions) < _SCOPE_GATHER_FROM:
            return None
        key = _scope_key(conversations, kinds)
        held = self._gathered
        if held is None or held[0] is not base:
            held = (base, {})
            self._gathered = held
        found = held[1].get(key)
        if found is not None and found.positions is positions:
            return found
        size = len(positions) * (base.codes.shape[1] + base.scales.itemsize)
        if size > _SCOPE_CODES_HELD:
            return None
        used = sum(g.nbytes for g in held[1].values())
        if used + size > _SCOPE_CODES_HELD:
            held[1].clear()  # the scopes searched since are the likelier ones again
        found = _Gathered.of(base, positions)
        held[1][key] = found
        return found

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for a background fold or IVF build to finish; False if ``timeout`` passed first."""
        return self._idle.wait(timeout)

    def _maybe_rebuild(self) -> None:
        """Start a fold or an IVF (re)build when one is due.

        A fold (the tail written after the base into a new matrix file, mapped as the
        new base) is due once the tail exceeds ``_TAIL_FRACTION`` of the base, and is at
        least ``_FOLD_MIN`` rows or the index is above its exact threshold. Above the
        threshold the IVF covers the base: built when missing, extended to the rows a
        fold added (their assignment only, O(new rows x lists)), retrained once the rows
        have doubled since training (lists grow with sqrt(n)). Both happen at geometric
        intervals, so their amortised cost per added row is constant; neither copies
        the matrix in memory (the fold streams it to the file, the IVF keeps positions).
        """
        with self._lock:
            if not self._idle.is_set():
                return
            base_n, tail_n, ivf = len(self._base), self._tail.n, self._ivf
            threshold = max(1, self._ivf_from)
            fold = (
                tail_n > 0
                and tail_n > _TAIL_FRACTION * base_n
                and (tail_n >= _FOLD_MIN or base_n + tail_n >= threshold)
            )
            rows = base_n + tail_n if fold else base_n
            build = rows >= threshold and (ivf is None or ivf.rows < rows)
            if not fold and not build:
                return
            self._idle.clear()
            # An IVF over a file rewrites it in list order: the tail goes in with it
            # (the file's header then names the newest row, as after any fold).
            relayout = build and self._path is not None
            job = _Job(
                self._generation,
                self._base,
                self._tail.view() if fold or relayout else None,
                self._max_id,
                self._gone or (),
                self._last,
                self._path,
                self._base_key,
                self._layout,
            )
        if self._background:
            # Lists no exact search needs yet wait for a pause in the queries.
            quiet = build and rows < self._exact_below
            threading.Thread(
                target=self._rebuild_when_quiet if quiet else self._rebuild,
                args=(job,),
                name="brain-ivf",
                daemon=True,
            ).start()
        else:
            self._rebuild(job)

    def _rebuild_when_quiet(self, job: _Job) -> None:
        """``_rebuild`` once the exact searches pause (``QUIET_S``, at most ``QUIET_MAX_S``).

        A build is a second of CPU at 100k rows, much of it holding the interpreter
        lock: started by a daemon's warm-up search, it made the first query after a
        start (a budget of a second) and the next ones slower.
        """
        deadline = time.monotonic() + QUIET_MAX_S
        while (now := time.monotonic()) < deadline and now - self._searched_at < QUIET_S:
            time.sleep(min(QUIET_S, deadline - now))
        self._rebuild(job)

    def _rebuild(self, job: _Job) -> None:
        """Fold and (re)build the IVF for a snapshot, then swap them in if still current.

        With a matrix file and an IVF, the file is written in the IVF's list order
        (base and tail together when folding; the base alone when an IVF was built
        over a file in id order), so a search scores each probed list in place. The
        IVF is computed first, over base and tail as they are, so a fold writes the
        file once. Runs without the lock: searches go on over the old base, tail and
        index.
        """
        try:
            base, path, key, layout = job.base, job.path, job.base_key, job.layout
            parts = (job.base,) if job.tail is None else (job.base, job.tail)
            n = sum(len(p) for p in parts)
            ivf, trained = self._ivf, self._trained_rows
            moved = job.tail is not None  # the base changes (a fold, or a new row order)
            if n >= max(1, self._ivf_from):
                vectors = _vectors_of(parts)
                if ivf is None or n > 2 * trained:
                    ivf, trained = IVF.build(n, vectors), n
                elif ivf.rows < n:
                    ivf = ivf.extended(n, vectors)
                if path is not None and not ivf.listed:
                    try:
                        base, layout = listed(
                            path,
                            self.kinds,
                            parts,
                            ivf.order,
                            max_id=job.max_id,
                            gone=job.gone,
                            last=job.last,
                        )
                        key, ivf, moved = (job.max_id, *job.gone), ivf.in_list_order(), True
                    except OSError:
                        pass  # not writable: fold (below) or keep the base as it is
            if job.tail is not None and not (moved and base is not job.base):
                key, layout = (job.max_id, *job.gone), None
                base, path = folded(
                    job.path,
                    self.kinds,
                    job.base,
                    job.tail,
                    max_id=job.max_id,
                    gone=job.gone,
                    last=job.last,
                )
            if ivf is not None and ivf.rows > len(base):
                ivf, trained = self._ivf, self._trained_rows  # could not fold: as before
            if ivf is not None and path is not None and key is not None and ivf is not self._ivf:
                with contextlib.suppress(OSError):
                    save_ivf(path, ivf, trained, key, layout)
            with self._lock:
                if self._generation != job.generation:
                    return  # reloaded meanwhile: these rows may be stale
                if moved:
                    self._base, self._path, self._layout = base, path, layout
                    self._mapped = _identity(path)
                    self._base_key = key if path is not None else None
                    self._forget_scopes()
                if job.tail is not None:
                    self._tail.drop_first(len(job.tail))
                self._ivf, self._trained_rows = ivf, trained
        finally:
            self._idle.set()

    def _refresh(self, store: Store) -> None:
        """Bring the rows up to date with the store: read the rows added since (by id)
        while nothing held has gone, else reload (mapping the matrix file if current)."""
        with self._refreshing:
            epoch = epochs(store, self.kinds)
            with self._lock:
                if (
                    self._path is not None
                    and len(self._base)
                    and _truncated(self._path, self._mapped)
                ):
                    # The mapped file shrank under us: touching its lost pages would
                    # kill the process with SIGBUS. A derived cache: reload, which
                    # finds the file short and rebuilds it from the database.
                    self._epoch = self._gone = None
                if self._epoch == epoch:
                    return
                held, after = self._gone, self._max_id
            counters = gone(store, self.kinds)
            if held is not None and counters == held:
                rows, top = read_since(store, self.kinds, self.dim, after)
                last = last_row(store, top) if top != after else self._last
                with self._lock:
                    self._tail.append(rows)
                    self._max_id, self._last, self._epoch = top, last, epoch
                return
            if self._file and self._path is None:
                self._path = cache_path(store.path, self.kinds)
            loaded = load(store, self.kinds, self.dim, self._path if self._file else None)
            rows, top = read_since(store, self.kinds, self.dim, loaded.max_id)
            last = last_row(store, top) if top != loaded.max_id else loaded.last
            tail = Tail(self.dim)
            tail.append(rows)
            key = None if loaded.path is None else (loaded.max_id, *loaded.gone)
            # The IVF saved beside the file, if built for it; else built on a later search.
            saved = None
            if (
                key is not None
                and loaded.path is not None
                and len(loaded.rows) >= max(1, self._ivf_from)
            ):
                saved = load_ivf(loaded.path, key, len(loaded.rows), loaded.layout)
            with self._lock:
                self._base, self._path, self._tail = loaded.rows, loaded.path, tail
                self._mapped = _identity(loaded.path)
                self._base_key, self._layout = key, loaded.layout
                self._gone, self._max_id, self._last = loaded.gone, top, last
                self._epoch = epoch
                self._ivf, self._trained_rows = saved or (None, 0)
                self._generation += 1
                self._forget_scopes()

    def _forget_scopes(self) -> None:
        """Drop the scope caches of a base just replaced (they would keep its mapping,
        and so its pages, alive until the next scoped search)."""
        self._scoped = self._gathered = None


class _Job:
    """What a fold or IVF build works on: a snapshot taken under the index's lock."""

    __slots__ = (
        "base",
        "base_key",
        "generation",
        "gone",
        "last",
        "layout",
        "max_id",
        "path",
        "tail",
    )

    def __init__(
        self,
        generation: int,
        base: Rows,
        tail: Rows | None,
        max_id: int,
        gone: tuple[int, ...],
        last: tuple[str, int, str] | None,
        path: Path | None,
        base_key: tuple[int, ...] | None,
        layout: str | None,
    ) -> None:
        self.generation, self.base, self.tail = generation, base, tail
        self.max_id, self.gone, self.last, self.path = max_id, gone, last, path
        self.base_key, self.layout = base_key, layout


class _Gathered:
    """A scope's codes and scales copied contiguous from the base, at ``positions``."""

    __slots__ = ("codes", "positions", "scales")

    def __init__(
        self,
        positions: npt.NDArray[np.int64],
        codes: npt.NDArray[np.int8],
        scales: npt.NDArray[np.float32],
    ) -> None:
        self.positions, self.codes, self.scales = positions, codes, scales

    @classmethod
    def of(cls, base: Rows, positions: npt.NDArray[np.int64]) -> _Gathered:
        """The rows of ``base`` at ``positions``, copied."""
        return cls(positions, base.codes[positions], base.scales[positions])

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return int(self.codes.nbytes + self.scales.nbytes)

    def score(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Dot products of ``query`` with the rows, in ``positions`` order."""
        return scores(self.codes, self.scales, query)


def _vectors_of(parts: Sequence[Rows]) -> Callable[[Positions], npt.NDArray[np.float32]]:
    """Rows by position over ``parts`` taken as one (the first part's rows first)."""
    if len(parts) == 1:
        return parts[0].vectors
    starts = np.cumsum([0, *(len(p) for p in parts)])

    def vectors(positions: Positions) -> npt.NDArray[np.float32]:
        which = np.searchsorted(starts, positions, side="right") - 1
        out = np.empty((len(positions), parts[0].codes.shape[1]), dtype=np.float32)
        for i, part in enumerate(parts):
            mine = which == i
            if mine.any():
                out[mine] = part.vectors(positions[mine] - starts[i])
        return out

    return vectors


def _matching(
    rows: Rows, conversations: Sequence[int] | None, kinds: Sequence[Kind] | None
) -> npt.NDArray[np.int64]:
    """Positions of the rows in ``conversations`` (None: any) of ``kinds`` (None: any)."""
    mask = np.ones(len(rows), dtype=bool)
    if conversations is not None:
        wanted = np.asarray(list(conversations), dtype=np.int64)
        # One equality pass is ~0.2 ms at 1M rows; isin sorts when given many ids.
        mask &= rows.convs == wanted[0] if len(wanted) == 1 else np.isin(rows.convs, wanted)
    if kinds is not None:
        codes = np.asarray([KINDS.index(kind) for kind in kinds], dtype=np.int8)
        mask &= np.isin(rows.kinds, codes)
    return np.flatnonzero(mask).astype(np.int64, copy=False)


def _keys_json(keys: Iterable[tuple[Kind, int]]) -> str:
    """(kind, row id) pairs as one JSON array of pairs, for ``json_each``."""
    return orjson.dumps([list(k) for k in keys]).decode()


def _identity(path: Path | None) -> tuple[int, int, int] | None:
    """(device, inode, size) of the file a base was just mapped from (None: in memory)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size)


def _truncated(path: Path, mapped: tuple[int, int, int] | None) -> bool:
    """Whether the file mapped as ``mapped`` is the one at ``path`` and is now shorter.

    One ``stat`` a search (a few microseconds). A file replaced by rename (a rebuild in
    another process) is a new inode: the old mapping stays valid, so that is not it.
    """
    if mapped is None:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == mapped[:2] and st.st_size < mapped[2]
