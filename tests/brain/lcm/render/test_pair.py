"""brain.lcm.render.pair: tool calls paired with their results."""

from __future__ import annotations

from brain.lcm.render import (
    UNANSWERED,
    Block,
    PairingReport,
    pair_tools,
    stub_text,
)
from tests.brain.lcm.render.builders import (
    _call,
    _result,
    _shape,
    _text,
    _turn,
)

# -- pair_tools -------------------------------------------------------------------------


def test_paired_turns_come_through_as_the_same_objects() -> None:
    turns = [
        _turn("user", _text("hi")),
        _turn("assistant", _call("c1"), _call("c2")),
        _turn("tool", _result("c1", name="f")),
        _turn("tool", _result("c2", name="f")),
        _turn("assistant", _text("done")),
    ]
    out, report = pair_tools(turns)
    assert all(a is b for a, b in zip(out, turns, strict=True))
    assert report == PairingReport(0, 0, 0, 0)


def test_a_result_after_later_turns_is_moved_next_to_its_call() -> None:
    turns = [
        _turn("assistant", _call("c1")),
        _turn("user", _text("wait")),
        _turn("tool", _result("c1")),
    ]
    out, report = pair_tools(turns)
    assert _shape(out) == [
        ("assistant", (("tool_call", "c1"),)),
        ("tool", (("tool_result", "c1"),)),
        ("user", (("text", "wait"),)),
    ]
    assert out[1].source == turns[2].source
    assert report.moved == 1


def test_a_result_before_its_call_is_moved_after_it() -> None:
    turns = [_turn("tool", _result("c1", "early")), _turn("assistant", _call("c1"))]
    out, report = pair_tools(turns)
    assert _shape(out) == [
        ("assistant", (("tool_call", "c1"),)),
        ("tool", (("tool_result", "c1"),)),
    ]
    assert out[1].blocks[0].text == "early"
    assert report.moved == 1


def test_results_of_one_turn_follow_the_call_order() -> None:
    turns = [
        _turn("assistant", _call("c1"), _call("c2"), _call("c3")),
        _turn("tool", _result("c3")),
        _turn("tool", _result("c1")),
        _turn("tool", _result("c2")),
    ]
    out, _ = pair_tools(turns)
    assert [t.blocks[0].call_id for t in out[1:]] == ["c1", "c2", "c3"]


def test_results_sharing_a_turn_with_text_are_split_from_it_and_go_first() -> None:
    turns = [
        _turn("assistant", _call("c1"), _call("c2")),
        _turn("user", _text("and also"), _result("c2"), _result("c1")),
    ]
    out, report = pair_tools(turns)
    assert _shape(out) == [
        ("assistant", (("tool_call", "c1"), ("tool_call", "c2"))),
        ("user", (("tool_result", "c1"), ("tool_result", "c2"))),
        ("user", (("text", "and also"),)),
    ]
    assert report.moved == 0


def test_a_result_whose_call_is_absent_is_dropped() -> None:
    turns = [_turn("tool", _result("gone")), _turn("user", _text("hi"))]
    out, report = pair_tools(turns)
    assert _shape(out) == [("user", (("text", "hi"),))]
    assert report.dropped_results == 1


def test_a_second_result_for_one_call_is_dropped_keeping_the_first_after_the_call() -> None:
    turns = [
        _turn("tool", _result("c1", "before")),
        _turn("assistant", _call("c1")),
        _turn("tool", _result("c1", "first")),
        _turn("tool", _result("c1", "again")),
    ]
    out, report = pair_tools(turns)
    assert [b.text for t in out for b in t.blocks if b.type == "tool_result"] == ["first"]
    assert report.dropped_results == 2


def test_a_reused_call_id_pairs_each_result_with_its_own_call() -> None:
    turns = [
        _turn("assistant", _call("call_0", "a")),
        _turn("tool", _result("call_0", "from a")),
        _turn("assistant", _call("call_0", "b")),
        _turn("tool", _result("call_0", "from b")),
    ]
    out, report = pair_tools(turns)
    assert all(a is b for a, b in zip(out, turns, strict=True))
    assert report == PairingReport(0, 0, 0, 0)


def test_results_after_two_calls_sharing_an_id_answer_the_later_call() -> None:
    # brain.lcm.pairing's rule, as the fresh tail and compaction read it: the earlier
    # call was never answered, and the second result is a duplicate.
    turns = [
        _turn("assistant", _call("call_0", "a")),
        _turn("assistant", _call("call_0", "b")),
        _turn("tool", _result("call_0", "first")),
        _turn("tool", _result("call_0", "second")),
        _turn("user", _text("next")),
    ]
    out, report = pair_tools(turns)
    assert [(t.seq, b.text) for t in out for b in t.blocks if b.type == "tool_result"] == [
        (turns[0].seq, UNANSWERED),
        (turns[2].seq, "first"),
    ]
    assert (report.synthesized, report.dropped_results) == (1, 1)


def test_a_call_answered_outside_the_selection_is_dropped_with_its_empty_turn() -> None:
    turns = [
        _turn("assistant", _call("c1")),
        _turn("assistant", _text("looking"), _call("c2")),
        _turn("user", _text("next")),
    ]
    out, report = pair_tools(turns, answered_elsewhere=frozenset({"c1", "c2"}))
    assert _shape(out) == [("assistant", (("text", "looking"),)), ("user", (("text", "next"),))]
    assert report.dropped_calls == 2


def test_a_call_answered_elsewhere_by_message_leaves_other_calls_of_its_id_answered() -> None:
    # Two responses both numbered their call c1; only the first one's result exists.
    first = _turn("assistant", _call("c1"))
    turns = [first, _turn("user", _text("again")), _turn("assistant", _call("c1"))]
    turns.append(_turn("user", _text("next")))
    out, report = pair_tools(turns, answered_elsewhere=frozenset({(first.seq, "c1")}))
    assert report.dropped_calls == 1
    assert report.synthesized == 1
    assert [b.text for t in out for b in t.blocks if b.type == "tool_result"] == [UNANSWERED]


def test_the_last_call_with_nothing_after_it_is_left_in_progress() -> None:
    turns = [_turn("user", _text("go")), _turn("assistant", _call("c1"), _call("c2"))]
    out, report = pair_tools(turns)
    assert out == turns
    assert report == PairingReport(0, 0, 0, 0)


def test_a_call_followed_only_by_some_of_its_results_is_still_in_progress() -> None:
    turns = [_turn("assistant", _call("c1"), _call("c2")), _turn("tool", _result("c2"))]
    out, report = pair_tools(turns)
    assert out == turns
    assert report.synthesized == 0


def test_an_unanswered_call_gets_a_synthetic_error_result() -> None:
    turns = [
        _turn("assistant", _call("c1", "bash"), _call("c2")),
        _turn("tool", _result("c2")),
        _turn("user", _text("well?")),
    ]
    out, report = pair_tools(turns)
    assert _shape(out) == [
        ("assistant", (("tool_call", "c1"), ("tool_call", "c2"))),
        ("tool", (("tool_result", "c1"),)),
        ("tool", (("tool_result", "c2"),)),
        ("user", (("text", "well?"),)),
    ]
    synthetic = out[1]
    assert synthetic.synthetic
    assert synthetic.blocks == (
        Block("tool_result", UNANSWERED, call_id="c1", name="bash", is_error=True),
    )
    assert (synthetic.source, synthetic.seq) == (turns[0].source, turns[0].seq)
    assert report.synthesized == 1


def test_a_stub_result_gets_its_disambiguator_and_tool_from_the_call() -> None:
    turns = [
        _turn("assistant", _call("c1", "read_file", '{"path": "src/main.py"}')),
        _turn("tool", _result("c1", stub_text("file_9", None, 4096, None))),
    ]
    out, _ = pair_tools(turns)
    result = out[1].blocks[0]
    assert result.text == "[Tool Output: file_9 | tool=read_file | 4096 bytes] src/main.py"
    assert result.name == "read_file"


def test_a_stub_naming_a_block_of_its_message_keeps_the_block_when_given_the_calls_hint() -> None:
    turns = [
        _turn("assistant", _call("c1", "read", '{"path": "a.py"}'), _call("c2", "read")),
        _turn(
            "user", _result("c1", stub_text("msg_7", None, 30_000, None, block=0)), _result("c2")
        ),
    ]
    out, _ = pair_tools(turns)
    stub = out[1].blocks[0]
    assert stub.text == "[Tool Output: msg_7 | content[0] | tool=read | 30000 bytes] a.py"


def test_a_result_merely_starting_like_a_stub_keeps_its_text() -> None:
    text = "[Tool Output: not really a stub\nsecond line"
    turns = [
        _turn("assistant", _call("c1", args='{"path": "x"}')),
        _turn("tool", _result("c1", text)),
    ]
    out, _ = pair_tools(turns)
    assert out[1].blocks[0].text == text
