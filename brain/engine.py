"""The engine facade: one ``Brain`` per database, safe to call from many threads.

Callers (the daemon's worker threads, ``brain call``, scripts) go through this class.
It opens the database (``brain.store.access.Access``: the write connection behind a
lock, the read pool) and owns its lifecycle (reload, save, close, probe, info). Every
other operation is a method of the service of the layer that owns it (``lcm``,
``recall``, ``graph``, ``ops``; embedding: ``vectors.embedding``), exposed here under
the same name and signature (``_Via``). The services import what they run on first
call: opening a database and answering ``info`` loads neither the assembler, the
compactor, search, the graph nor numpy (``brain call info`` stays close to a bare start).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from types import MethodType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from brain.config import BrainConfig
from brain.errors import DatabaseMissing, StoreBusy
from brain.graph.service import GraphService
from brain.lcm.service import LcmService
from brain.ops.info import Info, read_info
from brain.ops.service import GrantService, RetentionService
from brain.recall.service import RecallService
from brain.store.access import Access
from brain.store.connection import Store, open_store
from brain.vectors.embedding import Embedding

if TYPE_CHECKING:
    from brain.lcm.summarize import Summarizer
    from brain.providers.llm import ChatClient
    from brain.results import EmbeddedQuery, SaveResult
    from brain.vectors.embedders import Embedder
    from brain.vectors.index import VectorIndex

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


class _Via(Generic[S, P, R]):
    """A ``Brain`` method that is a service's method: same signature and docstring,
    run on the ``Brain``'s service held in the attribute named ``service``."""

    def __init__(self, service: str, method: Callable[Concatenate[S, P], R]) -> None:
        self._service = service
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, brain: None, owner: type[Brain]) -> _Via[S, P, R]: ...
    @overload
    def __get__(self, brain: Brain, owner: type[Brain]) -> Callable[P, R]: ...
    def __get__(self, brain: Brain | None, owner: type[Brain]) -> Any:
        if brain is None:
            return self
        return MethodType(self._method, getattr(brain, self._service))


class Brain:
    """An open memory database."""

    def __init__(
        self,
        path: str | Path,
        config: BrainConfig | None = None,
        *,
        summarizer: Summarizer | None = None,
        embedder: Embedder | None = None,
        create: bool = True,
        may_switch_embedder: bool = False,
    ) -> None:
        """Open the database at ``path``.

        ``create``: create it if it never existed (``open_store``); without it a
        missing file is :class:`~brain.errors.DatabaseMissing`. ``may_switch_embedder``:
        if the stored vectors belong to another embedder, delete them and re-embed
        everything with ``embedder``; without it that is
        :class:`~brain.errors.EmbedderMismatch` naming the stored embedder (only a
        daemon told explicitly which embedder to use may switch; a one-shot command
        with a default embedder must not wipe the index a serving daemon uses).
        """
        from brain.payloads.files import sweep_stray_files

        self.config = config or BrainConfig()
        store = open_store(path, self.config, create=create)
        self.path = store.path
        # Reads go to connections of their own (opened on first need), so they never
        # wait for the lock a write holds (a compaction's, a bootstrap's, a sync's).
        self._access = Access(store, self.config)
        # Payload files left by a write that never committed (a killed process).
        sweep_stray_files(store, self.config.orphan_file_grace_s)
        _index_pending_files(store)
        if embedder is None:
            from brain.vectors.embedders import default_embedder

            embedder = default_embedder()
        self._vectors = Embedding(self._access.locked, embedder, may_switch=may_switch_embedder)
        # Cheap to build: each builds its parts and imports its modules on first use.
        self._lcm = LcmService(self._access, self.config, summarizer)
        self._graph = GraphService(self._access, self._vectors)
        self._recall = RecallService(
            self._access, self.config, self._vectors, self._lcm, self._graph
        )
        self._grants = GrantService(self._access)
        self._retention = RetentionService(self._access, self.config)

    # -- settings callers change while it runs -----------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedder for semantic search; replacing it re-embeds everything (lazily)."""
        return self._vectors.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        self._vectors.embedder = embedder

    @property
    def embeds_in_process(self) -> bool:
        """Whether the embedder makes a query's vector here in microseconds, never waiting
        on a provider (``brain.vectors.embedders.embeds_in_process``)."""
        from brain.vectors.embedders import embeds_in_process

        return embeds_in_process(self._vectors.embedder)

    @property
    def chat(self) -> ChatClient | None:
        """The chat client for LLM answers (``expand_query``); None: extractive only."""
        return self._recall.chat

    @chat.setter
    def chat(self, chat: ChatClient | None) -> None:
        self._recall.chat = chat

    @property
    def embed_before_search(self) -> int:
        """At most this many queued rows of its scope a semantic or hybrid grep embeds
        itself before it searches (0: none; for a one-shot process, which has no
        background embedder)."""
        return self._recall.embed_before_search

    @embed_before_search.setter
    def embed_before_search(self, limit: int) -> None:
        self._recall.embed_before_search = limit

    @property
    def may_switch_embedder(self) -> bool:
        """Whether this engine may switch the database to its embedder (re-embedding all)."""
        return self._vectors.may_switch

    @property
    def _index(self) -> VectorIndex | None:
        """grep's vector index once made (the bench waits for its background build)."""
        return self._vectors.index

    @property
    def store(self) -> Store:
        """The underlying store (callers must not share it across threads)."""
        return self._access.store

    # -- sessions: brain/lcm/service.py --------------------------------------------

    ingest = _Via("_lcm", LcmService.ingest)
    bootstrap = _Via("_lcm", LcmService.bootstrap)
    get_message = _Via("_lcm", LcmService.get_message)
    describe = _Via("_lcm", LcmService.describe)
    expand = _Via("_lcm", LcmService.expand)
    suppress = _Via("_lcm", LcmService.suppress)
    index_entities = _Via("_lcm", LcmService.index_entities)
    entities = _Via("_lcm", LcmService.entities)
    entity = _Via("_lcm", LcmService.entity)
    recent = _Via("_lcm", LcmService.recent)
    refresh_rollups = _Via("_lcm", LcmService.refresh_rollups)
    compact = _Via("_lcm", LcmService.compact)
    compact_incremental = _Via("_lcm", LcmService.compact_incremental)
    rebuild_withheld = _Via("_lcm", LcmService.rebuild_withheld)
    withheld_sessions = _Via("_lcm", LcmService.withheld_sessions)
    stop_compactions = _Via("_lcm", LcmService.stop_compactions)
    compaction_due = _Via("_lcm", LcmService.compaction_due)

    # -- recall: brain/recall/service.py -------------------------------------------

    assemble = _Via("_recall", RecallService.assemble)
    recall_text = _Via("_recall", RecallService.recall_text)
    grep = _Via("_recall", RecallService.grep)
    query = _Via("_recall", RecallService.query)
    expand_query = _Via("_recall", RecallService.expand_query)
    draft_answer = _Via("_recall", RecallService.draft_answer)
    synthesize = _Via("_recall", RecallService.synthesize)

    # -- the retrieval graph: brain/graph/service.py -------------------------------

    prepare_teach = _Via("_graph", GraphService.prepare_teach)
    teach = _Via("_graph", GraphService.teach)
    learn = _Via("_graph", GraphService.learn)
    trace = _Via("_graph", GraphService.trace)
    sync = _Via("_graph", GraphService.sync)
    sync_index = _Via("_graph", GraphService.sync_index)
    embed_nodes = _Via("_graph", GraphService.embed_nodes)
    warm_graph = _Via("_graph", GraphService.warm)
    maintain = _Via("_graph", GraphService.maintain)
    health = _Via("_graph", GraphService.health)

    # -- grants: brain/ops/service.py ----------------------------------------------

    create_grant = _Via("_grants", GrantService.create_grant)
    get_grant = _Via("_grants", GrantService.get_grant)
    revoke_grant = _Via("_grants", GrantService.revoke_grant)
    charge_grant = _Via("_grants", GrantService.charge_grant)
    admit_grant = _Via("_grants", GrantService.admit_grant)
    renew_grant = _Via("_grants", GrantService.renew_grant)
    settle_grant = _Via("_grants", GrantService.settle_grant)

    # -- retention: brain/ops/retention.py -----------------------------------------

    retain = _Via("_retention", RetentionService.retain)

    # -- embedding: brain/vectors/embedding.py -------------------------------------

    def embed_pending(self, batch: int = 256) -> int:
        """Embed one batch of queued rows; how many were stored (0: nothing queued).

        Embedding runs outside the lock (``Embedding.embed_batch``). Raises
        :class:`~brain.errors.EmbedderMismatch` if another process switched the
        database to another embedder.
        """
        return self._vectors.embed_batch(self._vectors.embedder, batch)

    def embed_ahead(self, batch: int = 4096) -> int:
        """``embed_pending`` that leaves the next batch at the embedder when it returns:
        how many rows of the batch it stored were stored (0: nothing queued).

        For the background worker and an embedder that works off this process's
        interpreter (``ChildStaticEmbedder``): the child embeds one batch while this
        one is stored and the next taken, and while the caller does other work between
        calls. Rows at the embedder stay queued until stored (nothing is lost if no
        call follows), and no row is stored twice (``Embedding.embed_ahead``).
        """
        return self._vectors.embed_ahead(self._vectors.embedder, batch)

    def embeddings_pending(self) -> int:
        """How many messages and summaries wait to be embedded (checks the identity first)."""
        return self._vectors.pending(self._vectors.embedder)

    def embed_query(self, text: str) -> EmbeddedQuery:
        """Embed ``text`` with this engine's embedder, taking no lock (it may wait on a
        provider); :class:`~brain.errors.ProviderError` when a provider fails."""
        return self._vectors.embed_query(self._vectors.embedder, text)

    # -- lifecycle -----------------------------------------------------------------

    def probe(self) -> None:
        """The cheapest read that needs what every request needs: the engine lock and the file.

        The daemon's watchdog runs it: while it cannot complete, no request can.
        """
        with self._access.locked() as store:
            store.probe()

    def info(self) -> Info:
        """Counts of what is stored (always read fresh, so other processes' commits show)."""
        with self._access.reading() as store:
            embedder = self.embedder
            return read_info(store, db=str(self.path), embedder=embedder.name, dim=embedder.dim)

    def info_now(self) -> Info | None:
        """``info`` if it can be read without waiting, else None (ask ``info`` then).

        It reads the maintained counters on an idle read connection: no lock, no
        connection opened, a few statements (tens of microseconds), so the daemon
        answers it on its event loop instead of handing it to a worker thread.
        """
        loan = self._access.reading_now()
        if loan is None:
            return None
        with loan as store:
            embedder = self.embedder
            return read_info(store, db=str(self.path), embedder=embedder.name, dim=embedder.dim)

    @property
    def group_commit(self) -> bool:
        """Whether writes share WAL fsyncs (``BrainConfig.group_commit``, in effect)."""
        return self._access.group is not None

    def durable(self) -> None:
        """Return once every write committed before this call survives power loss.

        Only needed for writes made inside ``brain.store.groupsync.deferring()``;
        without group commit every commit is durable when it returns.
        """
        group = self._access.group
        if group is not None:
            group.wait()

    def save(self) -> SaveResult:
        """Make everything durable in the main file: checkpoint the WAL.

        Every acknowledged write is already committed (durable in the WAL);
        saving moves it into the database file so the WAL stays small.
        """
        from brain.results import SaveResult

        started = time.perf_counter()
        with self._access.locked() as store, self._access.checkpoints.paused():
            frames, done = store.checkpoint()
        return SaveResult(frames, done, (time.perf_counter() - started) * 1000)

    def reload(self) -> None:
        """Reopen the database, rebuilding any in-memory state from disk.

        The new connection is opened first and swapped in only once it is set up:
        if the file is gone (:class:`~brain.errors.DatabaseMissing`; nothing is
        created) or cannot be opened, the error is raised and the open store
        keeps serving (reads; writes are refused once its file is gone). A file
        replaced at the path (a restored backup) is opened instead of the old one.
        """
        with self._access.locked() as current:
            if not current.at_path():
                # Replaced or moved: this file's frames go into it, and the WAL (named
                # after the path, so about to be shared with the new file) is emptied.
                with contextlib.suppress(Exception), self._access.checkpoints.paused():
                    current.checkpoint(truncate=True)
            try:
                store = open_store(self.path, self.config, create=False)
            except DatabaseMissing as exc:
                raise DatabaseMissing(
                    f"cannot reload: database {self.path.name} is no longer there (moved or "
                    "deleted); the database opened before keeps serving"
                ) from exc
            _index_pending_files(store)
            self._access.swap(store)
            self._lcm.forget()
            self._graph.forget()
            self._vectors.forget()

    def close(self) -> None:
        """Refresh planner statistics, checkpoint and close; safe to call twice
        (``Access.close``: a moved file's WAL goes into the file opened)."""
        self._access.close()


def _index_pending_files(store: Store) -> None:
    """Make payloads stored before schema v8 searchable (``brain.payloads.filetext``).

    The engine's own step when it opens a database to write, not ``open_store``'s:
    opening a store only to read (``brain doctor``'s checks) writes nothing. Busy:
    another process holds the write lock (perhaps indexing them); what is left is
    picked up by the next open.
    """
    from brain.payloads.filetext import index_pending

    try:
        with contextlib.suppress(StoreBusy):
            index_pending(store)
    except BaseException:
        store.close()
        raise
