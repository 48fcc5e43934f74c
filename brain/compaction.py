"""Compaction: folding old context into leaf and condensed summaries.

Each pass has three phases: read the chunk (database lock held briefly),
summarise it (no lock, no transaction: an LLM call may take seconds), then
write the summary and replace the chunk's context items in one transaction,
after checking the items are still exactly what was read. A crash leaves the
old state or the new one, never half. Passes on one conversation never
interleave (a per-conversation lock); other conversations are not blocked.

Cost: a pass touches only its chunk and the items next to it, found through
the ``(conversation_id, pos)`` key, so a full sweep is linear in the number
of messages.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from brain.config import CompactionConfig
from brain.content import normalize_time
from brain.context import Conversation, Item, conversation_by_id, replace_run, tail_start
from brain.dag import NewSummary, Summary, insert_summary, load_summaries, summary_cost
from brain.messages import StoredMessage, load_messages
from brain.progress import Progress, ignore
from brain.store import Store
from brain.summarize import (
    SourceItem,
    Summarizer,
    SummaryRequest,
    summarize_with_escalation,
)

StoreAccess = Callable[[], AbstractContextManager[Store]]
"""Gives the store with the engine's lock held for the duration of the block."""

_CHUNK_SCAN: Final = 512  # items read per query while growing a leaf chunk


@dataclass
class CompactionReport:
    """What a compaction did."""

    leaf_passes: int = 0
    condensed_passes: int = 0
    summaries: list[str] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    summarize_ms: float = 0.0
    took_ms: float = 0.0
    skipped: str | None = None

    def merge(self, other: CompactionReport) -> None:
        """Add another report's passes to this one."""
        self.leaf_passes += other.leaf_passes
        self.condensed_passes += other.condensed_passes
        self.summaries += other.summaries
        self.summarize_ms += other.summarize_ms


class Compactor:
    """Runs compaction passes for one engine."""

    def __init__(
        self,
        access: StoreAccess,
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

    # -- entry points ------------------------------------------------------------

    def incremental(self, conversation_id: int) -> CompactionReport:
        """After ingest: leaf passes while raw tokens outside the tail exceed the threshold,
        then condensation up to ``incremental_max_depth``. Skips (returns at once) when
        another compaction of this conversation is running: that one re-checks the
        threshold after every pass."""
        report = CompactionReport()
        with self._exclusive(conversation_id, wait=False) as got:
            if not got:
                report.skipped = "busy"
                return report
            started = time.perf_counter()
            report.tokens_before = self._conversation(conversation_id).context_tokens
            while not self._stopping.is_set() and self._over_threshold(conversation_id):
                if not self._leaf_pass(conversation_id, report):
                    break
            if report.leaf_passes:
                self._condense(conversation_id, report, self.config.incremental_max_depth, None)
            report.tokens_after = self._conversation(conversation_id).context_tokens
            report.took_ms = (time.perf_counter() - started) * 1000
        return report

    def sweep(
        self,
        conversation_id: int,
        target_tokens: int | None = None,
        progress: Progress = ignore,
    ) -> CompactionReport:
        """Full sweep: every eligible leaf pass, then condensation, until a pass saves nothing.

        With ``target_tokens``: bounded rounds of sweeps, at the pressure fanout,
        until the context fits (or nothing more can be folded). ``progress`` hears
        the summaries made so far after each pass (phases ``leaf``, ``condense``).
        """
        report = CompactionReport()
        with self._exclusive(conversation_id, wait=True):
            started = time.perf_counter()
            report.tokens_before = self._conversation(conversation_id).context_tokens
            rounds = 1 if target_tokens is None else self.config.max_rounds
            fanout = None if target_tokens is None else self.config.pressure_fanout
            for _ in range(rounds):
                before = self._conversation(conversation_id).context_tokens
                if target_tokens is not None and before <= target_tokens:
                    break
                while not self._stopping.is_set() and self._leaf_pass(conversation_id, report):
                    progress(len(report.summaries), None, "leaf")
                self._condense(conversation_id, report, -1, fanout)
                progress(len(report.summaries), None, "condense")
                if self._conversation(conversation_id).context_tokens >= before:
                    break
            report.tokens_after = self._conversation(conversation_id).context_tokens
            report.took_ms = (time.perf_counter() - started) * 1000
        return report

    def eligible(self, conversation_id: int) -> bool:
        """Whether an incremental compaction would do anything now."""
        return self.config.auto and self._over_threshold(conversation_id)

    # -- leaf passes -------------------------------------------------------------

    def _over_threshold(self, conversation_id: int) -> bool:
        with self._access() as store:
            conv = conversation_by_id(store, conversation_id)
            start = tail_start(store, conv, self.config.fresh_tail_count)
            outside = conv.raw_tokens - _raw_tokens_from(store, conversation_id, start)
        return outside > self.config.threshold_tokens

    def _leaf_pass(self, conversation_id: int, report: CompactionReport) -> bool:
        """Fold the oldest run of raw messages outside the tail; False if there is none."""
        with self._access() as store:
            conv = conversation_by_id(store, conversation_id)
            start = tail_start(store, conv, self.config.fresh_tail_count)
            chunk = _leaf_chunk(store, conversation_id, start, self.config.leaf_chunk_tokens)
            if not chunk:
                return False
            messages = load_messages(store, [i.message_id for i in chunk if i.message_id])
            previous = _previous_summary(store, conversation_id, chunk[0].pos)
        request = SummaryRequest(
            kind="leaf",
            depth=0,
            # Suppressed messages stay in the lineage but their text must
            # not leak into the summary.
            items=tuple(_message_item(m) for m in messages if not m.suppressed),
            target_tokens=self.config.leaf_target_tokens,
            previous=previous,
        )
        text, summarizer = self._summarize(request, report)
        new = NewSummary(
            conversation_id=conversation_id,
            kind="leaf",
            depth=0,
            content=text,
            first_seq=chunk[0].pos,
            last_seq=chunk[-1].pos,
            earliest_at=min(m.created_at for m in messages),
            latest_at=max(m.created_at for m in messages),
            descendant_count=0,
            descendant_tokens=sum(m.token_count for m in messages),
            message_count=len(messages),
            file_ids=tuple(
                dict.fromkeys(p.file_id for m in messages for p in m.parts if p.file_id)
            ),
            summarizer=summarizer,
            source_message_ids=tuple(m.row_id for m in messages),
        )
        return self._commit(conversation_id, chunk, new, (), report)

    # -- condensed passes --------------------------------------------------------

    def _condense(
        self, conversation_id: int, report: CompactionReport, max_depth: int, fanout: int | None
    ) -> None:
        while not self._stopping.is_set() and self._condensed_pass(
            conversation_id, report, max_depth, fanout
        ):
            pass

    def _condensed_pass(
        self, conversation_id: int, report: CompactionReport, max_depth: int, fanout: int | None
    ) -> bool:
        """Fold the oldest run of same-depth summaries at the shallowest eligible depth."""
        with self._access() as store:
            found = _condensed_chunk(store, conversation_id, self.config, max_depth, fanout)
            if found is None:
                return False
            chunk, depth = found
            kids = load_summaries(store, [i.summary_id for i in chunk if i.summary_id])
            ordered = [kids[i.summary_id] for i in chunk if i.summary_id in kids]
            previous = _previous_summary(store, conversation_id, chunk[0].pos)
        request = SummaryRequest(
            kind="condensed",
            depth=depth + 1,
            items=tuple(_summary_item(s) for s in ordered if not s.suppressed),
            target_tokens=self.config.condensed_target_tokens,
            previous=previous,
        )
        text, summarizer = self._summarize(request, report)
        new = NewSummary(
            conversation_id=conversation_id,
            kind="condensed",
            depth=depth + 1,
            content=text,
            first_seq=ordered[0].first_seq,
            last_seq=ordered[-1].last_seq,
            earliest_at=min(s.earliest_at for s in ordered),
            latest_at=max(s.latest_at for s in ordered),
            descendant_count=sum(s.descendant_count + 1 for s in ordered),
            descendant_tokens=sum(s.descendant_tokens for s in ordered),
            message_count=sum(s.message_count for s in ordered),
            file_ids=tuple(dict.fromkeys(f for s in ordered for f in s.file_ids)),
            summarizer=summarizer,
            source_summary_ids=tuple(s.row_id for s in ordered),
        )
        return self._commit(conversation_id, chunk, new, tuple(s.id for s in ordered), report)

    # -- shared ------------------------------------------------------------------

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
    ) -> bool:
        """Store the summary and swap it in for the chunk, if the chunk is unchanged
        and the swap saves tokens."""
        try:
            with self._access() as store, store.transaction():
                stamp = normalize_time(None, "now", datetime.now(UTC))
                summary = insert_summary(store, new, stamp)
                cost = summary_cost(summary, child_ids)
                if cost >= sum(i.token_count for i in chunk):
                    raise _Abandon  # folding would not shrink anything
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
                    raise _Abandon  # the chunk changed while it was being summarised
        except _Abandon:
            return False  # the transaction rolled the summary back
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


class _Abandon(Exception):
    """A pass that must not be committed (no saving, or a stale chunk)."""


def _raw_tokens_from(store: Store, conversation_id: int, start: int) -> int:
    return int(
        store.scalar(
            "SELECT coalesce(sum(token_count), 0) FROM context_items "
            "WHERE conversation_id = ? AND pos >= ? AND message_id IS NOT NULL",
            (conversation_id, start),
        )
    )


def _leaf_chunk(store: Store, conversation_id: int, tail: int, cap_tokens: int) -> list[Item]:
    """The oldest contiguous run of raw messages before the tail, capped in tokens.

    A tool call is not separated from its result: the chunk grows past the cap
    to take results that come after it (outside the tail), or ends before the
    call when the result is inside the tail.
    """
    first = store.one(
        "SELECT pos FROM context_items WHERE conversation_id = ? AND message_id IS NOT NULL "
        "AND pos < ? ORDER BY pos LIMIT 1",
        (conversation_id, tail),
    )
    if first is None:
        return []
    chunk: list[Item] = []
    total = 0
    pos = int(first[0]) - 1
    done = False
    while not done:
        rows = list(
            store.execute(
                "SELECT pos, message_id, summary_id, depth, token_count FROM context_items "
                "WHERE conversation_id = ? AND pos > ? AND pos < ? ORDER BY pos LIMIT ?",
                (conversation_id, pos, tail, _CHUNK_SCAN),
            )
        )
        if not rows:
            break
        for row in rows:
            item = Item(*row)
            if not item.is_message or (chunk and total + item.token_count > cap_tokens):
                done = True
                break
            chunk.append(item)
            total += item.token_count
        pos = int(rows[-1][0])
    return _keep_tool_pairs(store, conversation_id, chunk, tail)


def _keep_tool_pairs(
    store: Store, conversation_id: int, chunk: list[Item], tail: int
) -> list[Item]:
    """Adjust a leaf chunk's end so no tool call is split from its result."""
    if not chunk:
        return chunk
    first, last = chunk[0].pos, chunk[-1].pos
    # Results (at any later seq) of calls made inside the chunk. A result answers
    # a call only if no other call of its id comes between them: some model
    # servers number calls afresh in every response (``call_0``), and a later
    # response's ``call_0`` result is not this call's.
    rows = store.execute(
        "SELECT cm.seq, max(rm.seq) FROM messages cm "
        "CROSS JOIN message_parts cp ON cp.message_id = cm.id "
        "CROSS JOIN message_parts rp ON rp.tool_call_id = cp.tool_call_id "
        "CROSS JOIN messages rm ON rm.id = rp.message_id "
        "WHERE cm.conversation_id = ? AND cm.seq BETWEEN ? AND ? AND cp.kind = 'tool_call' "
        "AND cp.tool_call_id IS NOT NULL AND rp.kind = 'tool_result' AND rm.conversation_id = ? "
        "AND rm.seq > cm.seq "
        "AND NOT EXISTS (SELECT 1 FROM message_parts op "
        "CROSS JOIN messages om ON om.id = op.message_id WHERE op.tool_call_id = cp.tool_call_id "
        "AND op.kind = 'tool_call' AND om.conversation_id = cm.conversation_id "
        "AND om.seq > cm.seq AND om.seq < rm.seq) GROUP BY cm.seq",
        (conversation_id, first, last, conversation_id),
    )
    cut_before: int | None = None
    extend_to = last
    for call_seq, result_seq in rows:
        if result_seq is None or result_seq <= last:
            continue
        if result_seq >= tail:
            cut_before = call_seq if cut_before is None else min(cut_before, call_seq)
        else:
            extend_to = max(extend_to, int(result_seq))
    if cut_before is not None:
        return [i for i in chunk if i.pos < cut_before]
    if extend_to > last:
        more = [
            Item(*r)
            for r in store.execute(
                "SELECT pos, message_id, summary_id, depth, token_count FROM context_items "
                "WHERE conversation_id = ? AND pos > ? AND pos <= ? ORDER BY pos",
                (conversation_id, last, extend_to),
            )
        ]
        if all(i.is_message for i in more):
            return _keep_tool_pairs(store, conversation_id, chunk + more, tail)
        return [
            i for i in chunk if i.pos < min(_calls_answered_after(store, conversation_id, chunk))
        ]
    return chunk


def _calls_answered_after(store: Store, conversation_id: int, chunk: list[Item]) -> list[int]:
    """Seqs of calls in the chunk whose results lie after it (as ``_keep_tool_pairs``
    matches them)."""
    last = chunk[-1].pos
    return [
        int(r[0])
        for r in store.execute(
            "SELECT DISTINCT cm.seq FROM messages cm "
            "CROSS JOIN message_parts cp ON cp.message_id = cm.id "
            "CROSS JOIN message_parts rp ON rp.tool_call_id = cp.tool_call_id "
            "CROSS JOIN messages rm ON rm.id = rp.message_id "
            "WHERE cm.conversation_id = ? AND cm.seq BETWEEN ? AND ? AND cp.kind = 'tool_call' "
            "AND cp.tool_call_id IS NOT NULL AND rp.kind = 'tool_result' "
            "AND rm.conversation_id = ? AND rm.seq > ? "
            "AND NOT EXISTS (SELECT 1 FROM message_parts op "
            "CROSS JOIN messages om ON om.id = op.message_id "
            "WHERE op.tool_call_id = cp.tool_call_id "
            "AND op.kind = 'tool_call' AND om.conversation_id = cm.conversation_id "
            "AND om.seq > cm.seq AND om.seq < rm.seq)",
            (conversation_id, chunk[0].pos, last, conversation_id, last),
        )
    ] or [last + 1]


def _condensed_chunk(
    store: Store,
    conversation_id: int,
    config: CompactionConfig,
    max_depth: int,
    fanout: int | None,
) -> tuple[list[Item], int] | None:
    """The oldest run of at least ``fanout`` (default: the depth's own fanout) contiguous
    same-depth summary items at the shallowest depth that has one, cut to the depth's
    own fanout when longer, and that depth."""
    rows = list(
        store.execute(
            "SELECT c.pos, c.message_id, c.summary_id, c.depth, c.token_count, s.last_seq "
            "FROM context_items c JOIN summaries s ON s.id = c.summary_id "
            "WHERE c.conversation_id = ? ORDER BY c.pos",
            (conversation_id,),
        )
    )
    runs: dict[int, list[list[Item]]] = {}
    prev_last: int | None = None
    prev_depth: int | None = None
    for row in rows:
        item = Item(*row[:5])
        depth = int(item.depth or 0)
        if prev_depth == depth and prev_last is not None and item.pos == prev_last + 1:
            runs[depth][-1].append(item)
        else:
            runs.setdefault(depth, []).append([item])
        prev_last, prev_depth = int(row[5]), depth
    for depth in sorted(runs):
        if max_depth >= 0 and depth + 1 > max_depth:
            break
        normal = config.leaf_fanout if depth == 0 else config.condensed_fanout
        need = fanout or normal
        for run in runs[depth]:
            if len(run) >= need:
                # Under pressure a short run folds too, but a long one still
                # folds ``normal`` at a time: folding it two by two would leave
                # summaries of different depths side by side, which can never
                # fold together (a targeted compaction ended above a plain sweep).
                return run[: max(need, normal)], depth
    return None


def _previous_summary(store: Store, conversation_id: int, pos: int) -> str | None:
    """Content of the summary item just before ``pos``, for continuity."""
    row = store.one(
        "SELECT s.content FROM context_items c JOIN summaries s ON s.id = c.summary_id "
        "WHERE c.conversation_id = ? AND c.pos < ? ORDER BY c.pos DESC LIMIT 1",
        (conversation_id, pos),
    )
    return None if row is None else str(row[0])


def _message_item(m: StoredMessage) -> SourceItem:
    return SourceItem(ref=m.id, role=m.role, text=m.content, at=m.created_at)


def _summary_item(s: Summary) -> SourceItem:
    return SourceItem(
        ref=s.id, role="summary", text=s.content, at=s.latest_at, earliest_at=s.earliest_at
    )
