"""The history before the fresh tail, made whole and as detailed as its room allows.

``fit.pick`` chooses what of the history fits (summaries deepest first, raw history
newest first). On its own that can leave holes: raw history no summary covers yet
(a host that never pauses outruns background compaction; the first assemble after
an import) or summaries that did not fit. And once compaction has settled, its
summaries take a fraction of the room. ``plan`` makes the choice whole and full:

1. **No silent hole.** Every run of items left out gets one stand-in (``Gap``): a
   short note naming the span (seqs, times, counts, the first and last ids, the
   summaries in it) and how to read it (``grep`` in the session, ``describe`` /
   ``expand`` an id). Its cost is taken from the room first: picks are given up,
   raw oldest first, until the stand-ins fit. Only when not even a stand-in fits is
   anything reported ``dropped``.
2. **The room is used.** What room is left goes to detail: chosen summaries, newest
   first, are shown as their sources instead (a condensed summary as its child
   summaries, a leaf as its raw messages, large tool results as stubs when asked),
   whenever the difference fits. Sources are read once per summary and cached in
   the view (a summary never changes).

The result is a list of ``Shown`` in history order; ``Plan.coarser`` undoes the
newest expansion (the assembler uses it first when pairing pushed the context
over its budget). Tested through ``Brain.assemble`` in
tests/brain/lcm/assemble/test_history.py.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Final

from brain.lcm.assemble.fit import drop_rank
from brain.lcm.assemble.model import AssembleOptions
from brain.lcm.assemble.view import Stubs, View, ensure_entries, key, shown_cost
from brain.lcm.context import Item
from brain.lcm.ids import public_message_id
from brain.lcm.render import Block, Turn, turn_tokens
from brain.store.connection import Store
from brain.tokens import message_cost

GAP_SOURCE: Final = "gap"
"""The ``source`` of a stand-in's turn (it is no stored message or summary)."""
_GAP_SUMMARY_IDS: Final = 4  # summary ids a stand-in names before "and N more"


@dataclass(frozen=True, slots=True)
class Gap:
    """A stand-in for a run of context items the context leaves out."""

    items: tuple[Item, ...]
    turn: Turn
    cost: int
    messages: int
    """Raw messages stood for."""
    summaries: int
    """Summaries stood for."""


@dataclass(frozen=True, slots=True)
class Shown:
    """One thing shown: an item (a context item, or a source of an expanded summary)
    with the tool results ``stubs`` names shown as stubs, or a stand-in (``gap``)."""

    item: Item | None
    stubs: Stubs = 0
    gap: Gap | None = None


@dataclass
class Plan:
    """What is shown of the history before the tail, and how it can be made coarser."""

    prefix: list[Item]
    picked: dict[int, Stubs]
    """Positions of ``prefix`` items shown -> the results shown as stubs."""
    gaps: list[Gap]
    expanded: list[Item] = field(default_factory=list)
    """Summaries shown as their sources, in the order they were expanded."""
    sources: dict[tuple[str, int], list[Item]] = field(default_factory=dict)
    stubs: dict[tuple[str, int], Stubs] = field(default_factory=dict)
    """The results of expanded summaries' sources shown as stubs (by entry key)."""
    standing: bool = True
    """Whether left-out runs get stand-ins (False once a stand-in had to go)."""
    brief: bool = False
    """Stand-ins say only their span and counts (the full ones did not fit)."""
    _store: Store | None = field(default=None, repr=False)
    _made: dict[tuple[int, int, int, bool], Gap] = field(default_factory=dict, repr=False)
    _session: str = ""

    def shown(self) -> list[Shown]:
        """The plan in history order."""
        out: list[Shown] = []
        opened = {key(i) for i in self.expanded}
        gap_at = {g.items[0].pos: g for g in self.gaps}  # gaps hold no picked item

        def emit(item: Item) -> None:
            k = key(item)
            if k in opened:
                for source in self.sources[k]:
                    emit(source)
            else:
                out.append(Shown(item, self.stubs.get(k, 0)))

        for item in self.prefix:
            if item.pos in gap_at:
                out.append(Shown(None, gap=gap_at[item.pos]))
            elif item.pos in self.picked:
                if self.picked[item.pos]:
                    out.append(Shown(item, self.picked[item.pos]))
                else:
                    emit(item)
        return out

    def coarser(self) -> bool:
        """Undo the newest expansion; False when there is none."""
        if not self.expanded:
            return False
        self.expanded.pop()
        return True

    def give_up(self, shown: list[Shown]) -> None:
        """Leave out these shown items as well (expansions undone first): they join a
        stand-in. Giving up a stand-in makes every stand-in brief first; giving up a
        brief one leaves out every stand-in (nothing then stands for what they named:
        it is dropped)."""
        for one in shown:
            if one.gap is not None:
                if self.brief:
                    self.standing = False
                self.brief = True
            elif one.item is not None:
                self.picked.pop(one.item.pos, None)
        self.gaps = self._regap() if self.standing else []

    def _regap(self) -> list[Gap]:
        assert self._store is not None
        gaps: list[Gap] = []
        for run in _runs(self.prefix, self.picked):
            # Giving up picks one by one re-forms the same runs: each is written once.
            found = (run[0].pos, run[-1].pos, len(run), self.brief)
            if found not in self._made:
                self._made[found] = _gap(self._store, self._session, run, brief=self.brief)
            gaps.append(self._made[found])
        return gaps


def plan(
    store: Store,
    view: View,
    session: str,
    prefix: list[Item],
    picked: dict[int, Stubs],
    room: int,
    options: AssembleOptions,
) -> Plan:
    """``picked`` (``fit.pick``'s choice of ``prefix`` in ``room``) made whole and full.

    ``picked`` is not changed; the plan keeps its own copy.
    """
    result = Plan(prefix, dict(picked), [], _store=store, _session=session)
    chosen = result.picked

    def cost_of(item: Item) -> int:
        return shown_cost(view, item, chosen.get(item.pos, 0))

    used = sum(cost_of(i) for i in prefix if i.pos in chosen)
    result.gaps = result._regap()

    def over() -> bool:
        return bool(result.gaps) and used + sum(g.cost for g in result.gaps) > room

    # Stand-ins first: give up picks (raw oldest first, then summaries, the last taken
    # first) until they fit beside what is left; when none is left to give up, a brief
    # stand-in (its span alone); when even that does not fit, none.
    for brief in (False, True):
        if brief and over():
            result.brief = True
            result.gaps = result._regap()
        while over() and chosen:
            give_up = min((i for i in prefix if i.pos in chosen), key=drop_rank)
            used -= cost_of(give_up)
            del chosen[give_up.pos]
            result.gaps = result._regap()
    if over():
        result.give_up([Shown(None, gap=result.gaps[0])])
    if options.detail:
        _expand(store, view, result, room - used - sum(g.cost for g in result.gaps), options)
    return result


def _runs(prefix: list[Item], chosen: dict[int, Stubs]) -> list[list[Item]]:
    """The runs of ``prefix`` left out of ``chosen``, in order."""
    runs: list[list[Item]] = []
    for n, item in enumerate(prefix):
        if item.pos in chosen:
            continue
        if runs and n > 0 and prefix[n - 1].pos not in chosen:
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def _gap(store: Store, session: str, run: list[Item], *, brief: bool = False) -> Gap:
    """The stand-in for ``run``: its span and how to read it, in under a hundred tokens
    (``brief``: the span and counts alone, in about thirty)."""
    first_seq = run[0].pos
    last_seq = _last_seq(store, run[-1])
    messages = [i.message_id for i in run if i.message_id is not None]
    summaries = [i.summary_id for i in run if i.summary_id is not None]
    head = (
        f'<history_gap session="{_attr(session)}" first_seq="{first_seq}" '
        f'last_seq="{last_seq}" messages="{len(messages)}" summaries="{len(summaries)}"'
    )
    if brief:
        text = f'{head} note="left out for want of room; grep or describe to read" />'
    else:
        what: list[str] = []
        if messages:
            (first_id, first_at), (last_id, last_at) = _message_ends(
                store, messages[0], messages[-1]
            )
            span = first_id if len(messages) == 1 else f"{first_id} to {last_id}"
            times = first_at[:16] if len(messages) == 1 else f"{first_at[:16]} to {last_at[:16]}"
            what.append(f"messages {span} ({times}), not yet summarised")
        if summaries:
            ids = _summary_ids(store, summaries[:_GAP_SUMMARY_IDS])
            more = len(summaries) - len(ids)
            noun = "summary" if len(summaries) == 1 else "summaries"
            what.append(f"{noun} {', '.join(ids)}" + (f" and {more} more" if more > 0 else ""))
        text = (
            f"{head}>\nLeft out for want of room, stored whole: {'; '.join(what)}. "
            "Read them with grep in this session, or describe or expand these ids.\n"
            "</history_gap>"
        )
    turn = Turn("user", (Block("text", text),), GAP_SOURCE, first_seq)
    return Gap(tuple(run), turn, turn_tokens(turn), len(messages), len(summaries))


def _expand(store: Store, view: View, result: Plan, left: int, options: AssembleOptions) -> None:
    """Spend ``left`` tokens on detail: chosen summaries, newest first, shown as their
    sources whenever the difference fits."""
    # Newest first (the highest position); items never overlap, so positions differ.
    heap = [
        (-item.pos, n, item)
        for n, item in enumerate(result.prefix)
        if not item.is_message and item.pos in result.picked and not result.picked[item.pos]
    ]
    heapq.heapify(heap)
    pushed = len(heap)
    while heap and left > 0:
        _, _, item = heapq.heappop(heap)
        sources = _sources(store, view, item)
        if sources is None:
            continue
        stubs: dict[tuple[str, int], Stubs] = {}
        cost = 0
        if options.stubs:  # pricing a stub renders its message (those large enough only)
            big = [i for i in sources if i.is_message and i.token_count > options.stub_tokens]
            ensure_entries(store, view, big)
        for source in sources:
            price = source.token_count
            if source.is_message and options.stubs and price > options.stub_tokens:
                # As ``fit.pick`` stubs raw history: each result over ``stub_tokens``.
                mask = 0
                for stub in view.entries[key(source)].stubs:
                    if stub.cost > options.stub_tokens:
                        mask |= 1 << stub.index
                        price -= stub.saved
                if mask:
                    stubs[key(source)] = mask
            cost += price
        if cost - item.token_count > left:
            continue
        left -= cost - item.token_count
        result.expanded.append(item)
        result.sources[key(item)] = sources
        result.stubs.update(stubs)
        for source in sources:
            if not source.is_message:
                pushed += 1
                heapq.heappush(heap, (-source.pos, pushed, source))


def _sources(store: Store, view: View, summary: Item) -> list[Item] | None:
    """The sources of a summary as items (child summaries, or raw messages) priced as
    shown; None when it must not be opened (it, a child summary or a source message is
    withheld or suppressed). Read with no message text (only child summaries are
    rendered, to price them: a leaf's messages are loaded once one is shown or a stub
    is priced). Cached in the view."""
    k = key(summary)
    if k in view.sources:
        return view.sources[k]
    found = _source_items(store, int(summary.summary_id or 0))
    if found:
        kids = [i for i in found if not i.is_message]
        ensure_entries(store, view, kids)
        # A child summary costs what its rendered entry costs (the cost its context
        # item had before it was condensed).
        found = [
            i if i.is_message else replace(i, token_count=turn_tokens(view.entries[key(i)].turn))
            for i in found
        ]
    view.sources[k] = found or None
    return found or None


def _source_items(store: Store, summary_row: int) -> list[Item] | None:
    """A summary's sources as items (summaries priced later); None if the summary, a
    child summary or a source message is hidden (withheld or suppressed)."""
    if store.scalar(
        "SELECT suppressed_at IS NOT NULL OR hidden_by IS NOT NULL FROM summaries WHERE id = ?",
        (summary_row,),
    ):
        return None
    found: list[Item] = []
    for row in store.execute(
        "SELECT ss.message_id, m.seq, m.token_count, m.suppressed_at IS NOT NULL, "
        "ss.child_id, s.first_seq, s.depth, "
        "s.suppressed_at IS NOT NULL OR s.hidden_by IS NOT NULL "
        "FROM summary_sources ss LEFT JOIN messages m ON m.id = ss.message_id "
        "LEFT JOIN summaries s ON s.id = ss.child_id "
        "WHERE ss.summary_id = ? ORDER BY ss.ordinal",
        (summary_row,),
    ):
        message_id, seq, tokens, suppressed, child_id, first_seq, depth, hidden = (
            int(v or 0) for v in row
        )
        if suppressed or hidden:
            return None
        if row[0] is None:
            found.append(Item(first_seq, None, child_id, depth, 0))
        else:
            found.append(Item(seq, message_id, None, None, message_cost(tokens)))
    return found


def _last_seq(store: Store, item: Item) -> int:
    """The last seq ``item`` covers."""
    if item.is_message:
        return item.pos
    value = store.scalar("SELECT last_seq FROM summaries WHERE id = ?", (item.summary_id,))
    return int(value) if value is not None else item.pos


def _message_ends(store: Store, first: int, last: int) -> list[tuple[str, str]]:
    """(public id, created_at) of two messages, in that order."""
    rows = {
        int(r[0]): (public_message_id(int(r[0]), r[1]), str(r[2]))
        for r in store.execute(
            "SELECT id, client_id, created_at FROM messages WHERE id IN (?, ?)", (first, last)
        )
    }
    return [rows.get(first, ("?", "?")), rows.get(last, ("?", "?"))]


def _summary_ids(store: Store, row_ids: list[int]) -> list[str]:
    """The public ids of some summaries, in the order given."""
    found = {
        int(r[0]): str(r[1])
        for r in store.execute(
            "SELECT id, summary_id FROM summaries WHERE id IN (SELECT value FROM json_each(?))",
            ("[" + ",".join(str(int(i)) for i in row_ids) + "]",),
        )
    }
    return [found[i] for i in row_ids if i in found]


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
