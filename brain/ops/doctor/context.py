"""The ``context`` check and its repair: each conversation's context list and running totals.

Only the totals are derived (the repair recomputes them); a broken list is reported, not
guessed at. Tested through the runner in tests/brain/ops/doctor/test_runner.py.
"""

from __future__ import annotations

from typing import Final

from brain.ops.doctor.report import Finding
from brain.store.connection import Store

__all__ = ["check", "repair"]


def check(store: Store) -> Finding:
    """Walk every context list in order: dangling, misplaced, overlapping, uncovered; totals."""
    found = Finding("context")
    max_seq = {
        int(c): int(m)
        for c, m in store.execute("SELECT conversation_id, max(seq) FROM messages GROUP BY 1")
    }
    dangling = misplaced = overlapping = uncovered = items = 0
    current: int | None = None
    end = 0  # the last message seq the items so far cover in ``current``
    for row in store.execute(
        "SELECT c.conversation_id, c.pos, c.message_id, m.conversation_id, m.seq, "
        "s.conversation_id, s.first_seq, s.last_seq FROM context_items c "
        "LEFT JOIN messages m ON m.id = c.message_id "
        "LEFT JOIN summaries s ON s.id = c.summary_id ORDER BY c.conversation_id, c.pos"
    ):
        conv, pos, message_id, m_conv, seq, s_conv, first, last = row
        items += 1
        if conv != current:
            if current is not None:
                uncovered += max(0, max_seq.get(current, 0) - end)
            current, end = conv, 0
        owner, start, stop = (m_conv, seq, seq) if message_id is not None else (s_conv, first, last)
        if owner != conv:  # no such row, or a row of another conversation
            dangling += 1
            continue
        if pos != start:
            misplaced += 1
        if start <= end:
            overlapping += 1
        elif start > end + 1:
            uncovered += start - end - 1
        end = max(end, int(stop))
    if current is not None:
        uncovered += max(0, max_seq.get(current, 0) - end)
    seen = {int(r[0]) for r in store.execute("SELECT DISTINCT conversation_id FROM context_items")}
    uncovered += sum(m for c, m in max_seq.items() if c not in seen)
    found.count("items", items)
    manual = "not repairable automatically"
    found.problem(
        "error",
        "dangling",
        dangling,
        f"context items whose message or summary is missing or in another conversation ({manual})",
    )
    found.problem(
        "error",
        "misplaced",
        misplaced,
        f"context items whose pos is not their first seq ({manual})",
    )
    found.problem(
        "error",
        "overlapping",
        overlapping,
        f"context items covering messages already covered ({manual})",
    )
    found.problem("error", "uncovered", uncovered, f"messages no context item covers ({manual})")
    found.count("conversations", store.scalar("SELECT count(*) FROM conversations"))
    found.problem(
        "error",
        "wrong_totals",
        store.scalar("SELECT count(*) FROM conversations c WHERE " + _TOTALS_DIFFER),  # noqa: S608
        "conversations whose context_tokens or raw_tokens differ from their items' sums",
    )
    return found


_CONTEXT_SUM: Final = (
    "(SELECT coalesce(sum(i.token_count), 0) FROM context_items i WHERE i.conversation_id = c.id)"
)
_RAW_SUM: Final = (
    "(SELECT coalesce(sum(i.token_count), 0) FROM context_items i "
    "WHERE i.conversation_id = c.id AND i.message_id IS NOT NULL)"
)
_TOTALS_DIFFER: Final = f"c.context_tokens <> {_CONTEXT_SUM} OR c.raw_tokens <> {_RAW_SUM}"


def repair(store: Store, found: Finding) -> list[str]:
    """Recompute the running totals that differ from their items' sums."""
    if not found.has("wrong_totals"):
        return []
    with store.transaction():
        # Recomputed under the write lock, so an ingest in between cannot be lost; the
        # version bump makes every process's cached view of the conversation rebuild.
        store.execute(
            f"UPDATE conversations AS c SET context_tokens = {_CONTEXT_SUM}, "  # noqa: S608
            f"raw_tokens = {_RAW_SUM}, context_version = context_version + 1 "
            f"WHERE {_TOTALS_DIFFER}"
        )
        fixed = store.changes()
    return [f"recomputed context_tokens and raw_tokens of {fixed} conversations"]
