"""Rebuilding withheld summaries: a summary whose source was suppressed after it was made.

Its remaining sources (visible child summaries, and the visible messages under withheld
ones) are summarised into a replacement of the same span, swapped into the context list in
its place; the original stays stored and comes back on unsuppress. Tested in
tests/brain/lcm/compaction/test_compactor.py (the suppression and rebuild tests) and
tests/brain/lcm/test_suppress.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from brain.lcm.compaction.base import (
    ATTEMPTS,
    Abandon,
    Passes,
    Retry,
    fed_hidden,
    message_item,
    summary_item,
)
from brain.lcm.compaction.chunks import item_at, previous_summary
from brain.lcm.compaction.report import CompactionReport
from brain.lcm.content import normalize_time
from brain.lcm.dag import (
    NewSummary,
    SourceRef,
    Summary,
    child_ids,
    insert_summary,
    load_summaries,
    source_refs,
    summary_cost,
)
from brain.lcm.messages import StoredMessage, load_messages
from brain.lcm.summarize import SourceItem, SummaryRequest
from brain.lcm.suppress import rebuild_due, rebuilds_due
from brain.store.connection import Store

__all__ = ["ALL_SUPPRESSED", "Rebuilds", "Remaining", "remaining_sources"]


class Rebuilds(Passes):
    """The rebuild pass: each withheld summary of the context list replaced by a summary
    of its remaining sources, in its place."""

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
            for _ in range(ATTEMPTS):
                if self._rebuild_attempt(conversation_id, pos, report) is not None:
                    break

    def _rebuild_attempt(
        self, conversation_id: int, pos: int, report: CompactionReport
    ) -> bool | None:
        """Read the withheld item at ``pos``, summarise its remaining sources, swap the
        replacement in. None: a suppression landed meanwhile (read again)."""
        with self._access() as store:
            item = item_at(store, conversation_id, pos)
            if item is None or item.summary_id is None:
                return False
            shown = load_summaries(store, [item.summary_id])[item.summary_id]
            if not rebuild_due(store, shown.row_id):
                return False
            # Always from the original: a replacement withheld in turn is replaced anew.
            original = shown
            if shown.replaces is not None:
                original = load_summaries(store, [shown.replaces])[shown.replaces]
            remaining = remaining_sources(store, original)
            previous = previous_summary(store, conversation_id, pos)
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
            text, summarizer = ALL_SUPPRESSED, "none"
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
                if fed_hidden(store, new.sources, previous):
                    raise Retry
                if item_at(store, conversation_id, pos) != item or not rebuild_due(
                    store, shown.row_id
                ):
                    raise Abandon  # restored, rebuilt or compacted meanwhile
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
        except Abandon:
            return False
        except Retry:
            return None
        report.rebuilt += 1
        report.summaries.append(summary.id)
        return True


ALL_SUPPRESSED: Final = "[every source of this span is suppressed]"


@dataclass
class Remaining:
    """What a withheld summary's rebuild reads: its sources with every hidden one
    marked omitted (withheld children opened up), and what is fed to the summarizer."""

    refs: list[SourceRef] = field(default_factory=list)
    items: list[SourceItem] = field(default_factory=list)
    messages: list[StoredMessage] = field(default_factory=list)
    kids: list[Summary] = field(default_factory=list)


def remaining_sources(store: Store, summary: Summary) -> Remaining:
    """The remaining sources of a withheld summary, in order: visible child summaries
    as they are, withheld ones opened up into their own sources, visible messages;
    suppressed ones stay in the lineage as omitted."""
    out = Remaining()

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
                    out.items.append(message_item(message))
                    out.messages.append(message)
            elif ref.child_id is not None:
                kid = kids.get(ref.child_id)
                if kid is not None and kid.hidden_by == "source" and not kid.suppressed:
                    walk(kid)
                elif kid is None or kid.hidden:
                    out.refs.append(SourceRef(child_id=ref.child_id, omitted=True))
                else:
                    out.refs.append(SourceRef(child_id=ref.child_id))
                    out.items.append(summary_item(kid))
                    out.kids.append(kid)

    walk(summary)
    return out
