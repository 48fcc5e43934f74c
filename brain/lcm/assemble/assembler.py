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
from dataclasses import asdict

from brain.config import CompactionConfig
from brain.errors import NotFound
from brain.lcm.assemble.fit import drop_rank, pick, split
from brain.lcm.assemble.model import Assembled, AssembleOptions, empty
from brain.lcm.assemble.recall import recall_cost, with_recall
from brain.lcm.assemble.tools import paired, shown_stubs
from brain.lcm.assemble.view import Stubs, Views, ensure_entries, key, shown_cost
from brain.lcm.budgets import follow, follow_due, sizes
from brain.lcm.context import Conversation, Item, conversation, conversation_by_id, mark_flushed
from brain.lcm.render import render_anthropic, render_openai
from brain.store.connection import Store
from brain.store.readpool import WritePath, on_store


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
    ) -> Assembled:
        """Build the context for ``session``.

        A session with no messages yet (the first turn of a chat) has an empty
        context; asking does not create the session. ``write``: where the session's
        new budget or flush mark is written, when one changes (default: ``store``);
        the engine reads on a read connection and writes on its write path.
        """
        try:
            conv = conversation(store, session)
        except NotFound:
            return empty(options)
        with self._guard:
            turn = self._turns.setdefault(conv.id, threading.Lock())
        with turn:
            return self._assemble(store, conv, options, write or on_store(store))

    def forget(self, conversation_id: int | None = None) -> None:
        """Drop cached views (one conversation, or all)."""
        self._views.forget(conversation_id)

    def _assemble(
        self, store: Store, conv: Conversation, options: AssembleOptions, write: WritePath
    ) -> Assembled:
        view = self._views.get(store, conv)
        parts = split(store, conv, view, options, self.config.fresh_tail_count)
        tail, pinned = parts.tail, parts.pinned
        pinned_cost = sum(i.token_count for i in pinned)
        tail_cost = sum(shown_cost(view, i, parts.tail_stubs.get(i.pos, 0)) for i in tail)
        room = options.budget - tail_cost - pinned_cost
        recall = recall_cost(options.recall_block, room)
        room -= recall
        # A cut tail leaves no room for anything older (and a gap would mislead).
        picked: dict[int, Stubs] = {}
        if not parts.shed:
            summaries = [view.items[i] for i in view.summary_indices if i < parts.cut]
            picked = pick(store, view, summaries, parts.prefix, room, options)
        # System messages first (OpenAI wants them there; Anthropic takes them
        # out into ``system`` wherever they are).
        chosen: list[tuple[Item, Stubs]] = [(i, 0) for i in pinned]
        chosen += [(i, picked[i.pos]) for i in parts.prefix if i.pos in picked]
        chosen += [(i, parts.tail_stubs.get(i.pos, 0)) for i in tail]
        kept = len(pinned) + len(tail)  # never given up: the pinned and the tail
        ensure_entries(store, view, [i for i, _ in chosen])
        turns, report, tokens = paired(store, conv.id, view, chosen)
        tokens += recall
        # Pairing can cost more than the items it was given (an error result
        # made up for a call never answered, a stub given its call's hint, a
        # turn split around a dropped call). Then give up the least wanted
        # items before the tail, raw history oldest first and then summaries
        # in the reverse of the order they were taken in, until the whole fits
        # or only the tail is left.
        while tokens > options.budget and len(chosen) > kept:
            over = tokens - options.budget
            drop: set[int] = set()
            for item, stubbed in sorted(
                chosen[len(pinned) : len(chosen) - len(tail)], key=lambda c: drop_rank(c[0])
            ):
                drop.add(item.pos)
                over -= shown_cost(view, item, stubbed)
                if over <= 0:
                    break
            chosen = [c for c in chosen if c[0].pos not in drop]
            turns, report, tokens = paired(store, conv.id, view, chosen)
            tokens += recall
        if recall and options.recall_block:
            turns = with_recall(turns, options.recall_block)

        system: str | None = None
        if options.format == "anthropic":
            system, messages = render_anthropic(turns)
        else:
            messages = render_openai(turns)

        summaries_in = sum(1 for i, _ in chosen if not i.is_message)
        summaries_all = len(view.summary_indices)
        # Written only when the session's budget changes: assemble stays a read.
        changed = False
        if follow_due(conv, options.budget):
            budget = options.budget
            changed = write(lambda s: follow(s, conversation_by_id(s, conv.id), budget))
        flush = self._flush_due(write, conv, tail, options.budget if changed else conv.budget)
        return Assembled(
            messages=messages,
            system=system,
            tokens=tokens,
            budget=options.budget,
            over_budget=tail_cost + pinned_cost > options.budget or tokens > options.budget,
            fresh_tail={"count": len(tail), "tokens": tail_cost, "first_seq": parts.start},
            included={"summaries": summaries_in, "messages": len(chosen) - summaries_in},
            dropped={
                "summaries": summaries_all - summaries_in,
                "messages": len(view.items) - len(chosen) - (summaries_all - summaries_in),
            },
            pairing=asdict(report),
            stubbed=shown_stubs(view, chosen, turns),
            context_tokens=conv.context_tokens,
            flush_recommended=flush,
            recall_tokens=recall,
            withheld=sum(1 for i, _ in chosen if view.entries[key(i)].withheld),
            budget_changed=changed,
        )

    def _flush_due(
        self, write: WritePath, conv: Conversation, tail: list[Item], budget: int | None
    ) -> bool:
        """True once per compaction epoch when raw history nears the compaction threshold
        (the session's, sized by the budget it follows). The mark is written (and
        checked again) on the write path, so two assembles at once recommend it once."""
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

        return write(mark)
