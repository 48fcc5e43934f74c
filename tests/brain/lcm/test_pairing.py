"""brain.lcm.pairing: one rule pairs tool results with calls; its SQL and Python forms agree."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import MessageIn, Store
from brain.lcm.context import conversation, tail_start
from brain.lcm.ingest import ingest
from brain.lcm.messages import load_range
from brain.lcm.pairing import (
    answered_messages,
    answered_seqs,
    calls_answered_after,
    match,
    results_of_calls,
)
from brain.lcm.render import Block, pair_tools, turn_from_message
from tests.brain.lcm.helpers import new_session

# Few ids, so calls share them, results come before calls, answer nothing, or twice.
call_ids = st.sampled_from(["a", "b", "c"])


def _openai_calls(ids: list[str]) -> list[dict[str, Any]]:
    return [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]


def _use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "f", "input": {}}


def _result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "out"}


@st.composite
def tool_message(draw: st.DrawFn) -> MessageIn:
    """A message holding tool calls, results or neither, in the shapes clients send."""
    shape = draw(st.sampled_from(["openai_calls", "openai_result", "uses", "results", "mixed"]))
    text = draw(st.sampled_from(["", "note"]))
    if shape == "openai_calls":
        calls = _openai_calls(draw(st.lists(call_ids, min_size=1, max_size=3)))
        return MessageIn("assistant", text or None, tool_calls=calls)
    if shape == "openai_result":
        return MessageIn("tool", "out", tool_call_id=draw(call_ids))
    head = [{"type": "text", "text": text}] if text else []
    if shape == "uses":
        return MessageIn(
            "assistant", head + [_use(i) for i in draw(st.lists(call_ids, max_size=3))]
        )
    if shape == "results":
        return MessageIn("user", [_result(i) for i in draw(st.lists(call_ids, max_size=3))] + head)
    # Calls and results in one message, in any order (order inside a message counts).
    mixed = draw(st.lists(st.tuples(st.booleans(), call_ids), min_size=1, max_size=4))
    return MessageIn("assistant", head + [_use(i) if c else _result(i) for c, i in mixed])


def _stored(store: Store, messages: list[MessageIn]) -> tuple[int, list[int], list[list[Block]]]:
    """Ingest; the conversation id, each message's seq and its blocks as render reads them."""
    session = new_session()
    ingest(store, session, messages)
    conv = conversation(store, session)
    stored = load_range(store, conv.id, 1, conv.max_seq)
    return conv.id, [m.seq for m in stored], [list(turn_from_message(m).blocks) for m in stored]


def _python_by_seq(seqs: list[int], blocks: list[list[Block]]) -> list[tuple[int, int, int]]:
    """(result seq, n-th tool result of its message, call seq) by the Python form."""
    found = answered_messages(blocks)
    out = []
    for m, turn in enumerate(blocks):
        results = [b for b, block in enumerate(turn) if block.type == "tool_result"]
        out += [(seqs[m], n, seqs[found[(m, b)]]) for n, b in enumerate(results) if (m, b) in found]
    return out


def _sql_by_seq(store: Store, conversation_id: int) -> list[tuple[int, int, int]]:
    """(result seq, n-th tool result of its message, call seq) by the SQL form."""
    found = sorted(answered_seqs(store, conversation_id).items())
    all_results = sorted(
        (int(s), int(o))
        for s, o in store.execute(
            "SELECT m.seq, p.ordinal FROM messages m JOIN message_parts p ON p.message_id = m.id "
            "WHERE m.conversation_id = ? AND p.kind = 'tool_result'",
            (conversation_id,),
        )
    )
    nth = {
        ref: sum(1 for r in all_results[:k] if r[0] == ref[0]) for k, ref in enumerate(all_results)
    }
    return [(seq, nth[(seq, o)], call) for (seq, o), call in found]


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(tool_message(), min_size=1, max_size=8))
def test_sql_and_python_pair_every_result_with_the_same_call(
    store: Store, messages: list[MessageIn]
) -> None:
    conversation_id, seqs, blocks = _stored(store, messages)
    assert _sql_by_seq(store, conversation_id) == _python_by_seq(seqs, blocks)
    # The compaction form: calls in a range answered after it, as the Python form says.
    python_pairs = _python_by_seq(seqs, blocks)
    for first in seqs:
        for last in seqs:
            if last < first:
                continue
            expected: dict[int, int] = {}
            for result_seq, _, call_seq in python_pairs:
                if first <= call_seq <= last and result_seq > last:
                    expected[call_seq] = max(expected.get(call_seq, 0), result_seq)
            assert calls_answered_after(store, conversation_id, first, last) == expected
    # The assemble form: the stored results of some call ids and the calls they answer.
    answered = answered_messages(blocks)
    for ids in (["a"], ["b", "c"], ["a", "b", "c"]):
        by_python = {
            (seqs[m], seqs[call], blocks[m][b].call_id)
            for (m, b), call in answered.items()
            if blocks[m][b].call_id in ids
        }
        assert results_of_calls(store, conversation_id, ids) == by_python


def test_rendering_pairs_tail_results_with_calls_the_fresh_tail_holds(store: Store) -> None:
    # Two responses numbered their calls afresh; the first call was never answered.
    session = new_session()
    ingest(
        store,
        session,
        [
            MessageIn("assistant", "one", tool_calls=_openai_calls(["call_0"])),
            MessageIn("assistant", "two", tool_calls=_openai_calls(["call_0"])),
            MessageIn("tool", "first", tool_call_id="call_0"),
            MessageIn("tool", "second", tool_call_id="call_0"),
            MessageIn("user", "next"),
        ],
    )
    conv = conversation(store, session)
    assert conv.max_seq == 5
    start = tail_start(store, conv, 2)  # the SQL form stretches the tail to the calls
    turns = [turn_from_message(m) for m in load_range(store, conv.id, 1, conv.max_seq)]
    paired, _ = pair_tools(turns)  # the Python form places results after their calls
    call_seq = 0
    for turn in paired:
        if any(b.type != "tool_result" for b in turn.blocks):
            call_seq = turn.seq
        elif turn.seq >= start and not turn.synthetic:
            assert call_seq >= start, f"result at {turn.seq} placed after a call before the tail"


def _blocks(*specs: str) -> list[Block]:
    """``c:a`` is a call of id a, ``r:a`` a result for it, anything else text."""
    out = []
    for spec in specs:
        kind, _, call_id = spec.partition(":")
        if kind == "c":
            out.append(Block("tool_call", call_id=call_id))
        elif kind == "r":
            out.append(Block("tool_result", call_id=call_id))
        else:
            out.append(Block("text", spec))
    return out


def test_a_result_answers_the_latest_call_of_its_id_before_it() -> None:
    turns = [_blocks("c:a"), _blocks("r:a"), _blocks("c:a"), _blocks("r:a")]
    assert answered_messages(turns) == {(1, 0): 0, (3, 0): 2}


def test_results_after_two_calls_sharing_an_id_answer_the_later_one() -> None:
    turns = [_blocks("c:a"), _blocks("c:a"), _blocks("r:a"), _blocks("r:a")]
    assert answered_messages(turns) == {(2, 0): 1, (3, 0): 1}
    # The later call takes the first result; the earlier call stays unanswered.
    assert match(turns) == {(1, 0): (2, 0)}


def test_calls_sharing_an_id_in_one_message_take_its_results_in_call_order() -> None:
    turns = [_blocks("c:a", "c:a"), _blocks("r:a", "r:a")]
    assert match(turns) == {(0, 0): (1, 0), (0, 1): (1, 1)}


def test_a_result_before_any_call_of_its_id_answers_the_first_call_after_it() -> None:
    turns = [_blocks("r:a"), _blocks("c:a"), _blocks("c:a")]
    assert answered_messages(turns) == {(0, 0): 1}


def test_a_call_takes_a_result_after_it_before_one_stored_earlier() -> None:
    turns = [_blocks("r:a"), _blocks("c:a"), _blocks("r:a")]
    assert match(turns) == {(1, 0): (2, 0)}


def test_order_inside_a_message_counts() -> None:
    turns = [_blocks("c:a"), _blocks("r:a", "c:a", "r:a")]
    assert answered_messages(turns) == {(1, 0): 0, (1, 2): 1}


def test_a_result_without_a_call_or_an_id_answers_nothing() -> None:
    turns = [_blocks("r:a", "text"), [Block("tool_result")], _blocks("c:b")]
    assert answered_messages(turns) == {}
    assert match(turns) == {}
