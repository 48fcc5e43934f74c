"""The machinery every compaction pass shares: read, summarise with no lock held, commit checked.

A pass commits only when its chunk is unchanged, nothing fed to the summarizer was hidden
meanwhile (``fed_hidden``; else it is read again, up to ``ATTEMPTS`` times) and the
swap saves tokens. Tested through the compactor in tests/brain/lcm/compaction/test_compactor.py.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Final

import orjson

from brain.config import CompactionConfig
from brain.lcm.compaction.report import CompactionReport
from brain.lcm.content import normalize_time
from brain.lcm.context import Conversation, Item, conversation_by_id, replace_run
from brain.lcm.dag import NewSummary, SourceRef, Summary, insert_summary, summary_cost
from brain.lcm.messages import StoredMessage, speaker
from brain.lcm.summarize import SourceItem, Summarizer, SummaryRequest, summarize_with_escalation
from brain.store.connection import Store, StoreLease

__all__ = ["ATTEMPTS", "Abandon", "Passes", "Retry", "fed_hidden", "message_item", "summary_item"]


ATTEMPTS: Final = 3  # reads of one chunk when suppressions keep landing mid-summary


class Passes:
    """What every pass shares: the store lease, the per-conversation lock, summarising
    and the checked commit that swaps a summary in for its chunk."""

    def __init__(
        self,
        access: StoreLease,
        config: CompactionConfig,
        summarizer: Summarizer,
        fallback: Summarizer | None = None,
    ) -> None:
        self._access = access
        self.config = config
        self.summarizer = summarizer
        self.fallback = fallback
        self._locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._stopping = threading.Event()

    def stop(self) -> None:
        """Finish the pass in progress, then start no more (used at shutdown)."""
        self._stopping.set()

    def _summarize(self, request: SummaryRequest, report: CompactionReport) -> tuple[str, str]:
        started = time.perf_counter()
        outcome = summarize_with_escalation(self.summarizer, request, self.fallback)
        report.summarize_ms += (time.perf_counter() - started) * 1000
        return outcome.text, outcome.summarizer

    def _commit(
        self,
        conversation_id: int,
        chunk: list[Item],
        new: NewSummary,
        child_ids: tuple[str, ...],
        report: CompactionReport,
        previous: tuple[int, str] | None,
    ) -> bool | None:
        """Store the summary and swap it in for the chunk, if the chunk is unchanged,
        nothing fed to the summarizer was hidden meanwhile, and the swap saves tokens.
        None: a suppression landed while summarising (nothing was stored; read again)."""
        try:
            with self._access() as store, store.transaction():
                if fed_hidden(store, new.sources, previous):
                    raise Retry
                stamp = normalize_time(None, "now", datetime.now(UTC))
                summary = insert_summary(store, new, stamp)
                cost = summary_cost(summary, child_ids)
                if cost >= sum(i.token_count for i in chunk):
                    raise Abandon  # folding would not shrink anything
                swapped = replace_run(
                    store,
                    conversation_id,
                    chunk[0].pos,
                    chunk[-1].pos,
                    chunk,
                    summary.row_id,
                    summary.depth,
                    cost,
                )
                if not swapped:
                    raise Abandon  # the chunk changed while it was being summarised
        except Abandon:
            return False  # the transaction rolled the summary back
        except Retry:
            return None
        if new.kind == "leaf":
            report.leaf_passes += 1
        else:
            report.condensed_passes += 1
        report.summaries.append(summary.id)
        return True

    def _conversation(self, conversation_id: int) -> Conversation:
        with self._access() as store:
            return conversation_by_id(store, conversation_id)

    @contextlib.contextmanager
    def _exclusive(self, conversation_id: int, *, wait: bool) -> Iterator[bool]:
        with self._locks_guard:
            lock = self._locks.setdefault(conversation_id, threading.Lock())
        got = lock.acquire(blocking=wait)
        try:
            yield got
        finally:
            if got:
                lock.release()


class Abandon(Exception):
    """A pass that must not be committed (no saving, or a stale chunk)."""


class Retry(Exception):
    """A pass whose summarizer was fed text that was hidden before it could commit."""


def fed_hidden(
    store: Store, sources: tuple[SourceRef, ...], previous: tuple[int, str] | None
) -> bool:
    """Whether a source whose text was fed to the summarizer (or the previous summary
    given for continuity) is hidden now. Read in the committing transaction, so no
    suppression can land between the check and the commit."""
    messages = [r.message_id for r in sources if r.message_id is not None and not r.omitted]
    kids = [r.child_id for r in sources if r.child_id is not None and not r.omitted]
    if previous is not None:
        kids.append(previous[0])
    return bool(
        store.scalar(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE id IN (SELECT value FROM json_each(?)) "
            "AND suppressed_at IS NOT NULL) OR EXISTS (SELECT 1 FROM summaries "
            "WHERE id IN (SELECT value FROM json_each(?)) "
            "AND (suppressed_at IS NOT NULL OR hidden_by IS NOT NULL))",
            (orjson.dumps(messages).decode(), orjson.dumps(kids).decode()),
        )
    )


def message_item(m: StoredMessage) -> SourceItem:
    return SourceItem(
        ref=m.id, role=m.role, text=m.content, at=m.created_at, name=speaker(m.role, m.name)
    )


def summary_item(s: Summary) -> SourceItem:
    return SourceItem(
        ref=s.id, role="summary", text=s.content, at=s.latest_at, earliest_at=s.earliest_at
    )
