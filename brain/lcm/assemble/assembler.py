"""``Assembler``: one ``assemble`` call, from the session's view to the rendered context.

It takes the conversation's turn (assembles of one conversation share its cached
view), fits the budget (``fit``), pairs tool calls (``tools``), places the recall
block (``recall``), renders, and writes the two things an assemble may change:
the budget the session follows and the flush mark. Tested through
``Brain.assemble`` in tests/brain/lcm/assemble/test_assembler.py and
tests/brain/lcm/test_budgets.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Final

from brain.config import CompactionConfig
from brain.errors import NotFound
from brain.lcm.assemble.fit import Split, drop_rank, pick, split
from brain.lcm.assemble.history import Plan, Shown, plan
from brain.lcm.assemble.model import Assembled, AssembleOptions, empty
from brain.lcm.assemble.recall import recall_cost, with_recall
from brain.lcm.assemble.tools import paired, shown_stubs
from brain.lcm.assemble.view import Stubs, View, Views, ensure_entries, key, shown_cost
from brain.lcm.budgets import follow, follow_due, sizes
from brain.lcm.context import Conversation, Item, conversation, conversation_by_id, mark_flushed
from brain.lcm.render import PairingReport, Turn, render_anthropic, render_openai
from brain.store.connection import Store
from brain.store.readpool import WritePath, on_store

_REFITS: Final = 3
"""Times the tail is fitted again when pairing pushed the stand-in for older history out."""


class Assembler:
    """Assembles contexts for one engine; holds the per-conversation cache.

    Thread-safe: assembles of one conversation take turns (they share its cached
    view); other conversations' go on beside them. Each may read on its own
    connection, at its own snapshot (see ``view.Views.get``).
    """

    def __init__(self, config: CompactionConfig) -> None:
        self.config = config
        self._views = Views()
        self._guard = threading.Lock()  # the per-conversation locks
        self._turns: dict[int, threading.Lock] = {}

    def assemble(
        self,
        store: Store,
        session: str,
        options: AssembleOptions,
        *,
        write: WritePath | None = None,
        mark: Callable[[Callable[[Store], bool]], bool | None] | None = None,
    ) -> Assembled:
        """Build the context for ``session``.

        A session with no messages yet (the first turn of a chat) has an empty
        context; asking does not create the session. ``write``: where the session's
        new budget or flush mark is written, when one changes (default: ``store``);
        the engine reads on a read connection and writes on its write path.
        ``mark``: where the flush mark is written, if it can be at once (None back: not
        now; default: ``write``).
        """
        try:
            conv = conversation(store, session)
        except NotFound:
            return empty(options)
        with self._guard:
            turn = self._turns.setdefault(conv.id, threading.Lock())
        with turn:
            writing = write or on_store(store)
            return self._assemble(store, conv, options, writing, mark or writing)

    def forget(self, conversation_id: int | None = None) -> None:
        """Drop cached views (one conversation, or all)."""
        self._views.forget(conversation_id)

    def _assemble(
        self,
        store: Store,
        conv: Conversation,
        options: AssembleOptions,
        write: WritePath,
        mark: Callable[[Callable[[Store], bool]], bool | None],
    ) -> Assembled:
        view = self._views.get(store, conv)
        tail_count = self.config.fresh_tail_count
        got = _select(store, conv, view, options, tail_count, 0)
        reserve = 0
        for _ in range(_REFITS):
            if got.history.standing:
                break
            # Pairing made the tail cost more than it was priced at (stubs given their
            # calls' hints) and pushed its stand-in out: fit the tail again, leaving
            # that much more room, so the history before it is still named. (A tail
            # with more stubs has more hints: the room kept grows until it holds.)
            extra = got.tokens - got.recall - got.tail_cost - got.pinned_cost
            if extra <= 0:
                break
            reserve += extra
            got = _select(store, conv, view, options, tail_count, reserve)
        parts, history, chosen, turns = got.parts, got.history, got.chosen, got.turns
        tail, tail_cost, pinned_cost = parts.tail, got.tail_cost, got.pinned_cost
        report, tokens, recall = got.report, got.tokens, got.recall
        if recall and options.recall_block:
            turns = with_recall(turns, options.recall_block)

        system: str | None = None
        if options.format == "anthropic":
            system, messages = render_anthropic(turns)
        else:
            messages = render_openai(turns)

        shown_items = [s.item for s in chosen if s.item is not None]
        summaries_in = sum(1 for i in shown_items if not i.is_message)
        gaps = [s.gap for s in chosen if s.gap is not None]
        # What of the context list something in the context stands for: an item shown,
        # a summary shown as its sources, an item a stand-in names.
        stood = {i.pos for i in shown_items} | {i.pos for i in history.expanded}
        stood |= {i.pos for g in gaps for i in g.items}
        dropped = [i for i in view.items if i.pos not in stood]
        # Written only when the session's budget changes: assemble stays a read.
        changed = False
        if follow_due(conv, options.budget):
            budget = options.budget
            changed = write(lambda s: follow(s, conversation_by_id(s, conv.id), budget))
        flush = self._flush_due(mark, conv, tail, options.budget if changed else conv.budget)
        return Assembled(
            messages=messages,
            system=system,
            tokens=tokens,
            budget=options.budget,
            over_budget=tail_cost + pinned_cost > options.budget or tokens > options.budget,
            fresh_tail={"count": len(tail), "tokens": tail_cost, "first_seq": parts.start},
            included={"summaries": summaries_in, "messages": len(shown_items) - summaries_in},
            dropped={
                "summaries": sum(1 for i in dropped if not i.is_message),
                "messages": sum(1 for i in dropped if i.is_message),
            },
            pairing=asdict(report),
            stubbed=shown_stubs(view, chosen, turns),
            context_tokens=conv.context_tokens,
            flush_recommended=flush,
            recall_tokens=recall,
            withheld=sum(1 for i in shown_items if view.entries[key(i)].withheld),
            gaps={
                "count": len(gaps),
                "messages": sum(g.messages for g in gaps),
                "summaries": sum(g.summaries for g in gaps),
            },
            expanded=len(history.expanded),
            budget_changed=changed,
        )

    def _flush_due(
        self,
        write: Callable[[Callable[[Store], bool]], bool | None],
        conv: Conversation,
        tail: list[Item],
        budget: int | None,
    ) -> bool:
        """True once per compaction epoch when raw history nears the compaction threshold
        (the session's, sized by the budget it follows). The mark is written (and
        checked again) on the write path, so two assembles at once recommend it once;
        when that path is busy (``write`` gives None) a later assemble recommends it,
        rather than this one wait behind a compaction's commit."""
        if conv.flush_epoch == conv.compaction_epoch:
            return False
        raw_tail = sum(i.token_count for i in tail if i.is_message)
        outside = conv.raw_tokens - raw_tail
        sized = sizes(self.config, budget)
        if outside < sized.threshold - sized.flush_soft:
            return False
        epoch = conv.compaction_epoch

        def mark(target: Store) -> bool:
            with target.transaction():
                if conversation_by_id(target, conv.id).flush_epoch == epoch:
                    return False  # another assemble recommended it meanwhile
                mark_flushed(target, conv.id, epoch)
            return True

        return bool(write(mark))


def _cost(view: View, shown: Shown) -> int:
    """What ``shown`` costs in the context."""
    if shown.gap is not None:
        return shown.gap.cost
    assert shown.item is not None
    return shown_cost(view, shown.item, shown.stubs)


def _give_up_rank(shown: Shown) -> tuple[int, int, int]:
    """``fit.drop_rank`` for what is shown; a stand-in goes last."""
    if shown.item is None:
        return (2, 0, 0)
    return drop_rank(shown.item)


@dataclass(frozen=True, slots=True)
class _Selection:
    """What one pass of ``_select`` chose, paired, and what it costs."""

    parts: Split
    history: Plan
    chosen: list[Shown]
    turns: list[Turn]
    report: PairingReport
    tokens: int
    """The whole context's cost, the recall block's included."""
    recall: int
    tail_cost: int
    pinned_cost: int


def _select(
    store: Store,
    conv: Conversation,
    view: View,
    options: AssembleOptions,
    tail_count: int,
    reserve: int,
) -> _Selection:
    """Choose what the context shows (``reserve``: more room the tail leaves free)."""
    parts = split(store, conv, view, options, tail_count, reserve)
    tail, pinned = parts.tail, parts.pinned
    pinned_cost = sum(i.token_count for i in pinned)
    tail_cost = sum(shown_cost(view, i, parts.tail_stubs.get(i.pos, 0)) for i in tail)
    room = options.budget - tail_cost - pinned_cost
    recall = recall_cost(options.recall_block, room)
    room -= recall
    # A cut tail leaves no room for older detail; a stand-in may still say what is
    # left out before it.
    prefix = parts.prefix + [i for i in parts.shed if i.pos not in view.system_positions]
    picked: dict[int, Stubs] = {}
    if not parts.shed:
        summaries = [view.items[i] for i in view.summary_indices if i < parts.cut]
        picked = pick(store, view, summaries, parts.prefix, room, options)
    history = plan(store, view, conv.session, prefix, picked, room, options)
    # System messages first (OpenAI wants them there; Anthropic takes them out into
    # ``system`` wherever they are).
    head = [Shown(i) for i in pinned]
    tail_shown = [Shown(i, parts.tail_stubs.get(i.pos, 0)) for i in tail]
    chosen, turns, report, tokens = _fit(
        store, conv.id, view, (head, history, tail_shown), options.budget - recall
    )
    return _Selection(
        parts, history, chosen, turns, report, tokens + recall, recall, tail_cost, pinned_cost
    )


def _fit(
    store: Store,
    conversation_id: int,
    view: View,
    parts: tuple[list[Shown], Plan, list[Shown]],
    budget: int,
) -> tuple[list[Shown], list[Turn], PairingReport, int]:
    """The pinned items, the history's plan and the tail, paired, made to fit ``budget``:
    (what is shown, its turns, the pairing report, their cost).

    Pairing can cost more than the items it was given (an error result made up for
    a call never answered, a stub given its call's hint, a turn split around a
    dropped call). Then less detail is shown, the newest expansion undone first;
    then the least wanted items before the tail are given up, raw history oldest
    first and then summaries in the reverse of the order they were taken in, until
    the whole fits or only the pinned items and the tail are left.
    """
    head, history, tail = parts

    def pair(chosen: list[Shown]) -> tuple[list[Turn], PairingReport, int]:
        # An expansion undone shows a summary that was not rendered yet: render first.
        ensure_entries(store, view, [s.item for s in chosen if s.item is not None])
        return paired(store, conversation_id, view, chosen)

    chosen = head + history.shown() + tail
    turns, report, tokens = pair(chosen)
    while tokens > budget and history.coarser():
        chosen = head + history.shown() + tail
        turns, report, tokens = pair(chosen)
    middle = history.shown()
    while tokens > budget and middle:
        over = tokens - budget
        drop: list[Shown] = []
        for shown in sorted(middle, key=_give_up_rank):
            drop.append(shown)
            over -= _cost(view, shown)
            if over <= 0:
                break
        history.give_up(drop)
        middle = history.shown()
        chosen = head + middle + tail
        turns, report, tokens = pair(chosen)
    return chosen, turns, report, tokens
