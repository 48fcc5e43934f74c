"""Assemble: the model-ready message list for a session under a token budget.

Order is the context list's order: summaries (as XML-wrapped user messages)
and raw messages, oldest first, except that system messages before the tail
come first. The fresh tail is included whole while it fits (else its tool
results become stubs, then it is cut down to the newest user turn: see
``Assembler._fit_tail``), and the system messages always are (they are
pinned: the instructions a model runs under are never the "oldest message"
to drop; compaction never folds them either). Their cost
counts against the budget like the tail's.
The rest of the budget goes first to summaries (they are small and stand for
everything older): the deepest first, condensed ones oldest first and leaves
newest first, each depth up to its first summary that does not fit, so what a
tight budget gives up is the middle of the history, never the summary of its
beginning (``_summary_rank``); then to the raw messages before the tail,
newest first, up to the first that does not fit. Tool calls and results are
then paired (``render.pair_tools``) and the result rendered in OpenAI or
Anthropic shape.

Costs are the items' stored token counts (one estimator everywhere; a stub's
own cost when stubbed): ``tokens`` never exceeds the budget unless ``over_budget``.

A per-conversation view (items and rendered turns) is cached in memory and
revalidated by the conversation's ``context_version`` on every call, so a
commit by any process is seen; appends since the last call are fetched
incrementally.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final, Literal

import orjson

from brain.config import CompactionConfig
from brain.errors import NotFound
from brain.lcm.budgets import follow, follow_due, sizes
from brain.lcm.context import (
    Conversation,
    Item,
    conversation,
    conversation_by_id,
    items,
    mark_flushed,
    tail_start,
)
from brain.lcm.dag import Summary, load_summaries, summary_xml, withheld_xml
from brain.lcm.messages import StoredMessage, load_messages
from brain.lcm.pairing import answered_messages
from brain.lcm.render import (
    STUB_PREFIX,
    Block,
    PairingReport,
    Turn,
    pair_tools,
    render_anthropic,
    render_openai,
    stub_text,
    summary_turn,
    turn_from_message,
    turn_tokens,
)
from brain.store.connection import Store
from brain.store.readpool import WritePath, on_store
from brain.tokens import estimate_tokens, message_cost

Format = Literal["openai", "anthropic"]
_VIEW_LIMIT: Final = 64  # conversations whose views stay cached
_ENTRY_BATCH: Final = 256  # entries loaded at once while walking back for stubs


@dataclass(frozen=True, slots=True)
class AssembleOptions:
    """How to assemble: budget in tokens, output shape, tail size, stub tier."""

    budget: int
    format: Format = "openai"
    fresh_tail_count: int | None = None
    stubs: bool = False
    stub_tokens: int = 1_000
    recall_block: str | None = None
    """Text to show after the summaries (a graph query's context block), if it fits."""


@dataclass(frozen=True, slots=True)
class RecallReport:
    """What the recall block of an ``assemble`` did: its query's trace and what fired."""

    mode: str
    trace_id: str | None
    fired: list[str]
    injected: bool
    tokens: int


@dataclass(frozen=True, slots=True)
class Assembled:
    """An assembled context and an account of what went into it."""

    messages: list[dict[str, Any]]
    system: str | None
    tokens: int
    budget: int
    over_budget: bool
    fresh_tail: dict[str, int]
    included: dict[str, int]
    dropped: dict[str, int]
    pairing: dict[str, int]
    stubbed: int
    context_tokens: int
    flush_recommended: bool
    recall_tokens: int = 0
    """What the recall block cost (0: none was given, or it did not fit)."""
    recall: RecallReport | None = None
    """The graph query behind the recall block, when one ran."""
    withheld: int = 0
    """Summaries shown as placeholders: a source was suppressed and the rebuild of the
    rest has not landed yet (``brain.lcm.suppress``)."""
    budget_changed: bool = False
    """The session follows this call's budget from now on (``brain.lcm.budgets``): the
    daemon then looks for compaction to do. Not sent on the wire."""


@dataclass
class _Entry:
    """A cached rendering of one context item."""

    turn: Turn
    stub: Turn | None = None  # a stub stand-in for a large tool result
    stub_cost: int = 0
    withheld: bool = False  # a placeholder for a withheld summary


@dataclass
class _View:
    version: int
    epoch: tuple[int, int]  # (compaction, suppression): a change means rebuild, not append
    items: list[Item]
    positions: list[int]
    entries: dict[tuple[str, int], _Entry] = field(default_factory=dict)
    summary_indices: list[int] = field(default_factory=list)
    system_positions: set[int] = field(default_factory=set)
    """Positions of the (visible) system messages: pinned, never dropped."""


class Assembler:
    """Assembles contexts for one engine; holds the per-conversation cache.

    Thread-safe: assembles of one conversation take turns (they share its cached
    view); other conversations' go on beside them. Each may read on its own
    connection, at its own snapshot (see ``_view``).
    """

    def __init__(self, config: CompactionConfig) -> None:
        self.config = config
        self._views: dict[int, _View] = {}
        self._guard = threading.Lock()  # the views dict and the per-conversation locks
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
            return _empty(options)
        with self._guard:
            turn = self._turns.setdefault(conv.id, threading.Lock())
        with turn:
            return self._assemble(store, conv, options, write or on_store(store))

    def _assemble(
        self, store: Store, conv: Conversation, options: AssembleOptions, write: WritePath
    ) -> Assembled:
        view = self._view(store, conv)
        start, cut, tail, tail_stubs, pinned, prefix, shed = self._split(store, conv, view, options)
        pinned_cost = sum(i.token_count for i in pinned)
        tail_cost = sum(
            view.entries[_key(i)].stub_cost if tail_stubs.get(i.pos) else i.token_count
            for i in tail
        )
        room = options.budget - tail_cost - pinned_cost
        recall_cost = _recall_cost(options.recall_block, room)
        room -= recall_cost
        # A cut tail leaves no room for anything older (and a gap would mislead).
        picked: dict[int, bool] = {}
        if not shed:
            summaries = [view.items[i] for i in view.summary_indices if i < cut]
            picked = self._pick(store, view, summaries, prefix, room, options)
        # System messages first (OpenAI wants them there; Anthropic takes them
        # out into ``system`` wherever they are).
        chosen = [(i, False) for i in pinned]
        chosen += [(i, picked[i.pos]) for i in prefix if i.pos in picked]
        chosen += [(i, tail_stubs.get(i.pos, False)) for i in tail]
        kept = len(pinned) + len(tail)  # never given up: the pinned and the tail
        self._ensure_entries(store, view, [i for i, _ in chosen])
        paired, report, tokens = _paired(store, conv.id, view, chosen)
        tokens += recall_cost
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
                chosen[len(pinned) : len(chosen) - len(tail)], key=lambda c: _drop_rank(c[0])
            ):
                drop.add(item.pos)
                over -= view.entries[_key(item)].stub_cost if stubbed else item.token_count
                if over <= 0:
                    break
            chosen = [c for c in chosen if c[0].pos not in drop]
            paired, report, tokens = _paired(store, conv.id, view, chosen)
            tokens += recall_cost
        if recall_cost and options.recall_block:
            paired = _with_recall(paired, options.recall_block)

        system: str | None = None
        if options.format == "anthropic":
            system, messages = render_anthropic(paired)
        else:
            messages = render_openai(paired)

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
            fresh_tail={"count": len(tail), "tokens": tail_cost, "first_seq": start},
            included={"summaries": summaries_in, "messages": len(chosen) - summaries_in},
            dropped={
                "summaries": summaries_all - summaries_in,
                "messages": len(view.items) - len(chosen) - (summaries_all - summaries_in),
            },
            pairing=asdict(report),
            stubbed=sum(1 for _, s in chosen if s),
            context_tokens=conv.context_tokens,
            flush_recommended=flush,
            recall_tokens=recall_cost,
            withheld=sum(1 for i, _ in chosen if view.entries[_key(i)].withheld),
            budget_changed=changed,
        )

    def _pick(
        self,
        store: Store,
        view: _View,
        summaries: list[Item],
        prefix: list[Item],
        room: int,
        options: AssembleOptions,
    ) -> dict[int, bool]:
        """What of ``prefix`` (the history before the tail, system messages aside; its
        ``summaries`` given apart) fits in ``room``: position -> shown as a stub.

        Summaries before raw history: they are compact and cover everything older,
        so they are the last thing to give up. Summaries go in by ``_summary_rank``
        (deepest first), each depth up to its first summary that does not fit (a run
        without holes), so when not all fit what goes is the middle of the history,
        never the summary of its beginning. Raw history is taken newest first,
        stopping at the first message that does not fit (it must join the tail
        without a gap). Costs come from the items themselves; a rendered entry is
        needed only to price a stub, so a cold call loads just what it shows.
        """
        picked: dict[int, bool] = {}
        full: int | None = None  # the depth whose run stopped
        for item in sorted(summaries, key=_summary_rank):
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
            stubbed = False
            cost = item.token_count
            if options.stubs and cost > options.stub_tokens:
                entry = self._entry(store, view, item)
                if entry.stub is not None and entry.stub_cost < cost:
                    stubbed, cost = True, entry.stub_cost
            if cost > room:
                break
            picked[item.pos] = stubbed
            room -= cost
        return picked

    def _split(
        self, store: Store, conv: Conversation, view: _View, options: AssembleOptions
    ) -> tuple[int, int, list[Item], dict[int, bool], list[Item], list[Item], list[Item]]:
        """The context list split for ``options``: (tail first seq, tail index in the
        view, tail, its stubs, pinned system messages, the rest before the tail, what
        was cut from the tail to fit the budget)."""
        count = options.fresh_tail_count
        start = tail_start(store, conv, self.config.fresh_tail_count if count is None else count)
        cut = bisect.bisect_left(view.positions, start)
        tail = view.items[cut:]
        pinned, prefix = _pinned(view, view.items[:cut])

        tail, tail_stubs, shed = self._fit_tail(store, conv, view, tail, options.budget, pinned)
        if shed:
            # Cut system messages stay pinned; the rest of the cut tail is history
            # that did not fit (nothing before it fits either: there is no room).
            pinned = pinned + [i for i in shed if i.pos in view.system_positions]
            start = tail[0].pos if tail else conv.max_seq + 1
        return start, cut, tail, tail_stubs, pinned, prefix, shed

    def _fit_tail(
        self,
        store: Store,
        conv: Conversation,
        view: _View,
        tail: list[Item],
        budget: int,
        pinned: list[Item],
    ) -> tuple[list[Item], dict[int, bool], list[Item]]:
        """The fresh tail made to fit ``budget`` beside ``pinned``: (kept, pos -> stubbed, cut).

        A tail that fits comes back whole.

        First the tail's large tool results become stubs (oldest first, until it
        fits: a stub names the message ``describe`` recovers); then the tail is
        cut from its oldest end, never past the newest user turn (which must
        stay) and never between a tool call and a result after the cut. If even
        that does not fit the caller reports ``over_budget``.
        """
        room = budget - sum(i.token_count for i in pinned)
        if sum(i.token_count for i in tail) <= room:
            return tail, {}, []
        self._ensure_entries(store, view, tail)
        entries = [view.entries[_key(i)] for i in tail]
        costs = [i.token_count for i in tail]
        stubbed: dict[int, bool] = {}
        total = sum(costs)
        for n, (item, entry) in enumerate(zip(tail, entries, strict=True)):
            if total <= room:
                break
            if entry.stub is not None and entry.stub_cost < costs[n]:
                total -= costs[n] - entry.stub_cost
                costs[n] = entry.stub_cost
                stubbed[item.pos] = True
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

    def forget(self, conversation_id: int | None = None) -> None:
        """Drop cached views (one conversation, or all)."""
        with self._guard:
            if conversation_id is None:
                self._views.clear()
            else:
                self._views.pop(conversation_id, None)

    # -- cache ----------------------------------------------------------------

    def _view(self, store: Store, conv: Conversation) -> _View:
        with self._guard:
            view = self._views.get(conv.id)
        epoch = (conv.compaction_epoch, conv.suppress_epoch)
        if view is not None and (view.version > conv.context_version or view.epoch > epoch):
            # This read's snapshot is older than the cached view (another read, begun
            # later, refreshed it): build one for this snapshot and leave the cache be.
            return self._load_view(store, conv, None)
        if view is not None and view.version == conv.context_version and view.epoch == epoch:
            return view
        if view is not None and view.epoch == epoch and view.items:
            # Only appends since the view was built: fetch the new items.
            new = items(store, conv.id, after_pos=view.items[-1].pos)
            view.summary_indices += [
                len(view.items) + n for n, i in enumerate(new) if not i.is_message
            ]
            view.system_positions |= _system_positions(store, conv.id, view.items[-1].pos)
            view.items += new
            view.positions += [i.pos for i in new]
            view.version = conv.context_version
            return view
        view = self._load_view(store, conv, view)
        with self._guard:
            if len(self._views) >= _VIEW_LIMIT:
                self._views.pop(next(iter(self._views)))
            self._views[conv.id] = view
        return view

    def _load_view(self, store: Store, conv: Conversation, old_view: _View | None) -> _View:
        """A view of ``conv`` read whole from ``store`` (keeping ``old_view``'s messages)."""
        loaded = items(store, conv.id)
        old = old_view.entries if old_view is not None else {}
        return _View(
            conv.context_version,
            (conv.compaction_epoch, conv.suppress_epoch),
            loaded,
            [i.pos for i in loaded],
            {k: v for k, v in old.items() if k[0] == "m"},  # messages never change
            [n for n, i in enumerate(loaded) if not i.is_message],
            _system_positions(store, conv.id, 0),
        )

    def _entry(self, store: Store, view: _View, item: Item) -> _Entry:
        """The rendered entry of one item, loading it (and a batch before it) if needed."""
        key = _key(item)
        if key not in view.entries:
            index = bisect.bisect_left(view.positions, item.pos)
            self._ensure_entries(store, view, view.items[max(0, index - _ENTRY_BATCH) : index + 1])
        return view.entries[key]

    def _ensure_entries(self, store: Store, view: _View, wanted: Sequence[Item]) -> None:
        missing_m = [
            i.message_id for i in wanted if i.message_id and ("m", i.message_id) not in view.entries
        ]
        missing_s = [
            i.summary_id for i in wanted if i.summary_id and ("s", i.summary_id) not in view.entries
        ]
        if missing_m:
            for msg in load_messages(store, missing_m):
                view.entries[("m", msg.row_id)] = self._message_entry(msg)
        if missing_s:
            found = load_summaries(store, missing_s)
            kids = _child_ids(store, missing_s)
            for row_id, summary in found.items():
                view.entries[("s", row_id)] = _summary_entry(summary, kids.get(row_id, ()))

    def _message_entry(self, msg: StoredMessage) -> _Entry:
        turn = turn_from_message(msg)
        entry = _Entry(turn)
        results = [b for b in turn.blocks if b.type == "tool_result"]
        if (
            len(results) == 1
            and len(turn.blocks) == 1
            and not results[0].text.startswith(STUB_PREFIX)
        ):
            # A lone tool result can stand in as a stub; describe(msg id) recovers it.
            # One kept in a payload file already is a stub (naming the file, with the
            # output's real size): a stub of that stub would only hide both.
            stub = stub_text(msg.id, results[0].name, len(results[0].text.encode()), None)
            entry.stub = Turn(turn.role, (replace(results[0], text=stub),), turn.source, turn.seq)
            entry.stub_cost = message_cost(estimate_tokens(stub))
        return entry

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


def _summary_rank(item: Item) -> tuple[int, int]:
    """The order summaries are taken in under a budget.

    Deepest first: a condensed summary covers the most history per token. Within
    a condensed depth oldest first: the oldest is the beginning of the
    conversation, which nothing else stands for, and the next ones join it. Leaf
    summaries newest first: they are recent detail, and the newest join the tail.
    """
    depth = int(item.depth or 0)
    return (-depth, item.pos if depth else -item.pos)


def _drop_rank(item: Item) -> tuple[int, int, int]:
    """The order items before the tail are given up in when pairing made the context
    too large: raw history oldest first, then summaries, the last taken first."""
    if item.is_message:
        return (0, 0, item.pos)
    depth, pos = _summary_rank(item)
    return (1, -depth, -pos)


def _pinned(view: _View, prefix: list[Item]) -> tuple[list[Item], list[Item]]:
    """``prefix`` split into its system messages (pinned) and the rest."""
    if not view.system_positions:
        return [], prefix
    pinned = [i for i in prefix if i.pos in view.system_positions]
    return pinned, [i for i in prefix if i.pos not in view.system_positions]


def _empty(options: AssembleOptions) -> Assembled:
    """The context of a session with no messages: nothing, at no cost."""
    return Assembled(
        messages=[],
        system=None,
        tokens=0,
        budget=options.budget,
        over_budget=False,
        fresh_tail={"count": 0, "tokens": 0, "first_seq": 1},
        included={"summaries": 0, "messages": 0},
        dropped={"summaries": 0, "messages": 0},
        pairing=asdict(PairingReport(0, 0, 0, 0)),
        stubbed=0,
        context_tokens=0,
        flush_recommended=False,
    )


def _system_positions(store: Store, conversation_id: int, after_pos: int) -> set[int]:
    """Positions after ``after_pos`` of the visible system messages in the context list."""
    return {
        int(r[0])
        for r in store.execute(
            "SELECT c.pos FROM context_items c CROSS JOIN messages m ON m.id = c.message_id "
            "WHERE c.conversation_id = ? AND c.pos > ? AND m.role = 'system' "
            "AND m.suppressed_at IS NULL",
            (conversation_id, after_pos),
        )
    }


def _recall_cost(block: str | None, room: int) -> int:
    """What the recall block takes from the room (0: none, or it does not fit).

    It is placed before summaries and raw history: it is what the graph found
    relevant to the newest question, and small by construction (its max_chars).
    """
    if not block:
        return 0
    cost = message_cost(estimate_tokens(block))
    return cost if cost <= room else 0


def _with_recall(turns: list[Turn], block: str) -> list[Turn]:
    """``turns`` with a user turn holding ``block`` right after the last summary turn
    (or the leading system messages)."""
    at = 0
    while at < len(turns) and turns[at].role == "system":
        at += 1
    for i, turn in enumerate(turns):
        if turn.source.startswith("sum_"):
            at = i + 1
    seq = turns[at - 1].seq if at else 0
    recall = Turn("user", (Block("text", block),), "recall", seq, synthetic=True)
    return [*turns[:at], recall, *turns[at:]]


def _paired(
    store: Store, conversation_id: int, view: _View, chosen: list[tuple[Item, bool]]
) -> tuple[list[Turn], PairingReport, int]:
    """The chosen items' turns with tool calls and results paired, and their cost."""
    turns: list[Turn] = []
    cost_of: dict[int, int] = {}
    for item, stubbed in chosen:
        entry = view.entries[_key(item)]
        turn = entry.stub if stubbed and entry.stub is not None else entry.turn
        turns.append(turn)
        cost_of[id(turn)] = entry.stub_cost if stubbed else item.token_count
    elsewhere = _answered_elsewhere(store, conversation_id, turns)
    paired, report = pair_tools(turns, answered_elsewhere=elsewhere)
    # Not ``cost_of.get(id(t), turn_tokens(t))``: that computes the default every time.
    tokens = sum(cost_of[id(t)] if id(t) in cost_of else turn_tokens(t) for t in paired)
    return paired, report, tokens


def _key(item: Item) -> tuple[str, int]:
    return ("m", item.message_id) if item.message_id else ("s", int(item.summary_id or 0))


def _summary_entry(summary: Summary, child_ids: Sequence[str]) -> _Entry:
    # A withheld summary still holds suppressed text: its span is shown without it
    # until compaction swaps the rebuilt summary in.
    text = withheld_xml(summary, child_ids) if summary.hidden else summary_xml(summary, child_ids)
    return _Entry(summary_turn(summary.id, text, summary.first_seq), withheld=summary.hidden)


def _child_ids(store: Store, row_ids: list[int]) -> dict[int, tuple[str, ...]]:
    found: dict[int, list[str]] = {}
    for parent, child in store.execute(
        "SELECT ss.summary_id, s.summary_id FROM summary_sources ss "
        "JOIN summaries s ON s.id = ss.child_id "
        "WHERE ss.summary_id IN (SELECT value FROM json_each(?)) "
        "ORDER BY ss.summary_id, ss.ordinal",
        (orjson.dumps(row_ids).decode(),),
    ):
        found.setdefault(int(parent), []).append(str(child))
    return {k: tuple(v) for k, v in found.items()}


def _answered_elsewhere(store: Store, conversation_id: int, turns: list[Turn]) -> frozenset[str]:
    """Ids of calls in ``turns`` answered by a result that is not in ``turns``."""
    calls: set[str] = set()
    results: set[str] = set()
    for turn in turns:
        for block in turn.blocks:
            if block.call_id is None:
                continue
            if block.type == "tool_call":
                calls.add(block.call_id)
            elif block.type == "tool_result":
                results.add(block.call_id)
    open_calls = sorted(calls - results)
    if not open_calls:
        return frozenset()
    rows = store.execute(
        "SELECT DISTINCT p.tool_call_id FROM message_parts p "
        "JOIN messages m ON m.id = p.message_id "
        "WHERE p.tool_call_id IN (SELECT value FROM json_each(?)) AND p.kind = 'tool_result' "
        "AND m.conversation_id = ?",
        (orjson.dumps(open_calls).decode(), conversation_id),
    )
    return frozenset(str(r[0]) for r in rows)
