"""The compactor: entry points (incremental, sweep, targeted, rebuild), leaf and condensed passes.

Tested in tests/brain/lcm/compaction/test_compactor.py.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Final

from brain.lcm.budgets import Sizes, sizes
from brain.lcm.compaction.base import ATTEMPTS, message_item, summary_item
from brain.lcm.compaction.chunks import (
    condensed_chunk,
    leaf_chunk,
    mixed_chunk,
    newest_within,
    previous_summary,
    raw_tokens_from,
    summary_tokens,
)
from brain.lcm.compaction.rebuild import Rebuilds
from brain.lcm.compaction.report import CompactionReport
from brain.lcm.compaction.sizing import (
    LEAF_SHELL_TOKENS,
    SIZED_MIN_TOKENS,
    new_condensed,
    shell_cost,
    sized_run,
    sized_target,
)
from brain.lcm.context import Conversation, conversation_by_id, tail_start
from brain.lcm.dag import NewSummary, SourceRef, load_summaries
from brain.lcm.messages import load_messages
from brain.lcm.summarize import SummaryRequest
from brain.lcm.suppress import rebuilds_due
from brain.progress import Progress, ignore
from brain.store.connection import Store

__all__ = ["SUMMARY_ROOM_MARGIN", "Compactor"]

KEEP_NEWEST: Final = 2
"""Summaries of the context list that fold only when nothing older can: the newest
history keeps leaf detail while older history is condensed to fit the room."""
SUMMARY_ROOM_MARGIN: Final = 128
"""Tokens of a session's budget that summaries never count on: what stands in for
history left out (``brain.lcm.assemble.history``) and the system messages pinned
first need some."""


class Compactor(Rebuilds):
    """Runs compaction passes for one engine."""

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
            if report.leaf_passes and self._conversation(conversation_id).budget is None:
                # A session that follows a budget condenses only when its summaries
                # outgrow their room (``_fit_summaries``): leaf detail kept longer.
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
        *,
        fold_tail: bool = False,
    ) -> CompactionReport:
        """Full sweep: every eligible leaf pass, then condensation, until a pass saves nothing.

        With ``target_tokens``: fold oldest first, only what is needed to bring the
        context to or under the target (see ``_fold_to``); with ``fold_tail`` too,
        the fresh tail is folded when nothing else reaches the target (down to the
        newest user message and what follows it, which always stay raw).
        ``progress`` hears the summaries made so far after each pass (phases
        ``leaf``, ``condense``, ``tail``).
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
                self._fold_to(conversation_id, target_tokens, report, progress, fold_tail)
            report.tokens_after = self._conversation(conversation_id).context_tokens
            report.took_ms = (time.perf_counter() - started) * 1000
        return report

    def _fold_to(
        self,
        conversation_id: int,
        target: int,
        report: CompactionReport,
        progress: Progress,
        fold_tail: bool = False,
    ) -> None:
        """Passes towards ``target``, one at a time, checking the context after each:
        leaf passes while raw history outside the tail is left, then condensed passes
        at the pressure fanout, each folding the oldest eligible run. No pass is made
        once the context is at or under the target, and each is sized to what is still
        missing (``_leaf_attempt``, ``sized_run``), so the pass that reaches the target
        folds little more than it must. Stops when nothing more can be folded.

        ``fold_tail``: once nothing outside the fresh tail is left to fold and the
        target is still not reached, the tail shrinks to its floor (the newest user
        message and everything after it, tool calls kept with their results:
        ``tail_start`` with no count) and the same passes go on, oldest first. A host
        whose request overflows the model's window when everything outside the tail is
        already folded needs this, or its turn fails (DESIGN.md section 6)."""
        leaves = True
        floor = False  # whether leaf passes may reach into the fresh tail
        while not self._stopping.is_set():
            missing = self._conversation(conversation_id).context_tokens - target
            if missing <= 0:
                return
            if leaves:
                # A failed leaf pass (no raw run left, or one that would not shrink)
                # would fail again: the rest is condensation.
                leaves = self._leaf_pass(conversation_id, report, missing, tail_floor=floor)
                if leaves:
                    progress(len(report.summaries), None, "tail" if floor else "leaf")
                    continue
            fanout = self.config.pressure_fanout
            if self._condensed_pass(conversation_id, report, -1, fanout, missing):
                progress(len(report.summaries), None, "condense")
                continue
            if not fold_tail or floor:
                return
            # Everything outside the tail is folded and condensed as far as it goes:
            # only the tail is left to give.
            floor = leaves = True

    def eligible(self, conversation_id: int) -> bool:
        """Whether an incremental compaction would do anything now."""
        if not self.config.auto:
            return False
        raw_over, summaries_over = self._backlog(conversation_id)
        return raw_over > 0 or summaries_over > 0

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

    # -- leaf passes -------------------------------------------------------------

    def _over_threshold(self, conversation_id: int) -> bool:
        return self._backlog(conversation_id)[0] > 0

    def _tail_start(self, store: Store, conv: Conversation, sized: Sizes) -> int:
        """Where the tail compaction keeps starts: ``fresh_tail_count`` messages, fewer
        when they cost more than the budget leaves the tail (assemble would cut such a
        tail, and the history between would be dropped with no summary covering it)."""
        count = self.config.fresh_tail_count
        if sized.tail_tokens is not None:
            count = newest_within(store, conv.id, count, sized.tail_tokens)
        return tail_start(store, conv, count)

    def _summaries_over(self, conversation_id: int) -> bool:
        """Whether the summaries in the context list pass the room they have in the
        session's budget (never, for a session that follows none)."""
        return self._backlog(conversation_id)[1] > 0

    def _backlog(self, conversation_id: int) -> tuple[int, int]:
        """How many tokens raw history outside the tail is over the threshold, and the
        summaries in the context list over the room they have in the session's budget
        (each 0 or less when not over; summaries never over for a session that follows
        no budget). One read of the tail serves both.

        The summaries' room is their share of the budget, or more when the tail costs
        less than its own share (short turns): what the budget leaves beside the tail as
        it is and raw history up to the threshold. Leaf summaries are kept that much
        longer before they are condensed, and a settled context spends its budget on
        them.
        """
        with self._access() as store:
            conv = conversation_by_id(store, conversation_id)
            sized = sizes(self.config, conv.budget)
            tail = raw_tokens_from(store, conv.id, self._tail_start(store, conv, sized))
            raw_over = conv.raw_tokens - tail - sized.threshold
            if sized.summary_room is None or conv.budget is None:
                return raw_over, 0
            spare = conv.budget - sized.threshold - tail - SUMMARY_ROOM_MARGIN
            room = max(sized.summary_room, spare)
            return raw_over, summary_tokens(store, conversation_id) - room

    def _fit_summaries(self, conversation_id: int, report: CompactionReport) -> None:
        """Condense until the summaries fit the room they have: runs of two or more at
        the shallowest depth first, else the oldest adjacent summaries whatever their
        depths (a run of distinct depths could otherwise never fold). Each pass is sized
        to land at that room (``sized_run``, up to ``condensed_target_tokens``): a
        condensed summary keeps as much as the room allows."""
        max_depth = self.config.incremental_max_depth
        while not self._stopping.is_set() and (excess := self._backlog(conversation_id)[1]) > 0:
            # The newest summaries fold last: recent history keeps its detail (an
            # assemble can open a leaf into its messages), old history goes deep.
            if any(
                self._condensed_pass(
                    conversation_id, report, max_depth, 2, excess, fill=True, keep_newest=keep
                )
                or (
                    max_depth < 0
                    and self._condensed_pass(
                        conversation_id,
                        report,
                        max_depth,
                        2,
                        excess,
                        mixed=True,
                        fill=True,
                        keep_newest=keep,
                    )
                )
                for keep in (KEEP_NEWEST, 0)
            ):
                continue
            return

    def _leaf_pass(
        self,
        conversation_id: int,
        report: CompactionReport,
        missing: int | None = None,
        *,
        tail_floor: bool = False,
    ) -> bool:
        """Fold the oldest run of raw messages outside the tail; False if there is none.
        ``missing``: tokens the context is over a compaction target (sizes the pass).
        ``tail_floor``: the tail is only its floor (``tail_start`` with no count)."""
        for _ in range(ATTEMPTS):
            done = self._leaf_attempt(conversation_id, report, missing, tail_floor)
            if done is not None:
                return done
        return False

    def _leaf_attempt(
        self,
        conversation_id: int,
        report: CompactionReport,
        missing: int | None,
        tail_floor: bool = False,
    ) -> bool | None:
        """One read-summarise-commit of the leaf chunk; None: retry (a suppression landed).

        Towards a target (``missing`` given), the chunk is only what is missing plus
        room for its summary, and the summary's size limit is lowered so that the
        pass lands at the target, not below it (``sized_target``).
        """
        with self._access() as store:
            conv = conversation_by_id(store, conversation_id)
            sized = sizes(self.config, conv.budget)
            cap = sized.leaf_chunk
            if missing is not None:
                wanted = min(sized.leaf_target, max(SIZED_MIN_TOKENS, missing))
                cap = min(cap, missing + LEAF_SHELL_TOKENS + wanted)
            if tail_floor:
                start = tail_start(store, conv, 0)
            else:
                start = self._tail_start(store, conv, sized)
            chunk = leaf_chunk(store, conversation_id, start, cap)
            if not chunk:
                return False
            messages = load_messages(store, [i.message_id for i in chunk if i.message_id])
            previous = previous_summary(store, conversation_id, chunk[0].pos)
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
            room = sum(i.token_count for i in chunk) - missing - shell_cost(new, ())
            target = sized_target(target, room)
        request = SummaryRequest(
            kind="leaf",
            depth=0,
            # Suppressed messages stay in the lineage but their text must
            # not leak into the summary.
            items=tuple(message_item(m) for m in messages if not m.suppressed),
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
        fill: bool = False,
        keep_newest: int = 0,
    ) -> bool:
        """Fold the oldest run of same-depth summaries at the shallowest eligible depth
        (``mixed``: the oldest run of at least ``fanout`` adjacent summaries, any depths).
        ``missing``: tokens the context is over a compaction target (sizes the pass);
        ``fill``: the summary may be as large as lands at that target (up to
        ``condensed_target_tokens``), not only the session's condensed size."""
        for _ in range(ATTEMPTS):
            done = self._condensed_attempt(
                conversation_id, report, max_depth, fanout, missing, mixed, fill, keep_newest
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
        fill: bool = False,
        keep_newest: int = 0,
    ) -> bool | None:
        """One read-summarise-commit of the condensed chunk; None: retry."""
        with self._access() as store:
            if mixed:
                found = mixed_chunk(store, conversation_id, fanout or 2, self.config, keep_newest)
            else:
                found = condensed_chunk(
                    store, conversation_id, self.config, max_depth, fanout, keep_newest
                )
            if found is None:
                return False
            chunk, depth = found
            kids = load_summaries(store, [i.summary_id for i in chunk if i.summary_id])
            ordered = [kids[i.summary_id] for i in chunk if i.summary_id in kids]
            previous = previous_summary(store, conversation_id, chunk[0].pos)
            budget = conversation_by_id(store, conversation_id).budget
        sized = sizes(self.config, budget)
        target = sized.condensed_target
        if missing is not None and len(ordered) == len(chunk):
            need = fanout or len(chunk)
            normal = target
            if fill and sized.summary_room is not None:
                # Up to half the summaries' share: larger keeps more, but two must fit,
                # and one larger still could not be opened into its sources later.
                normal = max(target, sized.summary_room // 2)
            chunk, ordered, target = sized_run(chunk, ordered, need, missing, normal)
            if fill:
                # At most half of what it folds: a pass that saves a few tokens would
                # be followed by another at the next leaf, and another.
                target = max(SIZED_MIN_TOKENS, min(target, sum(i.token_count for i in chunk) // 2))
        new = new_condensed(conversation_id, depth + 1, ordered)
        request = SummaryRequest(
            kind="condensed",
            depth=depth + 1,
            items=tuple(summary_item(s) for s in ordered if not s.hidden),
            target_tokens=target,
            previous=previous[1] if previous else None,
        )
        text, summarizer = self._summarize(request, report)
        new = replace(new, content=text, summarizer=summarizer)
        return self._commit(
            conversation_id, chunk, new, tuple(s.id for s in ordered), report, previous
        )
