"""Chunk selection: which context items a leaf or condensed pass folds, and the reads around them.

A leaf chunk never separates a tool call from its result (``brain.lcm.pairing``'s rule)
and never folds a system message; a condensed chunk is a run of adjacent summaries.
Tested through the compactor in tests/brain/lcm/compaction/test_compactor.py
(tool pairs, system messages, runs).
"""

from __future__ import annotations

from typing import Any, Final

from brain.config import CompactionConfig
from brain.lcm.context import MESSAGE_UNITS, Item
from brain.lcm.pairing import calls_answered_after
from brain.store.connection import Store

__all__ = [
    "condensed_chunk",
    "item_at",
    "leaf_chunk",
    "mixed_chunk",
    "newest_within",
    "previous_summary",
    "raw_tokens_from",
    "summary_tokens",
]


_CHUNK_SCAN: Final = 512  # items read per query while growing a leaf chunk


def raw_tokens_from(store: Store, conversation_id: int, start: int) -> int:
    return int(
        store.scalar(
            "SELECT coalesce(sum(token_count), 0) FROM context_items "
            "WHERE conversation_id = ? AND pos >= ? AND message_id IS NOT NULL",
            (conversation_id, start),
        )
    )


def newest_within(store: Store, conversation_id: int, count: int, cap_tokens: int) -> int:
    """How much of a fresh tail of ``count`` (in ``MESSAGE_UNITS``, as ``tail_start``
    counts it) the newest raw items (up to the newest summary) make within
    ``cap_tokens``.

    A run of OpenAI ``tool`` messages fits or not as a whole, as the one Anthropic
    user turn holding the same results does: keeping only its newest result
    would stretch the tail back to the results' call anyway (``tail_start``),
    bringing in the rest whatever they cost, so the two shapes would keep
    different tails.
    """
    total = kept = 0
    run_tokens = run_units = 0  # the run of tool messages being read
    for message_id, role, tokens, units in store.execute(
        # A constant fragment, no input in it.
        f"SELECT c.message_id, m.role, c.token_count, {MESSAGE_UNITS} "  # noqa: S608
        "FROM context_items c LEFT JOIN messages m ON m.id = c.message_id "
        "WHERE c.conversation_id = ? ORDER BY c.pos DESC LIMIT ?",
        (conversation_id, count),
    ):
        if message_id is not None and role == "tool":
            run_tokens += int(tokens)
            run_units += int(units)
            continue
        total += run_tokens
        if total > cap_tokens:
            return min(kept, count)
        kept += run_units
        run_tokens = run_units = 0
        total += int(tokens)
        if message_id is None or total > cap_tokens:
            return min(kept, count)
        kept += int(units)
    if total + run_tokens <= cap_tokens:
        kept += run_units
    return min(kept, count)


def summary_tokens(store: Store, conversation_id: int) -> int:
    """What the summaries in the context list cost together."""
    return int(
        store.scalar(
            "SELECT coalesce(sum(token_count), 0) FROM context_items "
            "WHERE conversation_id = ? AND summary_id IS NOT NULL",
            (conversation_id,),
        )
    )


def leaf_chunk(store: Store, conversation_id: int, tail: int, cap_tokens: int) -> list[Item]:
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


def condensed_chunk(
    store: Store,
    conversation_id: int,
    config: CompactionConfig,
    max_depth: int,
    fanout: int | None,
    keep_newest: int = 0,
) -> tuple[list[Item], int] | None:
    """The oldest run of at least ``fanout`` (default: the depth's own fanout) contiguous
    same-depth summary items at the shallowest depth that has one, cut to the depth's
    own fanout when longer, and that depth; the newest ``keep_newest`` summary items
    are not considered."""
    rows = _summary_rows(store, conversation_id, keep_newest)
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


def mixed_chunk(
    store: Store,
    conversation_id: int,
    least: int,
    config: CompactionConfig,
    keep_newest: int = 0,
) -> tuple[list[Item], int] | None:
    """The oldest run of at least ``least`` adjacent summary items whatever their depths
    (at most ``condensed_fanout``), and the deepest depth in it. Withheld ones end a run;
    the newest ``keep_newest`` summary items are not considered."""
    run: list[Item] = []
    prev_last: int | None = None
    for row in _summary_rows(store, conversation_id, keep_newest):
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


def _summary_rows(store: Store, conversation_id: int, keep_newest: int) -> list[tuple[Any, ...]]:
    """The summary items of the context list in order (pos, message id, summary id, depth,
    tokens, last seq, withheld), but the newest ``keep_newest``."""
    rows = [
        tuple(r)
        for r in store.execute(
            "SELECT c.pos, c.message_id, c.summary_id, c.depth, c.token_count, s.last_seq, "
            "s.hidden_by IS NOT NULL "
            "FROM context_items c JOIN summaries s ON s.id = c.summary_id "
            "WHERE c.conversation_id = ? ORDER BY c.pos",
            (conversation_id,),
        )
    ]
    return rows[: len(rows) - keep_newest] if keep_newest else rows


def previous_summary(store: Store, conversation_id: int, pos: int) -> tuple[int, str] | None:
    """(row id, content) of the summary item just before ``pos``, for continuity (none
    when that one is hidden: its text must not reach the summarizer)."""
    row = store.one(
        "SELECT s.id, s.content, s.suppressed_at IS NULL AND s.hidden_by IS NULL "
        "FROM context_items c JOIN summaries s ON s.id = c.summary_id "
        "WHERE c.conversation_id = ? AND c.pos < ? ORDER BY c.pos DESC LIMIT 1",
        (conversation_id, pos),
    )
    return None if row is None or not row[2] else (int(row[0]), str(row[1]))


def item_at(store: Store, conversation_id: int, pos: int) -> Item | None:
    row = store.one(
        "SELECT pos, message_id, summary_id, depth, token_count FROM context_items "
        "WHERE conversation_id = ? AND pos = ?",
        (conversation_id, pos),
    )
    return None if row is None else Item(*row)
