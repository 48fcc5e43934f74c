"""The engine's recall operations: grep, expand_query, the graph query scoped to a
session, and assemble with the graph's recall block.

Recall sits above the session memory (``brain.lcm.service``) and the graph
(``brain.graph.service``) and calls both: ``assemble`` queries the graph with the
session's newest user message and hands the block to the session's assembler. Reads
run on a read connection; embedding a query and calling a chat model happen with no
lock held (a provider may be slow).

Tested through the engine: tests/brain/recall/ (search/, test_expand) and
tests/brain/lcm/assemble/test_assembler.py and tests/brain/graph/test_nodes.py (recall).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from brain.config import BrainConfig
from brain.graph.service import Conversations, GraphService
from brain.lcm.service import LcmService
from brain.store.access import Access
from brain.store.connection import Store
from brain.vectors.embedding import Embedding

if TYPE_CHECKING:
    from brain.config import RecallMode
    from brain.graph.retrieval import QueryResult
    from brain.graph.traverse import TraverseOptions
    from brain.lcm.assemble import Assembled, AssembleOptions
    from brain.providers.llm import ChatClient
    from brain.recall.expand import Draft
    from brain.recall.search import GrepOptions, Hit, Nearest
    from brain.results import EmbeddedQuery

RECALL_MAX_CHARS: Final = 4_000
"""The largest recall block ``assemble`` asks the graph for (about 1,000 tokens)."""
RECALL_MAX_QUERY: Final = 16_384
"""Characters of the newest user message that ``assemble``'s recall queries with."""


class RecallService:
    """Finding what was said, and what the graph knows, for one database."""

    def __init__(
        self,
        access: Access,
        config: BrainConfig,
        vectors: Embedding,
        lcm: LcmService,
        graph: GraphService,
    ) -> None:
        """``vectors``: the embedder and indexes; ``lcm``, ``graph``: the layers recalled from."""
        self._access = access
        self._config = config
        self._vectors = vectors
        self._lcm = lcm
        self._graph = graph
        self.chat: ChatClient | None = None
        """The chat client for LLM answers (``expand_query``); None: extractive only."""
        self.embed_before_search = 0
        """At most this many queued rows of its scope a semantic or hybrid grep embeds
        itself before it searches (0: none, the daemon's background embedder does it).
        For a one-shot process (``brain call``), which has no background embedder."""

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
        from brain.recall.search import grep
        from brain.recall.search.scope import narrowed, scoped

        embedder = self._vectors.embedder
        query_vector = None
        if options.mode in ("semantic", "hybrid"):
            if embedded is None:
                embedded = self._vectors.embed_query(embedder, options.query)
            query_vector = embedded.vector
            if self.embed_before_search > 0:
                with self._access.reading() as store:
                    scope = narrowed(
                        store, options, session=session, session_key=session_key
                    ).conversations
                if scope != ():
                    self._vectors.embed_scope(embedder, scope, self.embed_before_search)
        index = self._vectors.indexes(embedder)[0] if query_vector is not None else None
        with self._access.reading() as store:
            options = scoped(store, options, session=session, session_key=session_key)
            if options.conversations == ():
                return []
            nearest: Nearest | None = None
            if query_vector is not None and index is not None:
                index.verify(store)  # another process may have switched the embedder
                conversations = options.conversations

                def nearest(k: int) -> list[tuple[str, int, float]]:
                    return list(index.search(store, query_vector, k, conversations))

            return grep(store, options, nearest)

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

        The database is read on a read connection (``draft_answer``); the model (if
        any) is called after (``synthesize``), so a slow provider never holds up
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
        from brain.lcm.context import session_scope
        from brain.recall.expand import Draft, extract, gather

        with self._access.reading() as store:
            gathered = gather(
                store,
                prompt,
                summary_ids=summary_ids,
                query=query,
                scope=session_scope(store, session),
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
        from brain.recall.search.node_ranking import ranked_node_seeds
        from brain.recall.search.terms import fts_query

        return self._graph.query(
            text,
            chat_id=chat_id,
            options=options,
            record=record,
            conversations=None if session is None else _of_session(session),
            summaries_only=summaries_only,
            embedded=embedded,
            match=fts_query(text),
            seeder=ranked_node_seeds,
        )

    def recall_text(self, session: str) -> str:
        """The query ``assemble``'s recall runs: the session's newest user message ("" if none)."""
        from brain.lcm.messages import newest_user_text

        with self._access.reading() as store:
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
        session alone. ``shadow`` also runs a graph query on the session's newest
        user message (its trace filed under the session as chat id) but shows
        nothing of it; ``on`` shows the query's context block as a user turn after
        the summaries, within the budget (at most a quarter of it), or not at all
        when it does not fit. ``summaries_only``: only the session's summaries may
        fire in that query, no taught, directive or workspace node (a call under a
        grant: the grant reaches the session, not the graph).
        ``embedded``: ``recall_text(session)`` already embedded (``embed_query``);
        otherwise it is read and embedded here, the embedding outside the lock.
        """
        from brain.graph.traverse import TraverseOptions
        from brain.lcm.assemble import RecallReport

        recall = recall or self._config.recall_mode
        if recall == "off":
            return self._lcm.assemble(session, options)
        text = embedded.text if embedded is not None else self.recall_text(session)
        if not text:
            assembled = self._lcm.assemble(session, options)
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
        assembled = self._lcm.assemble(session, options)
        report = RecallReport(
            recall,
            found.trace_id,
            [f.id for f in found.fired],
            assembled.recall_tokens > 0,
            assembled.recall_tokens,
        )
        return replace(assembled, recall=report)


def _of_session(session: str) -> Conversations:
    """The session's conversation, looked up inside the query's read (none if unknown)."""

    def conversations(store: Store) -> list[int]:
        from brain.lcm.context import find_session

        filed = find_session(store, session)
        return [] if filed is None else [filed.id]

    return conversations
