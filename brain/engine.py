"""The engine facade: one ``Brain`` per database, safe to call from many threads.

Callers (the daemon's worker threads, ``brain call``, scripts) go through this
class; it owns the store and serialises access to it with a lock, because an
apsw connection must not be used by two threads at once.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from brain.config import BrainConfig
from brain.errors import (
    DatabaseFileLost,
    DatabaseMissing,
    InvalidInput,
    NotFound,
    StorageError,
    StoreBusy,
)
from brain.ops.info import Info, read_info
from brain.progress import Progress, ignore
from brain.store.connection import Store, open_store
from brain.store.readpool import ReadPool
from brain.vectors.embedding import Embedding

# The engine's parts are imported by the methods that use them, on first call:
# opening a database and answering ``info`` must not load the assembler, the
# compactor, search, the graph or the summarizer (``brain call info`` and a
# daemon's first answer stay close to a bare interpreter start).
if TYPE_CHECKING:
    from brain.config import RecallMode
    from brain.graph.maintain import Health, MaintainOptions, MaintainReport
    from brain.graph.nodes import Graph, NewNode
    from brain.graph.retrieval import LearnResult, QueryResult, TeachResult
    from brain.graph.sync import SyncIndexed, SyncReport
    from brain.graph.traverse import TraverseOptions
    from brain.lcm.assemble import Assembled, AssembleOptions, Assembler
    from brain.lcm.bootstrap import BootstrapReport, OnFork
    from brain.lcm.compaction import CompactionReport, Compactor
    from brain.lcm.content import MessageIn
    from brain.lcm.ingest import IngestResult
    from brain.lcm.summarize import Summarizer
    from brain.lcm.suppress import SuppressResult
    from brain.ops.grants import Grant, Reach
    from brain.providers.llm import ChatClient
    from brain.recall.expand import Draft
    from brain.recall.search import GrepOptions, Hit, Nearest
    from brain.results import EmbeddedQuery, SaveResult
    from brain.vectors.embedders import Embedder
    from brain.vectors.index import VectorIndex

T = TypeVar("T")


RECALL_MAX_CHARS: Final = 4_000
"""The largest recall block ``assemble`` asks the graph for (about 1,000 tokens)."""
RECALL_MAX_QUERY: Final = 16_384
"""Characters of the newest user message that ``assemble``'s recall queries with."""


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

        self.config = config or BrainConfig()
        self._lock = threading.RLock()
        self._store = open_store(path, self.config, create=create)
        self.path = self._store.path
        # Reads go to connections of their own (opened on first need), so they never
        # wait for the lock a write holds (a compaction's, a bootstrap's, a sync's).
        self._readers = (
            ReadPool(self._open_second, self.config.read_connections)
            if self.config.read_connections > 0
            else None
        )
        self._sweep_stray_files()
        self._index_pending_files(self._store)
        # Built on first use (``_parts``): most processes never compact, assemble or
        # query, and ``info`` needs none of them.
        self._summarizer = summarizer
        self._parts_lock = threading.Lock()
        self._built_compactor: Compactor | None = None
        self._built_assembler: Assembler | None = None
        self._built_graph: Graph | None = None
        self._compactions_stopped = False
        self.chat: ChatClient | None = None
        """The chat client for LLM answers (``expand_query``); None: extractive only."""
        if embedder is None:
            from brain.vectors.embedders import default_embedder

            embedder = default_embedder()
        self.embedder: Embedder = embedder
        """The embedder for semantic search; replacing it re-embeds everything (lazily)."""
        self.embed_before_search = 0
        """At most this many queued rows of its scope a semantic or hybrid grep embeds
        itself before it searches (0: none, the daemon's background embedder does it).
        For a one-shot process (``brain call``), which has no background embedder."""
        self._vectors = Embedding(self._locked_store, may_switch=may_switch_embedder)

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
        return self._store

    # -- parts built on first use -------------------------------------------

    @property
    def _compactor(self) -> Compactor:
        """The compactor, built (and its modules imported) on first use."""
        if self._built_compactor is None:
            with self._parts_lock:
                if self._built_compactor is None:
                    from brain.lcm.compaction import Compactor
                    from brain.lcm.summarize import ExtractiveSummarizer

                    extractive = ExtractiveSummarizer()
                    compactor = Compactor(
                        self._locked_store,
                        self.config.compaction,
                        self._summarizer or extractive,
                        extractive,
                    )
                    if self._compactions_stopped:
                        compactor.stop()
                    self._built_compactor = compactor
        return self._built_compactor

    @property
    def _assembler(self) -> Assembler:
        """The assembler, built on first use."""
        if self._built_assembler is None:
            with self._parts_lock:
                if self._built_assembler is None:
                    from brain.lcm.assemble import Assembler

                    self._built_assembler = Assembler(self.config.compaction)
        return self._built_assembler

    @property
    def _graph(self) -> Graph:
        """The in-memory mirror of the retrieval graph, built on first use (loads lazily)."""
        if self._built_graph is None:
            with self._parts_lock:
                if self._built_graph is None:
                    from brain.graph.nodes import Graph

                    self._built_graph = Graph()
        return self._built_graph

    # -- writes -------------------------------------------------------------

    def ingest(
        self,
        session: str,
        messages: Sequence[MessageIn],
        *,
        session_key: str | None = None,
        field: str = "messages",
        batch: bool = True,
        create: bool = True,
    ) -> IngestResult:
        """Append messages to a session; see ``brain.lcm.ingest.ingest``."""

        from brain.lcm.ingest import ingest

        with self._lock:
            return ingest(
                self._store,
                session,
                messages,
                session_key=session_key,
                field=field,
                batch=batch,
                create=create,
            )

    def bootstrap(
        self,
        session: str,
        path: str | Path,
        *,
        session_key: str | None = None,
        on_fork: OnFork = "refuse",
        progress: Progress | None = None,
    ) -> BootstrapReport:
        """Reconcile a session from a JSONL transcript; see ``brain.lcm.bootstrap``.

        The file is read outside the lock; each batch of messages takes it for
        one transaction, so other requests go on between batches.
        """

        from brain.lcm.bootstrap import bootstrap

        return bootstrap(
            self._locked_store,
            session,
            path,
            session_key=session_key,
            on_fork=on_fork,
            progress=progress,
        )

    def embed_pending(self, batch: int = 256) -> int:
        """Embed one batch of queued rows; return how many were stored (0: nothing queued).

        The queue is read and the vectors written under the lock; embedding runs
        outside it, so reads and ingests go on meanwhile. Only texts with no stored
        vector are embedded, each once. Raises :class:`~brain.errors.EmbedderMismatch`
        if another process switched the database to another embedder.
        """
        return self._vectors.embed_batch(self.embedder, batch)

    def embeddings_pending(self) -> int:
        """How many messages and summaries wait to be embedded (checks the identity first)."""
        return self._vectors.pending(self.embedder)

    def embed_query(self, text: str) -> EmbeddedQuery:
        """Embed ``text`` with this engine's embedder, taking no lock (it may wait on a provider).

        Raises :class:`~brain.errors.ProviderError` when a provider fails.
        """
        return self._vectors.embed_query(self.embedder, text)

    # -- the retrieval graph ------------------------------------------------------

    def query(
        self,
        text: str,
        *,
        chat_id: str | None = None,
        options: TraverseOptions | None = None,
        record: bool = True,
        session: str | None = None,
        summaries_only: bool = False,
        embedded: EmbeddedQuery | None = None,
    ) -> QueryResult:
        """Retrieve from the graph: seeds nearest ``text``, spread, trace (``record``).

        With ``session`` only that session's summaries may fire (taught and workspace
        nodes also may, unless ``summaries_only``): what ``assemble`` shows one
        session never carries another session's conversation. ``embedded``: ``text``
        already embedded (``embed_query``); otherwise it is embedded here, outside the lock.
        """
        from brain.graph.retrieval import run_query
        from brain.graph.traverse import TraverseOptions

        if not text.strip():
            raise InvalidInput("query", "must not be empty")
        embedder = self.embedder
        if embedded is None:
            embedded = self.embed_query(text)
        vector, embed_ms = embedded.vector, embedded.ms
        index = self._vectors.indexes(embedder)[1]
        with self._reading() as store:
            index.verify(store)
            scope = None
            if session is not None:
                from brain.lcm.context import find_session

                filed = find_session(store, session)
                scope = [] if filed is None else [filed.id]
            return run_query(
                store,
                self._graph,
                index,
                vector,
                text,
                chat_id,
                options or TraverseOptions(),
                embed_ms,
                record=record,
                conversations=scope,
                summaries_only=summaries_only,
                write=self._write,
            )

    def prepare_teach(self, node: NewNode, *, chat_id: str | None = None) -> NewNode:
        """``node`` as ``teach`` stores it: a correction with a chat carries the query it corrects.

        Its ``teach_text`` is what gets embedded (``embed_query``) before ``teach``.
        """
        if node.kind != "correction" or chat_id is None or "query" in node.metadata:
            return node
        from brain.graph.traces import find_trace

        with self._reading() as store:
            try:
                query = find_trace(store, chat_id=chat_id).query
            except NotFound:
                return node
        return replace(node, metadata={**node.metadata, "query": query})

    def teach(
        self,
        node: NewNode,
        *,
        chat_id: str | None = None,
        links: Sequence[str] = (),
        embedded: EmbeddedQuery | None = None,
    ) -> TeachResult:
        """Add a teaching, correction or directive node, embedded and linked at once.

        ``links``: node ids the new node points at (see ``brain.graph.retrieval.teach``).
        ``embedded``: ``teach_text(prepare_teach(node))`` already embedded, ``node``
        being that prepared node; otherwise both happen here (embedding outside the lock).
        """
        from brain.graph.retrieval import teach

        embedder = self.embedder
        if embedded is None:
            node = self.prepare_teach(node, chat_id=chat_id)
            embedded = self.embed_query(teach_text(node))
        with self._lock:
            index = self._vectors.made(self._store, embedder)[1]
            return teach(
                self._store,
                self._graph,
                index,
                node,
                embedded.vector,
                embedded.text,
                chat_id,
                links,
            )

    def sync(
        self,
        workspace: str | Path,
        paths: Sequence[str | Path] = (),
        authority: Mapping[str, str] | None = None,
        *,
        embed: bool = True,
        max_chars: int | None = None,
        progress: Progress = ignore,
    ) -> SyncReport:
        """Index a workspace's markdown as chunk nodes, incrementally (``brain.graph.sync``).

        Files are read with no lock held; each file is then one short transaction
        under the lock, so requests and other processes' writes go on between files.
        With ``embed`` the nodes this sync added are embedded before it returns (a
        query right after finds them), in batches, outside the lock, unless the
        database's vectors belong to another embedder: then, as when the provider
        fails, they stay queued for the background embedder of the process that
        owns the index. A sync never switches the database's embedder. ``progress``
        hears files indexed (phase ``index``) and nodes embedded (``embed``).
        """
        indexed = self.sync_index(
            workspace, paths, authority, max_chars=max_chars, progress=progress
        )
        rows = indexed.new_rows
        embedded = self.embed_nodes(rows, progress=progress) if embed and rows else 0
        return indexed.report(embedded)

    def sync_index(
        self,
        workspace: str | Path,
        paths: Sequence[str | Path] = (),
        authority: Mapping[str, str] | None = None,
        *,
        max_chars: int | None = None,
        progress: Progress = ignore,
    ) -> SyncIndexed:
        """``sync``'s database part: the files indexed as nodes, their new nodes left queued.

        ``embed_nodes(result.new_rows)`` then embeds them (the daemon does so apart
        from its database threads, since it may wait on a provider).
        """
        from brain.graph.sync import index_workspace

        return index_workspace(
            self._locked_store, workspace, paths, authority, max_chars=max_chars, progress=progress
        )

    def embed_nodes(
        self, row_ids: Sequence[int], batch: int = 256, progress: Progress = ignore
    ) -> int:
        """Embed the queued nodes among ``row_ids`` now; how many got a vector.

        Skipped (left queued) when the stored vectors are another embedder's; a
        provider failure or an embedder switch meanwhile stops it, leaving the rest
        queued: the nodes are stored either way, only their vectors wait.
        """
        from brain.graph.sync import pending_nodes

        return self._vectors.embed_rows(
            self.embedder, row_ids, pending_nodes, batch=batch, progress=progress
        )

    def learn(
        self,
        outcome: float,
        *,
        trace_id: str | None = None,
        chat_id: str | None = None,
        useful: Sequence[str] = (),
    ) -> LearnResult:
        """Credit an outcome to a trace (by id, else the chat's latest, else the latest).

        ``useful``: fired node ids the caller used (see ``brain.graph.retrieval.learn``).
        """
        from brain.graph.retrieval import learn

        with self._lock:
            return learn(self._store, self._graph, outcome, trace_id, chat_id, useful)

    def trace(self, *, trace_id: str | None = None, chat_id: str | None = None) -> dict[str, Any]:
        """A trace with public node ids: by id, else the chat's latest, else the latest."""
        from brain.graph.traces import find_trace, trace_view

        with self._reading() as store:
            graph = self._graph.refresh(store)
            return trace_view(find_trace(store, trace_id, chat_id), graph.public)

    def maintain(
        self,
        tasks: Sequence[str] | None = None,
        *,
        dry_run: bool = False,
        options: MaintainOptions | None = None,
        progress: Progress = ignore,
    ) -> MaintainReport:
        """Run the graph's slow loop (``brain.graph.maintain``); ``dry_run`` writes nothing.

        It runs on a connection of its own and never takes the engine's lock:
        reading the snapshot and planning (seconds at 100k nodes) need no lock,
        and each chunk of writes is a short transaction that other requests'
        writes wait for at most once (SQLite's write lock, as for ``brain
        maintain`` in another process). Every chunk bumps the graph epoch, so
        the mirror reloads before the next query after it; it is also marked
        stale at the end. The graph's vector index reloads by itself when
        maintenance deleted vectors (their epoch moved).
        """
        from brain.graph.maintain import TASKS, maintain

        try:
            with self._side_store() as store:
                return maintain(
                    store,
                    None,
                    TASKS if tasks is None else tasks,
                    dry_run=dry_run,
                    options=options,
                    progress=progress,
                )
        finally:
            with self._lock:
                if self._built_graph is not None:  # none built: nothing loaded to forget
                    self._built_graph.invalidate()

    def health(self) -> Health:
        """The retrieval graph's shape now (``brain.graph.maintain.health``).

        Read on a connection of its own, like ``maintain``: it reads every node
        and edge, which must not hold up other requests.
        """
        from brain.graph.maintain import health

        with self._side_store() as store:
            return health(store)

    @contextlib.contextmanager
    def _side_store(self) -> Iterator[Store]:
        """A second connection to this database for long work done without the lock.

        An apsw connection must not be used by two threads at once, so work that
        reads the whole graph cannot share the engine's connection without holding
        the lock throughout; its own connection reads beside the engine's (WAL
        lets readers and one writer go on together), and its writes are ordinary
        short transactions.
        """
        store = self._open_second()
        try:
            yield store
        finally:
            store.close()

    def _open_second(self) -> Store:
        """Another connection to the file this engine opened (``DatabaseFileLost`` if gone)."""
        try:
            store = open_store(self.path, self.config, create=False)
        except DatabaseMissing:
            raise DatabaseFileLost() from None
        if store.identity != self._store.identity:  # another file now: never work on it
            store.close()
            raise DatabaseFileLost()
        return store

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Store]:
        """A store to read on: a pooled connection inside one read transaction.

        Its snapshot is one committed state, whatever the write connection is doing.
        Without a pool, or when no second connection can be opened (the file was
        moved or deleted: the connection opened before keeps serving reads), the
        read takes the write connection under the lock, as every read once did.
        """
        loan = None
        if self._readers is not None and not self._store.lost:
            with contextlib.suppress(StorageError, RuntimeError):
                loan = self._readers.read()
        if loan is None:
            with self._lock:
                yield self._store
            return
        with loan as store:
            yield store

    def _write(self, work: Callable[[Store], T], /) -> T:
        """Run ``work`` on the write connection under the lock (a read's small write)."""
        with self._lock:
            return work(self._store)

    # -- reads --------------------------------------------------------------

    def probe(self) -> None:
        """The cheapest read that needs what every request needs: the engine lock and the file.

        The daemon's watchdog runs it: while it cannot complete, no request can.
        """
        with self._lock:
            self._store.probe()

    def info(self) -> Info:
        """Counts of what is stored (always read fresh, so other processes' commits show)."""
        with self._reading() as store:
            embedder = self.embedder
            return read_info(store, db=str(self.path), embedder=embedder.name, dim=embedder.dim)

    def get_message(self, session: str, message_id: str) -> dict[str, Any]:
        """The message exactly as the client sent it (payload files read back)."""
        from brain.lcm.messages import find_in_session, restore_message

        with self._reading() as store:
            message = restore_message(store, find_in_session(store, session, message_id))
            message["id"] = message_id
            return message

    def recall_text(self, session: str) -> str:
        """The query ``assemble``'s recall runs: the session's newest user message ("" if none)."""
        from brain.lcm.messages import newest_user_text

        with self._reading() as store:
            return newest_user_text(store, session).strip()[:RECALL_MAX_QUERY]

    def assemble(
        self,
        session: str,
        options: AssembleOptions,
        *,
        recall: RecallMode | None = None,
        summaries_only: bool = False,
        embedded: EmbeddedQuery | None = None,
    ) -> Assembled:
        """The model-ready context for a session under a token budget.

        ``recall`` (default: the config's ``recall_mode``): ``off`` assembles the
        session alone. ``shadow`` also
        runs a graph query on the session's newest user message (its trace filed
        under the session as chat id) but shows nothing of it; ``on`` shows the
        query's context block as a user turn after the summaries, within the
        budget (at most a quarter of it), or not at all when it does not fit.
        ``summaries_only``: only the session's summaries may fire in that query,
        no taught, directive or workspace node (a call under a grant: the grant
        reaches the session, not the graph).
        ``embedded``: ``recall_text(session)`` already embedded (``embed_query``);
        otherwise it is read and embedded here, the embedding outside the lock.
        """
        from brain.graph.traverse import TraverseOptions
        from brain.lcm.assemble import RecallReport

        recall = recall or self.config.recall_mode
        if recall == "off":
            return self._assemble(session, options)
        text = embedded.text if embedded is not None else self.recall_text(session)
        if not text:
            assembled = self._assemble(session, options)
            return replace(assembled, recall=RecallReport(recall, None, [], False, 0))
        max_chars = max(1, min(RECALL_MAX_CHARS, options.budget))  # ~a quarter in tokens
        found = self.query(
            text,
            chat_id=session,
            options=TraverseOptions(max_chars=max_chars),
            session=session,
            summaries_only=summaries_only,
            embedded=embedded,
        )
        if recall == "on" and found.context:
            block = f'<recall trace="{found.trace_id}">\n{found.context}\n</recall>'
            options = replace(options, recall_block=block)
        assembled = self._assemble(session, options)
        report = RecallReport(
            recall,
            found.trace_id,
            [f.id for f in found.fired],
            assembled.recall_tokens > 0,
            assembled.recall_tokens,
        )
        return replace(assembled, recall=report)

    def _assemble(self, session: str, options: AssembleOptions) -> Assembled:
        """Assemble on a read connection; a budget or flush mark to remember goes to the
        write path (only when it changes, so assembles rarely take the lock)."""
        with self._reading() as store:
            return self._assembler.assemble(store, session, options, write=self._write)

    def describe(
        self,
        target: str,
        *,
        session: str | None,
        max_tokens: int = 4_000,
        lines: tuple[int, int] | None = None,
        include_suppressed: bool = False,
    ) -> dict[str, Any]:
        """Describe a summary, payload file or message id within a session (None: all)."""
        from brain.lcm.describe import describe
        from brain.lcm.messages import restore_message

        with self._reading() as store:
            return describe(
                store,
                target,
                self._scope(store, session),
                max_tokens=max_tokens,
                lines=lines,
                get_message=functools.partial(restore_message, store, keep_missing=True),
                include_suppressed=include_suppressed,
            )

    def suppress(
        self, ids: Sequence[str], *, session: str | None, suppressed: bool = True
    ) -> SuppressResult:
        """Hide (or, with ``suppressed=False``, show again) messages and summaries by id."""
        from brain.lcm.content import normalize_time
        from brain.lcm.suppress import set_suppressed

        stamp = normalize_time(None, "now")
        with self._lock:
            store = self._store
            return set_suppressed(
                store, ids, self._scope(store, session), suppressed=suppressed, now=stamp
            )

    def expand(
        self, summary_id: str, *, session: str | None, max_tokens: int = 4_000
    ) -> dict[str, Any]:
        """Walk a summary down to its sources under a token cap."""
        from brain.lcm.describe import expand

        with self._reading() as store:
            return expand(store, summary_id, self._scope(store, session), max_tokens=max_tokens)

    def expand_query(
        self,
        prompt: str,
        *,
        session: str | None,
        summary_ids: Sequence[str] = (),
        query: str | None = None,
        max_tokens: int = 2_000,
    ) -> dict[str, Any]:
        """A cited answer from source messages; see ``brain.recall.expand.expand_query``.

        The database is read under the lock (``draft_answer``); the model (if any) is
        called after it is released (``synthesize``), so a slow provider never holds up
        other callers.
        """
        draft = self.draft_answer(
            prompt, session=session, summary_ids=summary_ids, query=query, max_tokens=max_tokens
        )
        return self.synthesize(draft)

    def draft_answer(
        self,
        prompt: str,
        *,
        session: str | None,
        summary_ids: Sequence[str] = (),
        query: str | None = None,
        max_tokens: int = 2_000,
    ) -> Draft:
        """``expand_query``'s database part: the passages, and the extractive answer over them."""
        from brain.recall.expand import Draft, extract, gather

        with self._reading() as store:
            gathered = gather(
                store,
                prompt,
                summary_ids=summary_ids,
                query=query,
                scope=self._scope(store, session),
            )
        return Draft(gathered, extract(gathered, max_tokens), max_tokens)

    def synthesize(self, draft: Draft) -> dict[str, Any]:
        """``expand_query``'s model part (no lock): the chat client's answer, or the draft's.

        The extractive answer when no chat client is set; with ``fallback: true`` when
        the model fails or gives an answer that cannot be used.
        """
        from brain.recall.expand import synthesize

        return synthesize(
            draft.gathered, draft.extractive, max_tokens=draft.max_tokens, chat=self.chat
        )

    def grep(
        self,
        options: GrepOptions,
        *,
        session: str | None = None,
        session_key: str | None = None,
        embedded: EmbeddedQuery | None = None,
    ) -> list[Hit]:
        """Search one session, a session key's sessions, or (neither given) everything.

        ``embedded``: the query already embedded (``embed_query``) for a semantic or
        hybrid search; otherwise it is embedded here, outside the lock.
        """
        from brain.lcm.content import normalize_time
        from brain.recall.search import grep

        embedder = self.embedder
        query_vector = None
        if options.mode in ("semantic", "hybrid"):
            if embedded is None:
                embedded = self.embed_query(options.query)
            query_vector = embedded.vector
            if self.embed_before_search > 0:
                with self._reading() as store:
                    scope = self._grep_scope(store, options, session, session_key).conversations
                if scope != ():
                    self._vectors.embed_scope(embedder, scope, self.embed_before_search)
        index = self._vectors.indexes(embedder)[0] if query_vector is not None else None
        with self._reading() as store:
            options = self._grep_scope(store, options, session, session_key)
            if options.since is not None:
                options = replace(options, since=normalize_time(options.since, "since"))
            if options.before is not None:
                options = replace(options, before=normalize_time(options.before, "before"))
            if options.conversations == ():
                return []
            nearest: Nearest | None = None
            if query_vector is not None and index is not None:
                index.verify(store)  # another process may have switched the embedder
                scope = options.conversations

                def nearest(k: int) -> list[tuple[str, int, float]]:
                    return list(index.search(store, query_vector, k, scope))

            return grep(store, options, nearest)

    def _grep_scope(
        self, store: Store, options: GrepOptions, session: str | None, session_key: str | None
    ) -> GrepOptions:
        """``options`` narrowed to the session's or session key's conversations."""
        if session is not None:
            from brain.lcm.context import find_session

            filed = find_session(store, session)
            return replace(options, conversations=() if filed is None else (filed.id,))
        if session_key is not None:
            from brain.lcm.context import session_key_conversations

            return replace(options, conversations=session_key_conversations(store, session_key))
        return options

    # -- grants ---------------------------------------------------------------

    def create_grant(
        self,
        *,
        sessions: Sequence[str],
        session_key: str | None,
        methods: Sequence[str],
        token_cap: int,
        ttl_s: float,
    ) -> Grant:
        """Store a new grant; see ``brain.ops.grants.create``."""
        from brain.ops import grants

        with self._lock:
            return grants.create(
                self._store,
                sessions=sessions,
                session_key=session_key,
                methods=methods,
                token_cap=token_cap,
                ttl_s=ttl_s,
            )

    def get_grant(self, grant_id: str) -> Grant:
        """The stored grant (``NotFound`` if unknown)."""
        from brain.ops import grants

        with self._lock:
            return grants.get(self._store, grant_id)

    def revoke_grant(self, grant_id: str) -> Grant:
        """Revoke a grant; idempotent."""
        from brain.ops import grants

        with self._lock:
            return grants.revoke(self._store, grant_id)

    def charge_grant(self, grant_id: str, tokens: int) -> int:
        """Add an answer's cost to the grant's usage; return the new total."""
        from brain.ops import grants

        with self._lock:
            return grants.charge(self._store, grant_id, tokens)

    def admit_grant(self, grant_id: str, method: str, reach: Reach, holder: str) -> Grant | None:
        """Check the grant and hold it for one call; None while another process holds it.

        See ``brain.ops.grants.admit``: the check and a one-token reservation are one
        transaction, so the cap holds across processes sharing the database.
        """
        from brain.ops import grants

        with self._lock:
            return grants.admit(self._store, grant_id, method, reach, holder)

    def renew_grant(self, grant_id: str, holder: str) -> bool:
        """Extend a call's hold on a grant (``brain.ops.grants.renew``)."""
        from brain.ops import grants

        with self._lock:
            return grants.renew(self._store, grant_id, holder)

    def settle_grant(self, grant_id: str, holder: str, tokens: int) -> int:
        """Charge an admitted call's cost for its reservation and release its hold."""
        from brain.ops import grants

        with self._lock:
            return grants.settle(self._store, grant_id, holder, tokens)

    # -- compaction ---------------------------------------------------------

    def compact(
        self, session: str, *, target_tokens: int | None = None, progress: Progress = ignore
    ) -> CompactionReport:
        """Full sweep (or bounded sweeps down to ``target_tokens``) of a session."""
        return self._compactor.sweep(self._conversation_id(session), target_tokens, progress)

    def compact_incremental(self, session: str) -> CompactionReport:
        """Fold history if raw tokens outside the fresh tail are over the threshold."""
        return self._compactor.incremental(self._conversation_id(session))

    def rebuild_withheld(self, session: str) -> CompactionReport:
        """Rebuild the session's withheld summaries (a source suppressed) from what remains."""
        return self._compactor.rebuild(self._conversation_id(session))

    def withheld_sessions(self) -> list[str]:
        """Sessions whose context list shows a withheld summary awaiting its rebuild."""
        from brain.lcm.suppress import withheld_sessions

        with self._reading() as store:
            return withheld_sessions(store)

    def stop_compactions(self) -> None:
        """Let running compactions finish their current pass and start no more."""
        with self._parts_lock:
            self._compactions_stopped = True  # a compactor built later starts stopped
            compactor = self._built_compactor
        if compactor is not None:
            compactor.stop()

    def compaction_due(self, session: str) -> bool:
        """Whether a background compaction of the session would do anything now: fold
        (with ``auto``) or rebuild a withheld summary."""
        try:
            conversation_id = self._conversation_id(session)
            return self._compactor.eligible(conversation_id) or self._compactor.rebuild_due(
                conversation_id
            )
        except NotFound:
            return False

    def _conversation_id(self, session: str) -> int:
        from brain.lcm.context import conversation_id

        with self._lock:
            return conversation_id(self._store, session)

    @staticmethod
    def _scope(store: Store, session: str | None) -> Callable[[int], bool]:
        from brain.lcm.context import session_scope

        return session_scope(store, session)

    @contextlib.contextmanager
    def _locked_store(self) -> Iterator[Store]:
        with self._lock:
            yield self._store

    # -- lifecycle ----------------------------------------------------------

    def save(self) -> SaveResult:
        """Make everything durable in the main file: checkpoint the WAL.

        Every acknowledged write is already committed (durable in the WAL);
        saving moves it into the database file so the WAL stays small.
        """
        from brain.results import SaveResult

        started = time.perf_counter()
        with self._lock:
            frames, done = self._store.checkpoint()
        return SaveResult(frames, done, (time.perf_counter() - started) * 1000)

    def reload(self) -> None:
        """Reopen the database, rebuilding any in-memory state from disk.

        The new connection is opened first and swapped in only once it is set up:
        if the file is gone (:class:`~brain.errors.DatabaseMissing`; nothing is
        created) or cannot be opened, the error is raised and the open store
        keeps serving (reads; writes are refused once its file is gone). A file
        replaced at the path (a restored backup) is opened instead of the old one.
        """
        with self._lock:
            if not self._store.at_path():
                # Replaced or moved: this file's frames go into it, and the WAL (named
                # after the path, so about to be shared with the new file) is emptied.
                with contextlib.suppress(Exception):
                    self._store.checkpoint(truncate=True)
            try:
                store = open_store(self.path, self.config, create=False)
            except DatabaseMissing as exc:
                raise DatabaseMissing(
                    f"cannot reload: database {self.path.name} is no longer there (moved or "
                    "deleted); the database opened before keeps serving"
                ) from exc
            self._index_pending_files(store)
            old, self._store = self._store, store
            with contextlib.suppress(Exception):
                old.close()
            if self._readers is not None:
                self._readers.reset()  # they read the file opened before
            # Parts never built hold nothing to forget.
            if self._built_assembler is not None:
                self._built_assembler.forget()
            if self._built_graph is not None:
                self._built_graph.invalidate()
            self._vectors.forget()

    def close(self) -> None:
        """Refresh planner statistics, checkpoint and close; safe to call twice.

        If the file was moved, replaced or deleted meanwhile, every frame of the WAL
        goes into the file this process opened (where acknowledged writes belong) and
        the WAL file, still at the old path, is emptied: SQLite does not remove it for
        a moved database, and whatever database is opened at that path next would
        otherwise read this one's pages from it.
        """
        if self._readers is not None:
            self._readers.close()
        with self._lock:
            with contextlib.suppress(Exception):
                if self._store.at_path():
                    # SQLite's advice: run optimize before closing a long-lived connection.
                    self._store.optimize()
                    self._store.checkpoint()
                else:
                    self._store.checkpoint(truncate=True)
            self._store.close()

    @staticmethod
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

    def _sweep_stray_files(self) -> None:
        """Remove payload files left by a write that never committed (a killed process)."""
        from brain.payloads.files import sweep_stray_files

        sweep_stray_files(self._store, self.config.orphan_file_grace_s)


def teach_text(node: NewNode) -> str:
    """What a taught node is embedded as: its text, and for a correction the query it corrects."""
    metadata = node.metadata
    return node.text + ("\n" + str(metadata["query"]) if "query" in metadata else "")
