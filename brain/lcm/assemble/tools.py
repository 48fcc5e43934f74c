"""The chosen items' tool calls and results paired, and what the paired context costs.

Pairing is ``render.pair_tools``'s, by ``brain.lcm.pairing``'s rule; what this
module adds is the store's side: a call whose result exists but was not chosen
(summarised, or given up for the budget) is dropped rather than answered with a
made-up error, and which stored result answers which call is the same rule's
SQL form (``pairing.results_of_calls``), so two calls sharing an id are told
apart as the rule says. Tested through ``Brain.assemble`` in
tests/brain/lcm/assemble/test_assembler.py (the pairing section and the budget
properties over generated tool conversations).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from brain.lcm.assemble.view import View, key, shown_cost
from brain.lcm.pairing import results_of_calls
from brain.lcm.render import (
    Matched,
    PairingReport,
    Turn,
    match_turns,
    pair_tools,
    turn_tokens,
)
from brain.store.connection import Store
from brain.tokens import estimate_tokens, message_cost

if TYPE_CHECKING:
    from brain.lcm.assemble.history import Shown


def paired(
    store: Store, conversation_id: int, view: View, chosen: list[Shown]
) -> tuple[list[Turn], PairingReport, int]:
    """The chosen items' turns (items, as stubs or not, and stand-ins) with tool calls
    and results paired, and their cost."""
    turns: list[Turn] = []
    cost_of: dict[int, int] = {}
    result_cost: dict[int, int] = {}  # a result block -> what it costs as its own message
    shown: set[int] = set()  # seqs of the messages chosen
    for one in chosen:
        if one.gap is not None:
            turns.append(one.gap.turn)
            cost_of[id(one.gap.turn)] = one.gap.cost
            continue
        item = one.item
        assert item is not None
        entry = view.entries[key(item)]
        turn = entry.shown(one.stubs)
        turns.append(turn)
        cost_of[id(turn)] = shown_cost(view, item, one.stubs)
        if item.is_message:
            shown.add(turn.seq)
            # As ingest priced them (``content._content_tokens``): a lone result
            # costs its message's cost, one of several what its own text does.
            lone = len(turn.blocks) == 1
            for block in turn.blocks:
                if block.type == "tool_result":
                    result_cost[id(block)] = (
                        cost_of[id(turn)] if lone else message_cost(estimate_tokens(block.text))
                    )
    # One match serves both the store lookup and the pairing itself.
    matched = match_turns(turns)
    elsewhere = answered_elsewhere(store, conversation_id, turns, shown, matched)
    out, report = pair_tools(turns, answered_elsewhere=elsewhere, matched=matched)
    # Not ``cost_of.get(id(t), _cost(t))``: that computes the default every time.
    tokens = sum(cost_of[id(t)] if id(t) in cost_of else _cost(t, result_cost) for t in out)
    return out, report, tokens


def _cost(turn: Turn, result_cost: dict[int, int]) -> int:
    """What a turn pairing made or changed costs.

    A turn of tool results costs what its results cost as messages of their own
    (as OpenAI sends them, and as ingest prices them): the results of one
    Anthropic user turn regrouped, or with a stub given its call's hint, cost
    what the same results cost as OpenAI ``tool`` messages, so pairing never
    tells the shapes apart. A result pairing left as it was keeps its price.
    """
    if not turn.blocks or any(b.type != "tool_result" for b in turn.blocks):
        return turn_tokens(turn)
    return sum(
        result_cost[id(b)] if id(b) in result_cost else turn_tokens(replace(turn, blocks=(b,)))
        for b in turn.blocks
    )


def shown_stubs(view: View, chosen: list[Shown], turns: list[Turn]) -> int:
    """How many of the stubs ``chosen`` asks for are in the paired ``turns``: a result
    pairing dropped (its call was not chosen) is not shown, stub or not, and one
    message holding several results counts each, as their tool messages would."""
    asked = {
        (stub.block.call_id, entry.turn.source)
        for one in chosen
        if one.stubs and one.item is not None
        for entry in (view.entries[key(one.item)],)
        for stub in entry.stubs
        if one.stubs >> stub.index & 1
    }
    if not asked:
        return 0
    return sum(
        1
        for turn in turns
        for block in turn.blocks
        if block.type == "tool_result" and (block.call_id, turn.source) in asked
    )


def answered_elsewhere(
    store: Store, conversation_id: int, turns: list[Turn], shown: set[int], matched: Matched
) -> frozenset[tuple[int, str]]:
    """The calls in ``turns`` answered by a stored result outside ``turns``, as
    (seq of the message holding the call, call id); ``shown``: the seqs of the
    messages in ``turns``; ``matched``: ``match_turns(turns)``.

    Only calls left unanswered among ``turns`` are looked up, and a result counts
    only if ``brain.lcm.pairing``'s rule gives it to that message's call: with a
    server that numbers calls afresh (``call_0`` in every response), an earlier
    call's result does not answer a later call of the same id.
    """
    open_calls = {
        (turns[t].seq, call_id)
        for t, b in matched.calls
        if (t, b) not in matched.answer and (call_id := turns[t].blocks[b].call_id) is not None
    }
    if not open_calls:
        return frozenset()
    ids = sorted({call_id for _, call_id in open_calls})
    answered = {
        (call_seq, call_id)
        for result_seq, call_seq, call_id in results_of_calls(store, conversation_id, ids)
        if result_seq not in shown
    }
    return frozenset(open_calls & answered)
