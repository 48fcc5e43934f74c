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

Suppression: text hidden when a chunk is read is left out (its source link is
kept, marked ``omitted``); the commit re-checks that nothing fed to the
summarizer was hidden meanwhile, and if something was, rolls back and reads the
chunk again. A summary withheld because a source was suppressed later
(``brain.lcm.suppress``) is rebuilt by a *rebuild pass* before any other pass: its
remaining sources (visible child summaries, and the visible messages under
withheld ones) are summarised into a replacement of the same span, swapped into
the context list in its place. The original stays stored and comes back on
unsuppress.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final

import orjson

from brain.config import CompactionConfig
from brain.lcm.budgets import Sizes, sizes
from brain.lcm.content import normalize_time
from brain.lcm.context import Conversation, Item, conversation_by_id, replace_run, tail_start
from brain.lcm.dag import (
    NewSummary,
    SourceRef,
    Summary,
    child_ids,
    insert_summary,
    load_summaries,
    new_summary_id,
    source_refs,
    summary_cost,
)
from brain.lcm.messages import StoredMessage, load_messages, speaker
from brain.lcm.pairing import calls_answered_after
from brain.lcm.summarize import (
    SourceItem,
    Summarizer,
    SummaryRequest,
    summarize_with_escalation,
)
from brain.lcm.suppress import rebuild_due, rebuilds_due
from brain.progress import Progress, ignore
from brain.store.connection import Store, StoreLease

_CHUNK_SCAN: Final = 512  # items read per query while growing a leaf chunk
_ATTEMPTS: Final = 3  # reads of one chunk when suppressions keep landing mid-summary
_SIZED_MIN_TOKENS: Final = 48
"""Smallest summary size limit a pass towards a target asks for: below it a summary
says too little, so the pass is made at the normal limit (and one more follows)."""
_LEAF_SHELL_TOKENS: Final = 64
"""About what a leaf summary costs beyond its text (its XML and the message overhead):
sizes a leaf chunk towards a target; the size limit itself uses the exact cost."""


@dataclass
class CompactionReport:
    """What a compaction did."""

    leaf_passes: int = 0
    condensed_passes: int = 0
    rebuilt: int = 0
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
        self.rebuilt += other.rebuilt
        self.summaries += other.summaries
        self.summarize_ms += other.summarize_ms


class Compactor:
    """Runs compaction passes for one engine."""

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

    # -- entry points ------------------------------------------------------------

    def incremental(self, conversation_id: int) -> CompactionReport:
        """In the background: leaf passes while raw tokens outside the tail exceed the
        threshold, then condensation up to ``incremental_max_depth``, then, for a session
        that follows a budget, condensation while its summaries pass their share (pairs
        of the shallowest depth first, else the oldest adjacent summaries whatever their
        depths). Sizes come from the session's budget (``brain.lcm.budgets``). Skips (returns
        at once) when another compaction of this conversation is running: that one
        re-checks the threshold after every pass."""
        report = CompactionReport()
        with self._exclusive(conversation_id, wait=False) as got:
            if not got:
                report.skipped = "busy"
                return report
            started = time.perf_counter()
            report.tokens_before = self._conversation(conversation_id).context_tokens
            self._rebuild_withheld(conversation_id, report)
            while not self._stopping.is_set() and self._over_threshold(conversation_id):
                if not self._leaf_pass(conversation_id, report):
                    break
            if report.leaf_passes:
                self._condense(conversation_id, report, self.config.incremental_max_depth, None)
            self._fit_summaries(conversation_id, report)
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

        With ``target_tokens``: fold oldest first, only what is needed to bring the
        context to or under the target (see ``_fold_to``). ``progress`` hears the
        summaries made so far after each pass (phases ``leaf``, ``condense``).
        """
        report = CompactionReport()
        with self._exclusive(conversation_id, wait=True):
            started = time.perf_counter()
            report.tokens_before = self._conversation(conversation_id).context_tokens
            self._rebuild_withheld(conversation_id, report)
            if target_tokens is None:
                while not self._stopping.is_set() and self._leaf_pass(conversation_id, report):
                    progress(len(report.summaries), None, "leaf")
                self._condense(conversation_id, report, -1, None)
                progress(len(report.summaries), None, "condense")
            else:
                self._fold_to(conversation_id, target_tokens, report, progress)
            report.tokens_after = self._conversation(conversation_id).context_tokens
            report.took_ms = (time.perf_counter() - started) * 1000
        return report

    def _fold_to(
        self, conversation_id: int, target: int, report: CompactionReport, progress: Progress
    ) -> None:
        """Passes towards ``target``, one at a time, checking the context after each:
        leaf passes while raw history outside the tail is left, then condensed passes
        at the pressure fanout, each folding the oldest eligible run. No pass is made
        once the context is at or under the target, and each is sized to what is still
        missing (``_leaf_attempt``, ``_sized_run``), so the pass that reaches the target
        folds little more than it must. Stops when nothing more can be folded."""
        leaves = True
        while not self._stopping.is_set():
            missing = self._conversation(conversation_id).context_tokens - target
            if missing <= 0:
                return
            if leaves:
                # A failed leaf pass (no raw run left, or one that would not shrink)
                # would fail again: the rest is condensation.
                leaves = self._leaf_pass(conversation_id, report, missing)
                if leaves:
                    progress(len(report.summaries), None, "leaf")
                    continue
            fanout = self.config.pressure_fanout
            if not self._condensed_pass(conversation_id, report, -1, fanout, missing):
                return
            progress(len(report.summaries), None, "condense")

    def eligible(self, conversation_id: int) -> bool:
        """Whether an incremental compaction would do anything now."""
        return self.config.auto and (
            self._over_threshold(conversation_id) or self._summaries_over(conversation_id)
        )

    def rebuild_due(self, conversation_id: int) -> bool:
        """Whether a summary of the context list waits for its rebuild."""
        with self._access() as store:
            return bool(rebuilds_due(store, conversation_id))

    def rebuild(self, conversation_id: int) -> CompactionReport:
        """Rebuild every withheld summary of the context list (no folding: this runs
        after a suppression whatever ``auto`` says). Waits for a running compaction
        of the conversation, which rebuilds first itself."""
        report = CompactionReport()
        with self._exclusive(conversation_id, wait=True):
            started = time.perf_counter()
            report.tokens_before = self._conversation(conversation_id).context_tokens
            self._rebuild_withheld(conversation_id, report)
            report.tokens_after = self._conversation(conversation_id).context_tokens
            report.took_ms = (time.perf_counter() - started) * 1000
        return report

    # -- rebuilds ----------------------------------------------------------------

    def _rebuild_withheld(self, conversation_id: int, report: CompactionReport) -> None:
        """Replace each withheld summary of the context list by a summary of its
        remaining sources (one try per item and call: a failed one waits for the next)."""
        tried: set[int] = set()
        while not self._stopping.is_set():
            with self._access() as store:
                pending = [p for p, _ in rebuilds_due(store, conversation_id)]
            pos = next((p for p in pending if p not in tried), None)
            if pos is None:
                return
            tried.add(pos)
            for _ in range(_ATTEMPTS):
                if self._rebuild_attempt(conversation_id, pos, report) is not None:
                    break

    def _rebuild_attempt(
        self, conversation_id: int, pos: int, report: CompactionReport
    ) -> bool | None:
        """Read the withheld item at ``pos``, summarise its remaining sources, swap the
        replacement in. None: a suppression landed meanwhile (read again)."""
        with self._access() as store:
            item = _item_at(store, conversation_id, pos)
            if item is None or item.summary_id is None:
                return False
            shown = load_summaries(store, [item.summary_id])[item.summary_id]
            if not rebuild_due(store, shown.row_id):
                return False
            # Always from the original: a replacement withheld in turn is replaced anew.
            original = shown
            if shown.replaces is not None:
                original = load_summaries(store, [shown.replaces])[shown.replaces]
            remaining = _remaining(store, original)
            previous = _previous_summary(store, conversation_id, pos)
        request = SummaryRequest(
            kind=original.kind,
            depth=original.depth,
            items=tuple(remaining.items),
            target_tokens=self.config.leaf_target_tokens
            if original.kind == "leaf"
            else self.config.condensed_target_tokens,
            previous=previous[1] if previous else None,
        )
        if request.items:
            text, summarizer = self._summarize(request, report)
        else:
            text, summarizer = _ALL_SUPPRESSED, "none"
        new = NewSummary(
            conversation_id=conversation_id,
            kind=original.kind,
            depth=original.depth,
            content=text,
            first_seq=original.first_seq,
            last_seq=original.last_seq,
            earliest_at=original.earliest_at,
            latest_at=original.latest_at,
            descendant_count=sum(k.descendant_count + 1 for k in remaining.kids),
            descendant_tokens=sum(k.descendant_tokens for k in remaining.kids)
            + sum(m.token_count for m in remaining.messages),
            message_count=original.message_count,
            file_ids=tuple(
                dict.fromkeys(
                    [f for k in remaining.kids for f in k.file_ids]
                    + [p.file_id for m in remaining.messages for p in m.parts if p.file_id]
                )
            ),
            summarizer=summarizer,
            sources=tuple(remaining.refs),
            replaces=original.row_id,
        )
        try:
            with self._access() as store, store.transaction():
                if _fed_hidden(store, new.sources, previous):
                    raise _Retry
                if _item_at(store, conversation_id, pos) != item or not rebuild_due(
                    store, shown.row_id
                ):
                    raise _Abandon  # restored, rebuilt or compacted meanwhile
                stamp = normalize_time(None, "now", datetime.now(UTC))
                summary = insert_summary(store, new, stamp)
                cost = summary_cost(summary, child_ids(store, summary))
                store.execute(
                    "UPDATE context_items SET summary_id = ?, depth = ?, token_count = ? "
                    "WHERE conversation_id = ? AND pos = ?",
                    (summary.row_id, summary.depth, cost, conversation_id, pos),
                )
                if shown.row_id != original.row_id:
                    # An earlier replacement, withheld in turn or stale: retired, kept.
                    store.execute(
                        "UPDATE summaries SET hidden_by = 'replaced' WHERE id = ?", (shown.row_id,)
                    )
                store.execute(
                    "UPDATE conversations SET context_tokens = context_tokens + ?, "
                    "context_version = context_version + 1, "
                    "compaction_epoch = compaction_epoch + 1 WHERE id = ?",
                    (cost - item.token_count, conversation_id),
                )
        except _Abandon:
            return False
        except _Retry:
            return None
        report.rebuilt += 1
        report.summaries.append(summary.id)
        return True

    # -- leaf passes -------------------------------------------------------------

    def _over_threshold(self, conversation_id: int) -> bool:
        with self._access() as store:
            conv = conversation_by_id(store, conversation_id)
            sized = sizes(self.config, conv.budget)
            start = self._tail_start(store, conv, sized)
            outside = conv.raw_tokens - _raw_tokens_from(store, conversation_id, start)
        return outside > sized.threshold

    def _tail_start(self, store: Store, conv: Conversation, sized: Sizes) -> int:
        """Where the tail compaction keeps starts: ``fresh_tail_count`` messages, fewer
        when they cost more than the budget leaves the tail (assemble would cut such a
        tail, and the history between would be dropped with no summary covering it)."""
        count = self.config.fresh_tail_count
        if sized.tail_tokens is not None:
            count = _newest_within(store, conv.id, count, sized.tail_tokens)
        return tail_start(store, conv, count)

    def _summaries_over(self, conversation_id: int) -> bool:
        """Whether the summaries in the context list pass their share of the session's
        budget (never, for a session that follows none)."""
        with self._access() as store:
            conv = conversation_by_id(store, conversation_id)
            room = sizes(self.config, conv.budget).summary_room
            if room is None:
                return False
            return _summary_tokens(store, conversation_id) > room

    def _fit_summaries(self, conversation_id: int, report: CompactionReport) -> None:
        """Condense until the summaries fit their share of the budget: runs of two or more
        at the shallowest depth first, else the oldest adjacent summaries whatever their
        depths (a run of distinct depths could otherwise never fold)."""
        max_depth = self.config.incremental_max_depth
        while not self._stopping.is_set() and self._summaries_over(conversation_id):
            if self._condensed_pass(conversation_id, report, max_depth, 2):
                continue
            if max_depth >= 0 or not self._condensed_pass(
                conversation_id, report, max_depth, 2, mixed=True
            ):
                return

    def _leaf_pass(
        self, conversation_id: int, report: CompactionReport, missing: int | None = None
    ) -> bool:
        """Fold the oldest run of raw messages outside the tail; False if there is none.
        ``missing``: tokens the context is over a compaction target (sizes the pass)."""
        for _ in range(_ATTEMPTS):
            done = self._leaf_attempt(conversation_id, report, missing)
            if done is not None:
                return done
        return False

    def _leaf_attempt(
        self, conversation_id: int, report: CompactionReport, missing: int | None
    ) -> bool | None:
        """One read-summarise-commit of the leaf chunk; None: retry (a suppression landed).

        Towards a target (``missing`` given), the chunk is only what is missing plus
        room for its summary, and the summary's size limit is lowered so that the
        pass lands at the target, not below it (``_sized_target``).
        """
        with self._access() as store:
            conv = conversation_by_id(store, conversation_id)
            sized = sizes(self.config, conv.budget)
            cap = sized.leaf_chunk
            if missing is not None:
                wanted = min(sized.leaf_target, max(_SIZED_MIN_TOKENS, missing))
                cap = min(cap, missing + _LEAF_SHELL_TOKENS + wanted)
            start = self._tail_start(store, conv, sized)
            chunk = _leaf_chunk(store, conversation_id, start, cap)
            if not chunk:
                return False
            messages = load_messages(store, [i.message_id for i in chunk if i.message_id])
            previous = _previous_summary(store, conversation_id, chunk[0].pos)
        new = NewSummary(
            conversation_id=conversation_id,
            kind="leaf",
            depth=0,
            content="",
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
            summarizer="",
            sources=tuple(SourceRef(message_id=m.row_id, omitted=m.suppressed) for m in messages),
        )
        target = sized.leaf_target
        if missing is not None:
            room = sum(i.token_count for i in chunk) - missing - _shell_cost(new, ())
            target = _sized_target(target, room)
        request = SummaryRequest(
            kind="leaf",
            depth=0,
            # Suppressed messages stay in the lineage but their text must
            # not leak into the summary.
            items=tuple(_message_item(m) for m in messages if not m.suppressed),
            target_tokens=target,
            previous=previous[1] if previous else None,
        )
        text, summarizer = self._summarize(request, report)
        new = replace(new, content=text, summarizer=summarizer)
        return self._commit(conversation_id, chunk, new, (), report, previous)

    # -- condensed passes --------------------------------------------------------

    def _condense(
        self, conversation_id: int, report: CompactionReport, max_depth: int, fanout: int | None
    ) -> None:
        while not self._stopping.is_set() and self._condensed_pass(
            conversation_id, report, max_depth, fanout
        ):
            pass

    def _condensed_pass(
        self,
        conversation_id: int,
        report: CompactionReport,
        max_depth: int,
        fanout: int | None,
        missing: int | None = None,
        *,
        mixed: bool = False,
    ) -> bool:
        """Fold the oldest run of same-depth summaries at the shallowest eligible depth
        (``mixed``: the oldest run of at least ``fanout`` adjacent summaries, any depths).
        ``missing``: tokens the context is over a compaction target (sizes the pass)."""
        for _ in range(_ATTEMPTS):
            done = self._condensed_attempt(
                conversation_id, report, max_depth, fanout, missing, mixed
            )
            if done is not None:
                return done
        return False

    def _condensed_attempt(
        self,
        conversation_id: int,
        report: CompactionReport,
        max_depth: int,
        fanout: int | None,
        missing: int | None,
        mixed: bool = False,
    ) -> bool | None:
        """One read-summarise-commit of the condensed chunk; None: retry."""
        with self._access() as store:
            if mixed:
                found = _mixed_chunk(store, conversation_id, fanout or 2, self.config)
            else:
                found = _condensed_chunk(store, conversation_id, self.config, max_depth, fanout)
            if found is None:
                return False
            chunk, depth = found
            kids = load_summaries(store, [i.summary_id for i in chunk if i.summary_id])
            ordered = [kids[i.summary_id] for i in chunk if i.summary_id in kids]
            previous = _previous_summary(store, conversation_id, chunk[0].pos)
            budget = conversation_by_id(store, conversation_id).budget
        target = sizes(self.config, budget).condensed_target
        if missing is not None and len(ordered) == len(chunk):
            need = fanout or len(chunk)
            chunk, ordered, target = _sized_run(chunk, ordered, need, missing, target)
        new = _condensed(conversation_id, depth + 1, ordered)
        request = SummaryRequest(
            kind="condensed",
            depth=depth + 1,
            items=tuple(_summary_item(s) for s in ordered if not s.hidden),
            target_tokens=target,
            previous=previous[1] if previous else None,
        )
        text, summarizer = self._summarize(request, report)
        new = replace(new, content=text, summarizer=summarizer)
        return self._commit(
            conversation_id, chunk, new, tuple(s.id for s in ordered), report, previous
        )

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
        previous: tuple[int, str] | None,
    ) -> bool | None:
        """Store the summary and swap it in for the chunk, if the chunk is unchanged,
        nothing fed to the summarizer was hidden meanwhile, and the swap saves tokens.
        None: a suppression landed while summarising (nothing was stored; read again)."""
        try:
            with self._access() as store, store.transaction():
                if _fed_hidden(store, new.sources, previous):
                    raise _Retry
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
        except _Retry:
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


class _Abandon(Exception):
    """A pass that must not be committed (no saving, or a stale chunk)."""


class _Retry(Exception):
    """A pass whose summarizer was fed text that was hidden before it could commit."""


def _fed_hidden(
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


def _raw_tokens_from(store: Store, conversation_id: int, start: int) -> int:
    return int(
        store.scalar(
            "SELECT coalesce(sum(token_count), 0) FROM context_items "
            "WHERE conversation_id = ? AND pos >= ? AND message_id IS NOT NULL",
            (conversation_id, start),
        )
    )


def _newest_within(store: Store, conversation_id: int, count: int, cap_tokens: int) -> int:
    """How many of the newest ``count`` raw items (up to the newest summary) fit
    ``cap_tokens``."""
    total = kept = 0
    for message_id, tokens in store.execute(
        "SELECT message_id, token_count FROM context_items WHERE conversation_id = ? "
        "ORDER BY pos DESC LIMIT ?",
        (conversation_id, count),
    ):
        total += int(tokens)
        if message_id is None or total > cap_tokens:
            break
        kept += 1
    return kept


def _summary_tokens(store: Store, conversation_id: int) -> int:
    """What the summaries in the context list cost together."""
    return int(
        store.scalar(
            "SELECT coalesce(sum(token_count), 0) FROM context_items "
            "WHERE conversation_id = ? AND summary_id IS NOT NULL",
            (conversation_id,),
        )
    )


def _leaf_chunk(store: Store, conversation_id: int, tail: int, cap_tokens: int) -> list[Item]:
    """The oldest contiguous run of raw messages before the tail, capped in tokens.

    A tool call is not separated from its result: the chunk grows past the cap
    to take results that come after it (outside the tail), or ends before the
    call when the result is inside the tail. System messages are never folded
    (assembly pins them): the run starts after them and ends at the next one.
    """
    first = store.one(
        "SELECT c.pos FROM context_items c CROSS JOIN messages m ON m.id = c.message_id "
        "WHERE c.conversation_id = ? AND c.pos < ? AND m.role <> 'system' "
        "ORDER BY c.pos LIMIT 1",
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
                "SELECT c.pos, c.message_id, c.summary_id, c.depth, c.token_count, "
                "m.role = 'system' FROM context_items c LEFT JOIN messages m "
                "ON m.id = c.message_id WHERE c.conversation_id = ? AND c.pos > ? AND c.pos < ? "
                "ORDER BY c.pos LIMIT ?",
                (conversation_id, pos, tail, _CHUNK_SCAN),
            )
        )
        if not rows:
            break
        for row in rows:
            item = Item(*row[:5])
            if not item.is_message or row[5] or (chunk and total + item.token_count > cap_tokens):
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
    # Calls in the chunk answered after it (``brain.lcm.pairing``'s rule: a later
    # response's ``call_0`` result is not this call's).
    answered = calls_answered_after(store, conversation_id, first, last)
    cut_before: int | None = None
    extend_to = last
    for call_seq, result_seq in answered.items():
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
        return [i for i in chunk if i.pos < min(answered)]
    return chunk


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
            "SELECT c.pos, c.message_id, c.summary_id, c.depth, c.token_count, s.last_seq, "
            "s.hidden_by IS NOT NULL "
            "FROM context_items c JOIN summaries s ON s.id = c.summary_id "
            "WHERE c.conversation_id = ? ORDER BY c.pos",
            (conversation_id,),
        )
    )
    runs: dict[int, list[list[Item]]] = {}
    prev_last: int | None = None
    prev_depth: int | None = None
    for row in rows:
        if row[6]:
            # Withheld, waiting for its rebuild: folding it now would lose its
            # remaining text for good, so it ends the run.
            prev_last = prev_depth = None
            continue
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


def _mixed_chunk(
    store: Store, conversation_id: int, least: int, config: CompactionConfig
) -> tuple[list[Item], int] | None:
    """The oldest run of at least ``least`` adjacent summary items whatever their depths
    (at most ``condensed_fanout``), and the deepest depth in it. Withheld ones end a run."""
    run: list[Item] = []
    prev_last: int | None = None
    for row in store.execute(
        "SELECT c.pos, c.message_id, c.summary_id, c.depth, c.token_count, s.last_seq, "
        "s.hidden_by IS NOT NULL "
        "FROM context_items c JOIN summaries s ON s.id = c.summary_id "
        "WHERE c.conversation_id = ? ORDER BY c.pos",
        (conversation_id,),
    ):
        item = Item(*row[:5])
        if row[6] or prev_last is None or item.pos != prev_last + 1:
            if len(run) >= least:
                break
            run = []
        if not row[6]:
            run.append(item)
        prev_last = None if row[6] else int(row[5])
    if len(run) < least:
        return None
    run = run[: max(least, config.condensed_fanout)]
    return run, max(int(i.depth or 0) for i in run)


def _condensed(conversation_id: int, depth: int, ordered: list[Summary]) -> NewSummary:
    """A condensed summary of ``ordered`` (in order), its text still to be written."""
    return NewSummary(
        conversation_id=conversation_id,
        kind="condensed",
        depth=depth,
        content="",
        first_seq=ordered[0].first_seq,
        last_seq=ordered[-1].last_seq,
        earliest_at=min(s.earliest_at for s in ordered),
        latest_at=max(s.latest_at for s in ordered),
        descendant_count=sum(s.descendant_count + 1 for s in ordered),
        descendant_tokens=sum(s.descendant_tokens for s in ordered),
        message_count=sum(s.message_count for s in ordered),
        file_ids=tuple(dict.fromkeys(f for s in ordered for f in s.file_ids)),
        summarizer="",
        sources=tuple(SourceRef(child_id=s.row_id, omitted=s.hidden) for s in ordered),
    )


def _shell_cost(new: NewSummary, child_ids: tuple[str, ...]) -> int:
    """What a summary of ``new``'s span costs in a context with no text at all.

    Its real cost is at most this plus its text's estimate (the estimate of a
    concatenation is at most the sum of the parts'), and a summarizer's text
    never exceeds the size limit it was given, so a limit of ``allowed - shell``
    keeps the summary's cost within ``allowed``.
    """
    shell = Summary(
        row_id=0,
        id=new_summary_id(),  # the real id has the same length
        conversation_id=new.conversation_id,
        kind=new.kind,
        depth=new.depth,
        content="",
        token_count=0,
        first_seq=new.first_seq,
        last_seq=new.last_seq,
        earliest_at=new.earliest_at,
        latest_at=new.latest_at,
        descendant_count=new.descendant_count,
        descendant_tokens=new.descendant_tokens,
        message_count=new.message_count,
        file_ids=new.file_ids,
        summarizer="",
        created_at="",
    )
    return summary_cost(shell, child_ids)


def _sized_target(normal: int, room: int) -> int:
    """The size limit of a summary towards a target, given the ``room`` for its text
    within which the pass lands at the target: ``normal``, lowered to ``room`` when
    that is smaller but still a useful size. A smaller room keeps ``normal``: this
    pass cannot reach the target alone, and a later one will go on."""
    if room >= normal or room < min(normal, _SIZED_MIN_TOKENS):
        return normal
    return room


def _sized_run(
    chunk: list[Item], ordered: list[Summary], need: int, missing: int, normal: int
) -> tuple[list[Item], list[Summary], int]:
    """The shortest prefix (at least ``need`` long) of a condensed chunk whose summary
    can bring the context to the target, ``missing`` tokens away, with the size limit
    that does it; the whole chunk at the ``normal`` limit when no prefix can.

    A prefix that would leave fewer than ``need`` summaries of the chunk behind takes
    them too: next to the new, deeper summary they could only fold with newer ones of
    their depth, and a later, tighter target might find none.
    """
    for size in range(min(need, len(chunk)), len(chunk) + 1):
        take = len(chunk) if 0 < len(chunk) - size < need else size
        kids = ordered[:take]
        shell = _shell_cost(
            _condensed(kids[0].conversation_id, kids[0].depth + 1, kids), tuple(k.id for k in kids)
        )
        room = sum(i.token_count for i in chunk[:take]) - missing - shell
        if room >= min(normal, _SIZED_MIN_TOKENS):
            return chunk[:take], kids, min(normal, room)
    return chunk, ordered, normal


def _previous_summary(store: Store, conversation_id: int, pos: int) -> tuple[int, str] | None:
    """(row id, content) of the summary item just before ``pos``, for continuity (none
    when that one is hidden: its text must not reach the summarizer)."""
    row = store.one(
        "SELECT s.id, s.content, s.suppressed_at IS NULL AND s.hidden_by IS NULL "
        "FROM context_items c JOIN summaries s ON s.id = c.summary_id "
        "WHERE c.conversation_id = ? AND c.pos < ? ORDER BY c.pos DESC LIMIT 1",
        (conversation_id, pos),
    )
    return None if row is None or not row[2] else (int(row[0]), str(row[1]))


def _item_at(store: Store, conversation_id: int, pos: int) -> Item | None:
    row = store.one(
        "SELECT pos, message_id, summary_id, depth, token_count FROM context_items "
        "WHERE conversation_id = ? AND pos = ?",
        (conversation_id, pos),
    )
    return None if row is None else Item(*row)


_ALL_SUPPRESSED: Final = "[every source of this span is suppressed]"


@dataclass
class _Remaining:
    """What a withheld summary's rebuild reads: its sources with every hidden one
    marked omitted (withheld children opened up), and what is fed to the summarizer."""

    refs: list[SourceRef] = field(default_factory=list)
    items: list[SourceItem] = field(default_factory=list)
    messages: list[StoredMessage] = field(default_factory=list)
    kids: list[Summary] = field(default_factory=list)


def _remaining(store: Store, summary: Summary) -> _Remaining:
    """The remaining sources of a withheld summary, in order: visible child summaries
    as they are, withheld ones opened up into their own sources, visible messages;
    suppressed ones stay in the lineage as omitted."""
    out = _Remaining()

    def walk(node: Summary) -> None:
        # Every source by what it is now: one left out when ``node`` was made may be
        # visible again (the rebuild is a fresh summary of what is visible).
        refs = source_refs(store, node)
        messages = {
            m.row_id: m
            for m in load_messages(store, [r.message_id for r in refs if r.message_id is not None])
        }
        kids = load_summaries(store, [r.child_id for r in refs if r.child_id is not None])
        for ref in refs:
            if ref.message_id is not None:
                message = messages.get(ref.message_id)
                if message is None or message.suppressed:
                    out.refs.append(SourceRef(message_id=ref.message_id, omitted=True))
                else:
                    out.refs.append(SourceRef(message_id=ref.message_id))
                    out.items.append(_message_item(message))
                    out.messages.append(message)
            elif ref.child_id is not None:
                kid = kids.get(ref.child_id)
                if kid is not None and kid.hidden_by == "source" and not kid.suppressed:
                    walk(kid)
                elif kid is None or kid.hidden:
                    out.refs.append(SourceRef(child_id=ref.child_id, omitted=True))
                else:
                    out.refs.append(SourceRef(child_id=ref.child_id))
                    out.items.append(_summary_item(kid))
                    out.kids.append(kid)

    walk(summary)
    return out


def _message_item(m: StoredMessage) -> SourceItem:
    return SourceItem(
        ref=m.id, role=m.role, text=m.content, at=m.created_at, name=speaker(m.role, m.name)
    )


def _summary_item(s: Summary) -> SourceItem:
    return SourceItem(
        ref=s.id, role="summary", text=s.content, at=s.latest_at, earliest_at=s.earliest_at
    )
