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

from brain.lcm.assemble.view import Stubs, View, key, shown_cost
from brain.lcm.context import Item
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


def paired(
    store: Store, conversation_id: int, view: View, chosen: list[tuple[Item, Stubs]]
) -> tuple[list[Turn], PairingReport, int]:
    """The chosen items' turns (item, the results shown as stubs) with tool calls and
    results paired, and their cost."""
    turns: list[Turn] = []
    cost_of: dict[int, int] = {}
    shown: set[int] = set()  # seqs of the messages chosen
    for item, stubbed in chosen:
        entry = view.entries[key(item)]
        turn = entry.shown(stubbed)
        turns.append(turn)
        cost_of[id(turn)] = shown_cost(view, item, stubbed)
        if item.is_message:
            shown.add(turn.seq)
    # One match serves both the store lookup and the pairing itself.
    matched = match_turns(turns)
    elsewhere = answered_elsewhere(store, conversation_id, turns, shown, matched)
    out, report = pair_tools(turns, answered_elsewhere=elsewhere, matched=matched)
    # Not ``cost_of.get(id(t), turn_tokens(t))``: that computes the default every time.
    tokens = sum(cost_of[id(t)] if id(t) in cost_of else turn_tokens(t) for t in out)
    return out, report, tokens


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
