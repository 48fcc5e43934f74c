"""The engine's session operations: ingest, bootstrap, read back, assemble, describe,
expand, suppress, and the control of compaction.

One ``LcmService`` per open database holds the compactor (with the summarizer) and
the assembler (with its per-conversation caches), both built on first use: most
processes never compact or assemble, and ``info`` needs neither. Reads run on a
read connection; writes under the write lock; a compaction or a bootstrap takes the
lock once per step, so other requests go on between steps.

Tested through the engine: tests/brain/test_engine.py and tests/brain/lcm/ (ingest,
bootstrap, assemble, describe, suppress, compaction).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain import clock
from brain.config import BrainConfig
from brain.errors import InvalidInput, NotFound
from brain.progress import Progress, ignore
from brain.store.access import Access
from brain.store.connection import Store

if TYPE_CHECKING:
    from brain.lcm.assemble import Assembled, AssembleOptions, Assembler
    from brain.lcm.bootstrap import BootstrapReport, OnFork
    from brain.lcm.compaction import CompactionReport, Compactor
    from brain.lcm.content import MessageIn
    from brain.lcm.entities.lookup import EntityFound, EntityMentions
    from brain.lcm.hosts import HostTurn
    from brain.lcm.ingest import IngestResult
    from brain.lcm.rollups.build import RefreshReport
    from brain.lcm.summarize import Summarizer
    from brain.lcm.suppress import SuppressResult


class LcmService:
    """The sessions of one database: their messages, summaries and context lists."""

    def __init__(self, access: Access, config: BrainConfig, summarizer: Summarizer | None) -> None:
        """``summarizer``: what compaction summarizes with (None: the configured offline one)."""
        self._access = access
        self._config = config
        self._summarizer = summarizer
        self._parts = threading.Lock()
        self._compactor: Compactor | None = None
        self._assembler: Assembler | None = None
        self._stopped = False

    # -- parts built on first use ---------------------------------------------

    @property
    def compactor(self) -> Compactor:
        """The compactor, built (and its modules imported) on first use."""
        if self._compactor is None:
            with self._parts:
                if self._compactor is None:
                    from brain.lcm.compaction import Compactor
                    from brain.lcm.offline import offline_summarizer

                    offline = offline_summarizer(self._config.compaction.offline_summarizer)
                    compactor = Compactor(
                        self._access.locked,
                        self._config.compaction,
                        self._summarizer or offline,
                        offline,
                    )
                    if self._stopped:
                        compactor.stop()
                    self._compactor = compactor
        return self._compactor

    @property
    def assembler(self) -> Assembler:
        """The assembler, built on first use."""
        if self._assembler is None:
            with self._parts:
                if self._assembler is None:
                    from brain.lcm.assemble import Assembler

                    self._assembler = Assembler(self._config.compaction)
        return self._assembler

    def forget(self) -> None:
        """Drop what the assembler cached (the database was reopened)."""
        if self._assembler is not None:
            self._assembler.forget()

    # -- writes -----------------------------------------------------------------

    def ingest(
        self,
        session: str,
        messages: Sequence[MessageIn],
        *,
        session_key: str | None = None,
        field: str = "messages",
        batch: bool = True,
        create: bool = True,
        turn: HostTurn | None = None,
    ) -> IngestResult:
        """Append messages to a session; see ``brain.lcm.ingest.ingest``."""
        from brain.lcm.ingest import ingest

        with self._access.locked() as store:
            return ingest(
                store,
                session,
                messages,
                session_key=session_key,
                field=field,
                batch=batch,
                create=create,
                turn=turn,
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
            self._access.locked,
            session,
            path,
            session_key=session_key,
            on_fork=on_fork,
            progress=progress,
        )

    def suppress(
        self, ids: Sequence[str], *, session: str | None, suppressed: bool = True
    ) -> SuppressResult:
        """Hide (or, with ``suppressed=False``, show again) messages and summaries by id."""
        from brain.lcm.content import normalize_time
        from brain.lcm.suppress import set_suppressed

        stamp = normalize_time(None, "now")
        with self._access.locked() as store:
            return set_suppressed(
                store, ids, _scope(store, session), suppressed=suppressed, now=stamp
            )

    # -- reads ------------------------------------------------------------------

    def get_message(self, session: str, message_id: str) -> dict[str, Any]:
        """The message exactly as the client sent it (payload files read back)."""
        from brain.lcm.messages import find_in_session, restore_message

        with self._access.reading() as store:
            message = restore_message(store, find_in_session(store, session, message_id))
            message["id"] = message_id
            return message

    def index_entities(self, batches: int | None = None) -> int:
        """Index messages queued for the entity index, at most ``batches`` transactions
        (None: all); how many were indexed (``brain.lcm.entities.index``)."""
        from brain.lcm.entities.index import backlog, index_backlog

        with self._access.reading() as store:
            if not backlog(store):
                return 0
        with self._access.locked() as store:
            return index_backlog(store, batches=batches)

    def entities(
        self,
        name: str,
        *,
        session: str | None = None,
        session_key: str | None = None,
        kind: str | None = None,
        limit: int = 20,
    ) -> list[EntityFound]:
        """Entities named like ``name`` (prefix, a later word's prefix, or fuzzy) with
        their visible mention counts, in one session, a session key's sessions, or
        (neither given) everywhere (``brain.lcm.entities.lookup``)."""
        from brain.lcm.entities.lookup import find_entities

        self.index_entities()
        with self._access.reading() as store:
            scope = _conversations(store, session, session_key)
            return find_entities(store, name, scope, kind=kind, limit=limit)

    def entity(
        self,
        name: str,
        *,
        session: str | None = None,
        session_key: str | None = None,
        kind: str | None = None,
        limit: int = 50,
    ) -> EntityMentions:
        """One entity's visible mentions in time order with snippets, scoped as
        ``entities``; ``NotFound`` when nothing in scope mentions it."""
        from brain.lcm.entities.lookup import entity_mentions

        self.index_entities()
        with self._access.reading() as store:
            scope = _conversations(store, session, session_key)
            return entity_mentions(store, name, scope, kind=kind, limit=limit)

    def refresh_rollups(
        self, batches: int | None = None, *, rebuild: bool = False
    ) -> RefreshReport:
        """Refresh the day and week rollups of the leaves queued since the last refresh,
        at most ``batches`` transactions (None: all); ``rebuild`` queues every leaf first
        (rollups are derived: this makes them again from the summaries)."""
        from brain.lcm.content import normalize_time
        from brain.lcm.rollups.build import RefreshReport, backlog, refresh, requeue_all

        if not rebuild:
            with self._access.reading() as store:
                if not backlog(store):
                    return RefreshReport()
        with self._access.locked() as store:
            if rebuild:
                with store.transaction():
                    requeue_all(store)
            return refresh(store, normalize_time(None, "now"), batches=batches)

    def recent(
        self,
        *,
        session: str | None = None,
        session_key: str | None = None,
        since: str | None = None,
        before: str | None = None,
        period: str | None = None,
        max_tokens: int = 8_000,
    ) -> dict[str, Any]:
        """The day and week rollups and the leaf summaries of a time window, in time
        order, in one session, a session key's sessions, or (neither given) everywhere.

        The window ends at ``before`` (default now) and starts at ``since`` or one
        ``period`` (``day`` or ``week``) earlier (neither: a week). Both given is
        :class:`InvalidInput` naming ``since``: each says where the window starts, and
        two starts are a caller's mistake to be told of, not one to guess at. Rollups
        due a refresh are refreshed first (``brain.lcm.rollups``).
        """
        from brain.lcm.content import normalize_time
        from brain.lcm.rollups.periods import PERIODS, SPAN
        from brain.lcm.rollups.read import recent

        if period is not None and period not in PERIODS:
            raise InvalidInput("period", f"must be one of {', '.join(PERIODS)}")
        if since is not None and period is not None:
            raise InvalidInput("since", "give since or period, not both")
        end = normalize_time(before, "before")
        back = normalize_time(
            (clock.parse(end) - (SPAN["day"] if period == "day" else SPAN["week"])).isoformat(),
            "period",
        )
        start = back if since is None else normalize_time(since, "since")
        if start >= end:
            raise InvalidInput("since", "must be earlier than before")
        self.refresh_rollups()
        with self._access.reading() as store:
            scope = _conversations(store, session, session_key)
            found = recent(store, scope, start, end, max_tokens=max_tokens)
        found["period"] = period
        return found

    def assemble(self, session: str, options: AssembleOptions) -> Assembled:
        """The session's model-ready context under ``options``' budget (no recall of
        its own: ``options.recall_block`` is shown as given).

        Assembled on a read connection; a budget to remember goes to the write path
        (only when it changes, so assembles rarely take the lock); a flush mark only
        when the lock is free at once (else a later assemble recommends the flush).
        """
        with self._access.reading() as store:
            return self.assembler.assemble(
                store,
                session,
                options,
                write=self._access.write,
                mark=self._access.try_write_unsynced,
            )

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

        with self._access.reading() as store:
            return describe(
                store,
                target,
                _scope(store, session),
                max_tokens=max_tokens,
                lines=lines,
                get_message=functools.partial(restore_message, store, keep_missing=True),
                include_suppressed=include_suppressed,
            )

    def expand(
        self, summary_id: str, *, session: str | None, max_tokens: int = 4_000
    ) -> dict[str, Any]:
        """Walk a summary down to its sources under a token cap."""
        from brain.lcm.describe import expand

        with self._access.reading() as store:
            return expand(store, summary_id, _scope(store, session), max_tokens=max_tokens)

    # -- compaction -------------------------------------------------------------

    def compact(
        self,
        session: str,
        *,
        target_tokens: int | None = None,
        fold_tail: bool = False,
        progress: Progress = ignore,
    ) -> CompactionReport:
        """Full sweep (or bounded sweeps down to ``target_tokens``, into the fresh tail
        with ``fold_tail`` when nothing else reaches it) of a session."""
        return self.compactor.sweep(
            self._conversation_id(session), target_tokens, progress, fold_tail=fold_tail
        )

    def compact_incremental(self, session: str) -> CompactionReport:
        """Fold history if raw tokens outside the fresh tail are over the threshold."""
        return self.compactor.incremental(self._conversation_id(session))

    def rebuild_withheld(self, session: str) -> CompactionReport:
        """Rebuild the session's withheld summaries (a source suppressed) from what remains."""
        return self.compactor.rebuild(self._conversation_id(session))

    def withheld_sessions(self) -> list[str]:
        """Sessions whose context list shows a withheld summary awaiting its rebuild."""
        from brain.lcm.suppress import withheld_sessions

        with self._access.reading() as store:
            return withheld_sessions(store)

    def stop_compactions(self) -> None:
        """Let running compactions finish their current pass and start no more."""
        with self._parts:
            self._stopped = True  # a compactor built later starts stopped
            compactor = self._compactor
        if compactor is not None:
            compactor.stop()

    def compaction_due(self, session: str) -> bool:
        """Whether a background compaction of the session would do anything now: fold
        (with ``auto``) or rebuild a withheld summary."""
        try:
            conversation_id = self._conversation_id(session)
            return self.compactor.eligible(conversation_id) or self.compactor.rebuild_due(
                conversation_id
            )
        except NotFound:
            return False

    def _conversation_id(self, session: str) -> int:
        from brain.lcm.context import conversation_id

        with self._access.locked() as store:
            return conversation_id(store, session)


def _scope(store: Store, session: str | None) -> Callable[[int], bool]:
    """What a read scoped to ``session`` may see (``brain.lcm.context.session_scope``)."""
    from brain.lcm.context import session_scope

    return session_scope(store, session)


def _conversations(
    store: Store, session: str | None, session_key: str | None
) -> tuple[int, ...] | None:
    """The conversations a read names, as grep scopes them (None: every one; a session
    that does not exist: ``NotFound`` naming it)."""
    from brain.lcm.context import conversation_id, session_key_conversations

    if session is not None:
        return (conversation_id(store, session),)
    if session_key is not None:
        return session_key_conversations(store, session_key)
    return None
