"""What of a conversation's context fits a budget: the tail, the pinned system messages,
the summaries and the raw history before the tail, and the order they are given up in.

Tested through ``Brain.assemble`` in tests/brain/lcm/assemble/test_assembler.py (its
budget properties and the tail, stub and summary-order tests): a choice here
only means something as the context it leaves.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Final

from brain.lcm.assemble.model import AssembleOptions
from brain.lcm.assemble.view import Stubs, View, ensure_entries, entry, key
from brain.lcm.context import Conversation, Item, tail_start
from brain.lcm.pairing import answered_messages
from brain.store.connection import Store

GAP_RESERVE: Final = 120
"""Tokens the tail leaves free when history lies before it, so that a stand-in for what
the context leaves out of that history (``history.Gap``, about 80-100 tokens) fits."""


@dataclass(frozen=True, slots=True)
class Split:
    """The context list split for a call's options."""

    start: int
    """The first seq of the (kept) tail."""
    cut: int
    """The tail's index in the view."""
    tail: list[Item]
    tail_stubs: dict[int, Stubs]
    """Tail positions with results shown as stubs: which results (``view.Stubs``)."""
    pinned: list[Item]
    """System messages: always shown, first."""
    prefix: list[Item]
    """The rest before the tail."""
    shed: list[Item]
    """What was cut from the tail to fit the budget."""


def split(
    store: Store,
    conv: Conversation,
    view: View,
    options: AssembleOptions,
    default_tail_count: int,
    reserve: int = 0,
) -> Split:
    """The context list split for ``options`` (``default_tail_count``: the fresh tail's
    size when the options do not say; ``reserve``: tokens the tail leaves free, beyond
    ``GAP_RESERVE``, when history lies before it or it must be cut)."""
    count = options.fresh_tail_count
    start = tail_start(store, conv, default_tail_count if count is None else count)
    cut = bisect.bisect_left(view.positions, start)
    tail = view.items[cut:]
    pinned, prefix = _pinned(view, view.items[:cut])

    # With history before the tail (or a tail that must be cut), room for a stand-in
    # is kept, in case not all of that history can be shown.
    whole = tail
    kept = GAP_RESERVE + reserve
    tail, tail_stubs, shed = fit_tail(
        store, conv, view, whole, options.budget - (kept if prefix else 0), pinned
    )
    if shed and not prefix:
        tail, tail_stubs, shed = fit_tail(store, conv, view, whole, options.budget - kept, pinned)
    if shed:
        # Cut system messages stay pinned; the rest of the cut tail is history
        # that did not fit (nothing before it fits either: there is no room).
        pinned = pinned + [i for i in shed if i.pos in view.system_positions]
        start = tail[0].pos if tail else conv.max_seq + 1
    return Split(start, cut, tail, tail_stubs, pinned, prefix, shed)


def pick(
    store: Store,
    view: View,
    summaries: list[Item],
    prefix: list[Item],
    room: int,
    options: AssembleOptions,
) -> dict[int, Stubs]:
    """What of ``prefix`` (the history before the tail, system messages aside; its
    ``summaries`` given apart) fits in ``room``: position -> the results shown as
    stubs (``view.Stubs``; 0: none).

    Summaries before raw history: they are compact and cover everything older,
    so they are the last thing to give up. Summaries go in by ``summary_rank``
    (deepest first), each depth up to its first summary that does not fit (a run
    without holes), so when not all fit what goes is the middle of the history,
    never the summary of its beginning. Raw history is taken newest first,
    stopping at the first message that does not fit (it must join the tail
    without a gap). Costs come from the items themselves; a rendered entry is
    needed only to price a stub, so a cold call loads just what it shows.
    """
    picked: dict[int, Stubs] = {}
    full: int | None = None  # the depth whose run stopped
    for item in sorted(summaries, key=summary_rank):
        if item.depth == full:
            continue
        if item.token_count > room:
            full = item.depth
            continue
        picked[item.pos] = False
        room -= item.token_count
    for item in reversed(prefix):
        if not item.is_message:
            continue
        stubbed = 0
        cost = item.token_count
        if options.stubs and cost > options.stub_tokens:
            # Each result above ``stub_tokens`` by itself (as its own message: the
            # same test in either shape), not the message holding several.
            for stub in entry(store, view, item).stubs:
                if stub.cost > options.stub_tokens:
                    stubbed |= 1 << stub.index
                    cost -= stub.saved
        if cost > room:
            break
        picked[item.pos] = stubbed
        room -= cost
    return picked


def fit_tail(
    store: Store,
    conv: Conversation,
    view: View,
    tail: list[Item],
    budget: int,
    pinned: list[Item],
) -> tuple[list[Item], dict[int, Stubs], list[Item]]:
    """The fresh tail made to fit ``budget`` beside ``pinned``: (kept, pos -> stubbed, cut).

    A tail that fits comes back whole.

    First the tail's large tool results become stubs (oldest first, result by
    result, until it fits: a stub names the message ``describe`` recovers, and
    which of its blocks when it holds several); then the tail is
    cut from its oldest end, never past the newest user turn (which must
    stay) and never between a tool call and a result after the cut. If even
    that does not fit the caller reports ``over_budget``.
    """
    room = budget - sum(i.token_count for i in pinned)
    if sum(i.token_count for i in tail) <= room:
        return tail, {}, []
    ensure_entries(store, view, tail)
    entries = [view.entries[key(i)] for i in tail]
    costs = [i.token_count for i in tail]
    stubbed: dict[int, Stubs] = {}
    total = sum(costs)
    # Result by result, not message by message: parallel results in one Anthropic
    # turn are stubbed one at a time, as the OpenAI shape's tool messages are.
    for n, (item, rendered) in enumerate(zip(tail, entries, strict=True)):
        for stub in rendered.stubs:
            if total <= room:
                break
            total -= stub.saved
            costs[n] -= stub.saved
            stubbed[item.pos] = stubbed.get(item.pos, 0) | 1 << stub.index
        if total <= room:
            break
    if total <= room:
        return tail, stubbed, []
    # What must stay: the newest user turn and everything after it.
    must = bisect.bisect_left([i.pos for i in tail], tail_start(store, conv, 0))
    # A cut before index k is allowed when no result at k or later answers a
    # call before k (``brain.lcm.pairing``'s rule).
    call_of = [len(tail)] * len(tail)  # per item: its results' earliest call index
    for (n, _), m in answered_messages([e.turn.blocks for e in entries]).items():
        call_of[n] = min(call_of[n], m)
    earliest_after = [len(tail)] * (len(tail) + 1)
    for n in range(len(tail) - 1, -1, -1):
        earliest_after[n] = min(earliest_after[n + 1], call_of[n])
    keep = must
    pinned_cut = 0  # system messages cut from the tail stay (pinned first)
    for k in range(min(must, len(tail)) + 1):
        if k and tail[k - 1].pos in view.system_positions:
            pinned_cut += tail[k - 1].token_count
        if earliest_after[k] >= k and sum(costs[k:]) + pinned_cut <= room:
            keep = k
            break
    kept = tail[keep:]
    return (
        kept,
        {p: s for p, s in stubbed.items() if p >= (kept[0].pos if kept else 0)},
        tail[:keep],
    )


def summary_rank(item: Item) -> tuple[int, int]:
    """The order summaries are taken in under a budget.

    Deepest first: a condensed summary covers the most history per token. Within
    a condensed depth oldest first: the oldest is the beginning of the
    conversation, which nothing else stands for, and the next ones join it. Leaf
    summaries newest first: they are recent detail, and the newest join the tail.
    """
    depth = int(item.depth or 0)
    return (-depth, item.pos if depth else -item.pos)


def drop_rank(item: Item) -> tuple[int, int, int]:
    """The order items before the tail are given up in when pairing made the context
    too large: raw history oldest first, then summaries, the last taken first."""
    if item.is_message:
        return (0, 0, item.pos)
    depth, pos = summary_rank(item)
    return (1, -depth, -pos)


def _pinned(view: View, prefix: list[Item]) -> tuple[list[Item], list[Item]]:
    """``prefix`` split into its system messages (pinned) and the rest."""
    if not view.system_positions:
        return [], prefix
    pinned = [i for i in prefix if i.pos in view.system_positions]
    return pinned, [i for i in prefix if i.pos not in view.system_positions]
