"""What stands for history the context leaves out, and where the room left goes
(``brain.lcm.assemble.history``), through ``Brain.assemble``."""

from __future__ import annotations

import re

from brain import AssembleOptions, Brain, MessageIn
from tests.brain.lcm.helpers import SUMMARY_XML, chat, output_texts

GAP = re.compile(r'<history_gap session="s" first_seq="(\d+)" last_seq="(\d+)"')
BRIEF_NOTE = 'note="left out for want of room; grep or describe to read" />'


def _gaps(out_messages: list[dict[str, object]]) -> list[str]:
    return [t for t in output_texts(out_messages, "openai") if t.startswith("<history_gap ")]


def test_a_stand_in_names_the_span_left_out_and_ids_describe_reads(small: Brain) -> None:
    small.ingest("s", chat(60))  # no compaction: nothing summarises the oldest turns
    out = small.assemble("s", AssembleOptions(budget=1_200))
    assert out.dropped == {"summaries": 0, "messages": 0}
    assert out.gaps["count"] == 1
    (text,) = _gaps(out.messages)
    found = GAP.match(text)
    assert found is not None, text
    assert found.group(1) == "1"
    left_out = out.gaps["messages"]
    assert int(found.group(2)) == left_out  # seqs 1..n, all raw
    assert f"messages c0 to c{left_out - 1} " in text
    for message_id in ("c0", f"c{left_out - 1}"):
        assert small.describe(message_id, session="s")["kind"] == "message"
    # Everything else is shown: the stand-in and the raw messages account for all 60.
    assert out.included["messages"] + left_out == 60
    assert out.tokens <= 1_200


def test_when_the_full_stand_in_does_not_fit_a_brief_one_does_before_anything_is_dropped(
    small: Brain,
) -> None:
    small.ingest("s", chat(60))
    tail = small.assemble("s", AssembleOptions(budget=100_000, fresh_tail_count=0))
    newest = tail.fresh_tail["tokens"]
    seen_brief = False
    for budget in range(newest + 1, newest + 200, 3):
        out = small.assemble("s", AssembleOptions(budget=budget, fresh_tail_count=0))
        gaps = _gaps(out.messages)
        seen_brief |= any(t.endswith(BRIEF_NOTE) for t in gaps)
        if out.dropped["messages"]:
            # Only when not even a brief stand-in fits beside the newest turn.
            assert not gaps
            assert budget - out.tokens < 40, (budget, out.tokens)
        else:
            assert out.gaps["messages"] + out.included["messages"] == 60
    assert seen_brief


def test_room_left_opens_the_newest_summaries_into_their_sources(small: Brain) -> None:
    small.ingest("s", chat(80))
    small.compact("s")
    plain = small.assemble("s", AssembleOptions(budget=100_000, detail=False))
    summaries = [
        m.group(1) for t in output_texts(plain.messages, "openai") if (m := SUMMARY_XML.match(t))
    ]
    assert len(summaries) >= 2
    newest = summaries[-1]
    sources = small.expand(newest, session="s", max_tokens=100_000)["items"]
    raw = [i["content"] for i in sources if i["kind"] == "message"]
    budget = plain.tokens + 400
    opened = small.assemble("s", AssembleOptions(budget=budget))
    shown = output_texts(opened.messages, "openai")
    assert opened.expanded >= 1
    assert opened.tokens <= budget
    assert opened.tokens > plain.tokens  # the room went to detail
    assert opened.dropped == {"summaries": 0, "messages": 0}
    assert not any(t.startswith(f'<summary id="{newest}"') for t in shown)
    if raw:  # a leaf: its messages are shown in its place
        assert all(text in shown for text in raw)
    # The oldest summary, the beginning of the conversation, is still shown as is.
    assert any(t.startswith(f'<summary id="{summaries[0]}"') for t in shown)


def test_a_tail_of_stubs_whose_hints_cost_more_than_priced_still_leaves_room_to_name_history(
    small: Brain,
) -> None:
    # Stubs are priced without their call's hint (a path of ~100 characters here);
    # pairing adds it. A tail of many stubs then costs more than it was fitted at,
    # and the stand-in for the history before it was pushed out: dropped unseen.
    path = "src/" + "/".join(f"package_{k}" for k in range(10)) + "/module.py"
    messages = [MessageIn("user", "look through the tree")]
    for k in range(40):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "read", "arguments": f'{{"path": "{path}{k}"}}'},
        }
        messages.append(MessageIn("assistant", "", tool_calls=[call]))
        messages.append(MessageIn("tool", "line of output " * 24, tool_call_id=f"c{k}"))
    messages.append(MessageIn("user", "and now?"))
    small.ingest("s", messages)
    for budget in range(300, 2_000, 23):
        out = small.assemble("s", AssembleOptions(budget=budget, stubs=True, fresh_tail_count=30))
        if not out.over_budget:
            assert out.dropped == {"summaries": 0, "messages": 0}, (budget, out.tokens)
            assert out.tokens <= budget
