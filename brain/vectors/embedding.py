"""The engine's vector side: one embedder's two indexes over a store, and the embedding
loops that run the embedder outside the store's lock.

``Brain`` keeps one ``Embedding``. The indexes (grep's over messages and summaries,
the graph's over nodes and summaries) are made once per embedder, under the lock,
because making one checks (and, when allowed, switches) the stored identity, a write;
using one afterwards is a read, safe from any thread. Each embedding loop takes a
batch from the queue under the lock, embeds it with no lock held (a provider may be
slow), and stores the vectors under the lock again, so other requests go on between.

Nothing here imports numpy until an index is made (``info`` and ``ingest`` never do).
Tested through the engine: ``tests/brain/vectors/test_index.py`` (identity checks and
switches, draining the queue), ``tests/brain/recall`` (a one-shot search embeds its
scope first) and ``tests/brain/graph/sync`` (a sync embeds the nodes it added).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import orjson

from brain.errors import EmbedderMismatch, ProviderError
from brain.progress import Progress, ignore
from brain.store.connection import Store, StoreLease
from brain.store.identity import stored_identity
from brain.vectors.inflight import InFlight

GRAPH_APPROXIMATE_BELOW: Final = 20_000
"""A taught node's neighbours come from the graph index's IVF lists above this many nodes
and summaries: O(sqrt(rows)) lists probed, not a product over every row (4-20 ms of a
100k-node teach, by load). A query's seeds stay exact below 200k rows (IVF's recall of
the exact top 100 was 0.75 on hash embeddings at 100k)."""

if TYPE_CHECKING:
    from brain.results import EmbeddedQuery
    from brain.vectors.embedders import Embedder
    from brain.vectors.index import Pending, VectorIndex


class Embedding:
    """One engine's vector indexes and embedding loops over the store ``lease`` lends."""

    def __init__(self, lease: StoreLease, embedder: Embedder, *, may_switch: bool) -> None:
        """``lease``: the store under the engine's lock. ``embedder``: the engine's
        embedder. ``may_switch``: an index may replace stored vectors of another
        embedder (see ``VectorIndex.check_identity``)."""
        self._lease = lease
        self.embedder = embedder
        """The engine's embedder; replacing it re-embeds everything (lazily): the
        indexes are made again for it on next use."""
        self.may_switch = may_switch
        self._made = threading.Lock()
        self.index: VectorIndex | None = None
        """grep's index (messages and summaries) for the current embedder, once made."""
        self._graph_index: VectorIndex | None = None
        self._embedder: Embedder | None = None
        self._ahead_lock = threading.Lock()
        self._flight: InFlight | None = None
        """``embed_ahead``'s batch at the embedder, stored by its next call."""

    def forget(self) -> None:
        """Drop the indexes (the database was reopened); they are made again on next use."""
        self.index = self._graph_index = None
        self._embedder = None

    def made(self, store: Store, embedder: Embedder) -> tuple[VectorIndex, VectorIndex]:
        """grep's and the graph's index for ``embedder``, made (identity checked) if new.

        The caller holds the engine's lock on ``store``; ``embedder.dim`` must be known
        (``learn_dim`` first, outside the lock).
        """
        from brain.vectors.index import VectorIndex

        index, graph_index = self.index, self._graph_index
        if index is None or graph_index is None or self._embedder is not embedder:
            index = VectorIndex(embedder.dim)
            index.check_identity(store, embedder, may_switch=self.may_switch)
            graph_index = VectorIndex(
                embedder.dim, approximate_below=GRAPH_APPROXIMATE_BELOW, kinds=("node", "summary")
            )
            graph_index.check_identity(store, embedder, may_switch=self.may_switch)
            self.index, self._graph_index, self._embedder = index, graph_index, embedder
        return index, graph_index

    def indexes(self, embedder: Embedder) -> tuple[VectorIndex, VectorIndex]:
        """``made`` without the caller holding the lock: taken only when one must be made."""
        index, graph_index = self.index, self._graph_index
        if index is None or graph_index is None or self._embedder is not embedder:
            with self._lease() as store:
                return self.made(store, embedder)
        return index, graph_index

    def embed_query(self, embedder: Embedder, text: str) -> EmbeddedQuery:
        """``text`` embedded, taking no lock (it may wait on a provider)."""
        from brain.results import EmbeddedQuery

        learn_dim(embedder)
        started = time.perf_counter()
        vector = embedder.embed([text])[0]
        return EmbeddedQuery(text, vector, (time.perf_counter() - started) * 1000)

    def pending(self, embedder: Embedder) -> int:
        """How many messages and summaries wait to be embedded (checks the identity first)."""
        learn_dim(embedder)
        with self._lease() as store:
            return self.made(store, embedder)[0].pending(store)

    def embed_batch(self, embedder: Embedder, batch: int = 256) -> int:
        """Embed one batch of queued rows; how many were stored (0: nothing queued).

        Only texts with no stored vector are embedded, each once. Raises
        :class:`~brain.errors.EmbedderMismatch` if another process switched the
        database to another embedder.
        """
        learn_dim(embedder)
        index = self.indexes(embedder)[0]
        while True:
            # Taken without writing: rows with nothing behind them are dequeued when the
            # batch is stored, in its transaction. (Taking it on a pooled read connection,
            # off the writer's lock, took the idle connection ``info`` and ``ping`` answer
            # from while every database thread waited: tests/e2e/test_cheap_requests.py.)
            with self._lease() as store:
                taken = index.take(store, batch, read_only=True)
            if not taken.keys and not taken.gone:
                return 0
            vectors = taken.embed(embedder, index.dim)
            with self._lease() as store:
                if self.index is not index:  # the embedder changed meanwhile
                    return 0
                stored = index.put(store, taken, vectors)
            if taken.keys:
                return stored
            # Only rows that no longer exist, now dequeued: look again.

    def embed_ahead(self, embedder: Embedder, batch: int = 4096) -> int:
        """``embed_batch`` with the next batch at the embedder meanwhile: how many rows of
        the batch stored were stored (0: nothing queued).

        A call takes the next ``batch`` rows after the ones at the embedder, sends them to
        the embedder once it has answered, and stores the answered batch while they are
        embedded; the last batch sent stays at the embedder when the call returns, for
        the next call to store (or for nobody: until stored, its rows stay queued, so a
        call that fails or never comes loses nothing). Meant for an embedder that works
        off this process's interpreter (``ChildStaticEmbedder``): its child then embeds
        while this thread waits for the writer's lock, takes and puts, and while the
        caller does other work between calls. The rows of two batches never overlap
        (the next is taken after the last key of the one in flight), and ``put`` stores
        only rows still queued, so no row is stored twice. One caller at a time.
        """
        learn_dim(embedder)
        with self._ahead_lock:
            try:
                return self._embed_ahead(embedder, batch)
            except BaseException:
                self._flight = None  # its rows stay queued: the next call takes them again
                raise

    def _embed_ahead(self, embedder: Embedder, batch: int) -> int:
        """``embed_ahead`` under its lock."""
        while True:
            flight = self._flight
            self._flight = None
            index = self.indexes(embedder)[0]
            if flight is None or flight.index is not index:
                with self._lease() as store:
                    first = index.take(store, batch, read_only=True)
                if not first.keys and not first.gone:
                    return 0
                flight = InFlight(embedder, index, first)
            with self._lease() as store:
                following = index.take(store, batch, read_only=True, after=flight.last)
            vectors = flight.result()
            if following.keys or following.gone:
                self._flight = InFlight(embedder, index, following)
            with self._lease() as store:
                if self.index is not index:  # the embedder changed meanwhile
                    self._flight = None
                    return 0
                stored = index.put(store, flight.pending, vectors)
            if flight.pending.keys:
                return stored
            # Only rows that no longer exist, now dequeued: look again.

    def embed_scope(
        self, embedder: Embedder, conversations: Sequence[int] | None, limit: int
    ) -> int:
        """Embed up to ``limit`` queued messages and summaries of ``conversations`` now
        (None: of every conversation); how many were stored.

        What a search needs from the queue when no background embedder will drain it.
        """
        done = 0
        while done < limit:
            with self._lease() as store:
                index = self.made(store, embedder)[0]
                taken = index.take(
                    store,
                    min(256, limit - done),
                    conversations=conversations,
                    kinds=("message", "summary"),
                )
            if not taken.keys:
                break
            vectors = taken.embed(embedder, index.dim)
            with self._lease() as store:
                if self.index is not index:  # the embedder changed meanwhile
                    break
                stored = index.put(store, taken, vectors)
            if stored == 0:  # every row taken was skipped: it stays queued
                break
            done += stored
        return done

    def embed_rows(
        self,
        embedder: Embedder,
        row_ids: Sequence[int],
        queued: Callable[[Store, Sequence[int]], Pending],
        *,
        batch: int = 256,
        progress: Progress = ignore,
    ) -> int:
        """Embed the graph rows among ``row_ids`` that ``queued`` finds still queued; how
        many of ``row_ids`` have a vector after it (rows another embedding, such as the
        background worker's, stored first count too).

        Skipped (left queued) when the stored vectors are another embedder's; a provider
        failure or an embedder switch meanwhile stops it, leaving the rest queued.
        ``progress`` hears rows embedded (phase ``embed``).
        """
        try:
            learn_dim(embedder)
        except ProviderError:
            return 0
        with self._lease() as store:
            stored = stored_identity(store)
            if stored is not None and stored != (embedder.name, str(embedder.dim)):
                return 0
            index = self.made(store, embedder)[1]
        done = 0
        for at in range(0, len(row_ids), batch):
            progress(at, len(row_ids), "embed")
            part = row_ids[at : at + batch]
            with self._lease() as store:
                taken = queued(store, part)
                # The background worker may have embedded some of them first: they
                # have their vector all the same, so they count as embedded.
                done += _stored_elsewhere(store, part, taken)
            try:
                vectors = taken.embed(embedder, index.dim)
                with self._lease() as store:
                    done += index.put(store, taken, vectors)
            except (ProviderError, EmbedderMismatch):
                break
        progress(len(row_ids), len(row_ids), "embed")
        return done


def _stored_elsewhere(store: Store, row_ids: Sequence[int], taken: Pending) -> int:
    """How many graph rows of ``row_ids`` are no longer queued yet have a stored vector."""
    mine = {row for _, row in taken.keys}
    others = [row for row in row_ids if row not in mine]
    if not others:
        return 0
    found = store.one(
        "SELECT count(*) FROM vectors WHERE kind = 'node' AND row_id IN "
        "(SELECT value FROM json_each(?))",
        (orjson.dumps(others),),
    )
    return int(found[0]) if found is not None else 0


def learn_dim(embedder: Embedder) -> None:
    """Make sure ``embedder.dim`` is known, asking a provider once with a short text if not.

    An OpenAI-compatible embedder without a configured dimension learns it from its first
    answer; the index needs it before it can check or store anything. Runs outside the
    engine's lock, since it may wait on the network.
    """
    if embedder.dim <= 0:
        embedder.embed(["dimension probe"])
        if embedder.dim <= 0:
            raise ProviderError(f"embedder {embedder.name} did not say its dimension")
