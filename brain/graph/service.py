"""The engine's graph operations: query, teach, learn, trace, sync, maintain, health.

One ``GraphService`` per open database holds the in-memory mirror of the graph
(``brain.graph.mirror.Graph``, built on first use) and runs each operation on the
connection it needs: queries and traces on a read connection, teach and learn under
the write lock, sync file by file under it, maintain and health on a connection of
their own. Embedding always happens outside the lock (a provider may be slow).

Nothing heavy is imported until an operation runs (``info`` never loads the graph).
Tested through the engine: tests/brain/graph/ (test_retrieval, test_traces,
sync/, maintain/).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain.errors import DatabaseFileLost, InvalidInput, NotFound
from brain.progress import Progress, ignore
from brain.store.access import Access
from brain.store.connection import Store
from brain.vectors.embedding import Embedding

if TYPE_CHECKING:
    from brain.graph.maintain import Health, MaintainOptions, MaintainReport
    from brain.graph.mirror import Graph
    from brain.graph.nodes import NewNode
    from brain.graph.retrieval import LearnResult, QueryResult, TeachResult
    from brain.graph.seeding import Seeder
    from brain.graph.sync import SyncIndexed, SyncReport
    from brain.graph.traverse import TraverseOptions
    from brain.results import EmbeddedQuery

Conversations = Callable[[Store], "Sequence[int] | None"]
"""The conversations whose summaries a query may fire, read inside the query's read
transaction (None: every conversation's)."""


class GraphService:
    """The retrieval graph of one database."""

    def __init__(self, access: Access, vectors: Embedding) -> None:
        """``access``: the database's connections; ``vectors``: its embedder and indexes."""
        self._access = access
        self._vectors = vectors
        self._built: Graph | None = None
        self._building = threading.Lock()

    @property
    def mirror(self) -> Graph:
        """The in-memory mirror of the graph, built on first use (it loads lazily)."""
        if self._built is None:
            with self._building:
                if self._built is None:
                    from brain.graph.mirror import Graph

                    self._built = Graph()
        return self._built

    def forget(self) -> None:
        """Mark the mirror stale (the database was reopened or maintained); none built:
        nothing loaded to forget."""
        if self._built is not None:
            self._built.invalidate()

    def query(
        self,
        text: str,
        *,
        chat_id: str | None = None,
        options: TraverseOptions | None = None,
        record: bool = True,
        conversations: Conversations | None = None,
        summaries_only: bool = False,
        embedded: EmbeddedQuery | None = None,
        match: str | None = None,
        seeder: Seeder | None = None,
    ) -> QueryResult:
        """Retrieve from the graph: seeds that best match ``text``, spread, trace (``record``).

        ``conversations``: only their summaries may fire (taught and workspace nodes
        also may, unless ``summaries_only``). ``embedded``: ``text`` already embedded
        (``Brain.embed_query``); otherwise it is embedded here, outside the lock.
        ``match``: ``text``'s FTS5 match expression (the recall layer builds it), so
        seeds come from keywords as well as vectors (``brain.graph.seeding``); None:
        vectors alone. ``seeder``: where the seeds come from (default
        ``brain.graph.seeding.hybrid_seeds``; the recall layer passes its learned
        ranking, ``brain.recall.search.node_ranking``).
        """
        from brain.graph.retrieval import answer_query
        from brain.graph.traverse import TraverseOptions

        if not text.strip():
            raise InvalidInput("query", "must not be empty")
        embedder = self._vectors.embedder
        if embedded is None:
            embedded = self._vectors.embed_query(embedder, text)
        vector, embed_ms = embedded.vector, embedded.ms
        index = self._vectors.indexes(embedder)[1]
        with self._access.reading() as store:
            index.verify(store)
            scope = None if conversations is None else conversations(store)
            result, recording = answer_query(
                store,
                self.mirror,
                index,
                vector,
                text,
                chat_id,
                options or TraverseOptions(),
                embed_ms,
                conversations=scope,
                summaries_only=summaries_only,
                match=match,
                **({} if seeder is None else {"seeder": seeder}),
            )
        if not record:
            return result
        # Recorded once the read is over: a commit made under an open read cannot be
        # checkpointed whole, which kept the WAL growing and checkpointing at every
        # query (``brain.graph.retrieval.Recording``).
        return recording.into(result, self._access.write_unsynced(recording.save))

    def warm(self) -> bool:
        """Load the mirror and the graph's vector index now; False when there is no graph.

        A daemon calls it in the background after its first answer: a query that comes
        later then finds both loaded (at 100k nodes they were seconds of the first
        query). An embedder that has not said its dimension is not asked here (that
        may wait on a provider): the first query loads everything then.
        """
        with self._access.reading() as store:
            if not store.scalar("SELECT EXISTS (SELECT 1 FROM nodes)"):
                return False  # nothing imported or made: a graph may never be used
        embedder = self._vectors.embedder
        if embedder.dim <= 0:
            return False
        import numpy as np

        index = self._vectors.indexes(embedder)[1]
        with self._access.reading() as store:
            index.verify(store)
            self.mirror.refresh(store)
            # A search loads the index's rows (and starts its IVF build in the background).
            index.search(store, np.zeros(embedder.dim, dtype=np.float32), 1)
        return True

    def prepare_teach(self, node: NewNode, *, chat_id: str | None = None) -> NewNode:
        """``node`` as ``teach`` stores it: a correction with a chat carries the query it corrects.

        Its ``teach_text`` is what gets embedded (``embed_query``) before ``teach``.
        """
        if node.kind != "correction" or chat_id is None or "query" in node.metadata:
            return node
        from brain.graph.traces import find_trace

        with self._access.reading() as store:
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

        embedder = self._vectors.embedder
        if embedded is None:
            node = self.prepare_teach(node, chat_id=chat_id)
            embedded = self._vectors.embed_query(embedder, teach_text(node))
        with self._access.locked() as store:
            index = self._vectors.made(store, embedder)[1]
            return teach(
                store, self.mirror, index, node, embedded.vector, embedded.text, chat_id, links
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

        with self._access.locked() as store:
            return learn(store, self.mirror, outcome, trace_id, chat_id, useful)

    def trace(self, *, trace_id: str | None = None, chat_id: str | None = None) -> dict[str, Any]:
        """A trace with public node ids: by id, else the chat's latest, else the latest."""
        from brain.graph.traces import find_trace, trace_view

        with self._access.reading() as store:
            graph = self.mirror.refresh(store)
            return trace_view(find_trace(store, trace_id, chat_id), graph.public)

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
            self._access.locked, workspace, paths, authority, max_chars=max_chars, progress=progress
        )

    def embed_nodes(
        self, row_ids: Sequence[int], batch: int = 256, progress: Progress = ignore
    ) -> int:
        """Embed the queued nodes among ``row_ids`` now; how many have a vector after it
        (those the background worker embedded first count too).

        Skipped (left queued) when the stored vectors are another embedder's; a
        provider failure or an embedder switch meanwhile stops it, leaving the rest
        queued: the nodes are stored either way, only their vectors wait.
        """
        from brain.graph.sync import pending_nodes

        return self._vectors.embed_rows(
            self._vectors.embedder, row_ids, pending_nodes, batch=batch, progress=progress
        )

    def maintain(
        self,
        tasks: Sequence[str] | None = None,
        *,
        dry_run: bool = False,
        options: MaintainOptions | None = None,
        progress: Progress = ignore,
        in_child: bool = True,
    ) -> MaintainReport:
        """Run the graph's slow loop (``brain.graph.maintain``); ``dry_run`` writes nothing.

        It never takes the engine's lock: reading the snapshot and planning
        (seconds at 100k nodes) need none, and each chunk of writes is a short
        transaction that other requests' writes wait for at most once (SQLite's
        write lock, as for ``brain maintain`` in another process). With
        ``in_child`` (the default) it runs in a child process, so its planning
        does not hold this process's interpreter lock either (``brain maintain``,
        a process of its own already, runs it here). Either way the mirror
        follows each committed chunk instead of reloading the whole graph. The
        graph's vector index reloads by itself when maintenance deleted vectors
        (their epoch moved).
        """
        from brain.graph.maintain import TASKS, maintain
        from brain.graph.maintain.options import check_tasks

        tasks = TASKS if tasks is None else tasks
        check_tasks(tasks)
        graph = self.mirror
        if not in_child:
            with self._access.side() as store:
                return maintain(
                    store, graph, tasks, dry_run=dry_run, options=options, progress=progress
                )
        from brain.graph.maintain.child import maintain_in_child
        from brain.graph.maintain.snapshot import FULL_COLLECTIONS

        with self._access.lock:  # the write connection's file: the one the child must open
            if self._access.store.lost:
                raise DatabaseFileLost()
            identity = self._access.store.identity
        # The steps and the states made from them are many objects: no full collection
        # walks them all (and every other thread with them) while the run goes on.
        with graph.following(), FULL_COLLECTIONS.held_off():
            report = maintain_in_child(
                self._access.path,
                self._access.config,
                identity,
                tasks,
                dry_run=dry_run,
                options=options,
                progress=progress,
                # Applied in the pump thread, in batches with rests between: a state
                # costs the rows it changes, and readers never wait for a step.
                on_commit=graph.advance,
            )
            graph.advance([])  # any step still held, now
            return report

    def health(self) -> Health:
        """The retrieval graph's shape now (``brain.graph.maintain.health``).

        Read on a connection of its own, like ``maintain``: it reads every node
        and edge, which must not hold up other requests.
        """
        from brain.graph.maintain import health

        with self._access.side() as store:
            return health(store)


def teach_text(node: NewNode) -> str:
    """What a taught node is embedded as: its text, and for a correction the query it corrects."""
    metadata = node.metadata
    return node.text + ("\n" + str(metadata["query"]) if "query" in metadata else "")
