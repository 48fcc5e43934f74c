"""brain.lcm.assemble: the context under a budget; fresh tail, summaries, tool pairing, stubs,
cache."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, MessageIn, NotFound
from brain.lcm.assemble import Assembled, AssembleOptions, Format
from brain.lcm.render import STUB_PREFIX, UNANSWERED
from tests.brain.lcm.helpers import (
    SMALL_BRAIN,
    SUMMARY_XML,
    assert_assembled,
    assert_invariants,
    chat,
    new_session,
    output_texts,
)
from tests.brain.strategies import tool_conversations

FORMATS: tuple[Format, ...] = ("openai", "anthropic")


@pytest.fixture
def cold(small: Brain) -> Iterator[Brain]:
    """A second engine on the same database, with its own (cold) caches."""
    engine = Brain(small.path, SMALL_BRAIN)
    try:
        yield engine
    finally:
        engine.close()


def assemble(
    brain: Brain, session: str, budget: int, fmt: Format = "openai", **kw: Any
) -> Assembled:
    """``brain.lcm.assemble`` with every output check of ``lcm.assert_assembled``."""
    result = brain.assemble(session, AssembleOptions(budget=budget, format=fmt, **kw))
    assert_assembled(brain, session, result, fmt)
    return result


def summary_id(text: str) -> str:
    found = SUMMARY_XML.match(text)
    assert found, text[:80]
    return found.group(1)


def call(call_id: str, path: str, *, anthropic: bool = False, cid: str | None = None) -> MessageIn:
    """An assistant message making one ``read`` call."""
    if anthropic:
        block = {"type": "tool_use", "id": call_id, "name": "read", "input": {"path": path}}
        return MessageIn("assistant", [block], client_id=cid)
    openai = {
        "id": call_id,
        "type": "function",
        "function": {"name": "read", "arguments": f'{{"path": "{path}"}}'},
    }
    return MessageIn("assistant", "", client_id=cid, tool_calls=[openai])


def result(
    call_id: str, text: str, *, anthropic: bool = False, cid: str | None = None
) -> MessageIn:
    """The answer to ``call``."""
    if anthropic:
        block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        return MessageIn("user", [block], client_id=cid)
    return MessageIn("tool", text, client_id=cid, name="read", tool_call_id=call_id)


# -- properties -------------------------------------------------------------------------------


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(conversation_=tool_conversations(), data=st.data())
def test_assembled_contexts_keep_budget_tail_summaries_and_tool_pairs(
    small: Brain, cold: Brain, conversation_: list[MessageIn], data: st.DataObject
) -> None:
    session = new_session()
    done = 0
    while done < len(conversation_):
        size = data.draw(st.integers(1, 15), label="batch")
        small.ingest(session, conversation_[done : done + size])
        done += size
        op = data.draw(st.sampled_from(["none", "incremental", "sweep", "target"]), label="op")
        if op == "incremental":
            small.compact_incremental(session)
        elif op == "sweep":
            small.compact(session)
        elif op == "target":
            small.compact(session, target_tokens=data.draw(st.integers(0, 1_500), label="target"))
        for _ in range(data.draw(st.integers(1, 2), label="assembles")):
            assemble(
                small,
                session,
                data.draw(st.integers(1, 2_500), label="budget"),
                data.draw(st.sampled_from(FORMATS), label="format"),
                stubs=data.draw(st.booleans(), label="stubs"),
                stub_tokens=data.draw(st.integers(1, 200), label="stub_tokens"),
                fresh_tail_count=data.draw(st.none() | st.integers(1, 8), label="fresh_tail"),
            )
    assert_invariants(small, session)
    # The cached view, revalidated across appends and compactions, gives what a
    # cold engine gives.
    for fmt in FORMATS:
        options = AssembleOptions(budget=data.draw(st.integers(1, 2_500)), format=fmt)
        warm, fresh = small.assemble(session, options), cold.assemble(session, options)
        assert (warm.messages, warm.system, warm.tokens) == (
            fresh.messages,
            fresh.system,
            fresh.tokens,
        )


# -- the fresh tail ---------------------------------------------------------------------------


def test_below_the_newest_user_turn_only_the_tail_comes_and_is_over_budget(small: Brain) -> None:
    small.ingest("s", chat(10))
    small.compact("s")
    out = assemble(small, "s", 1)
    assert out.over_budget
    assert out.tokens == out.fresh_tail["tokens"] > 1
    assert out.included == {"summaries": 0, "messages": out.fresh_tail["count"]}
    assert len(out.messages) == out.fresh_tail["count"]


@pytest.mark.parametrize("anthropic", [True, False])
def test_the_tail_reaches_back_to_the_users_request_through_a_long_tool_loop(
    small: Brain, anthropic: bool
) -> None:
    # Anthropic tool results are user messages; they must not count as "the
    # newest user message", or a long tool loop pushes the request out of the tail.
    request = MessageIn(
        "user", "please read every file under src/ and fix the bug", client_id="req"
    )
    loop: list[MessageIn] = []
    for i in range(20):
        loop += [
            call(f"t{i}", f"src/f{i}.py", anthropic=anthropic),
            result(f"t{i}", "x" * 200, anthropic=anthropic),
        ]
    small.ingest("s", [*chat(20), request, *loop])
    small.compact("s")
    assert_invariants(small, "s")
    for fmt in FORMATS:
        out = assemble(small, "s", 100, fmt)
        assert out.fresh_tail["first_seq"] == 21
        assert request.content in output_texts(out.messages, fmt)
    assert small.describe("req", session="s")["covered_by"] is None


# -- budget -----------------------------------------------------------------------------------


def tool_heavy(brain: Brain, session: str, *, anthropic: bool = False) -> list[MessageIn]:
    """A coding session: a request, then 20 reads of ~600-token files, then a short answer."""
    request = MessageIn("user", "read every file under src/ and fix the bug", client_id="req")
    loop: list[MessageIn] = []
    for i in range(20):
        loop += [
            call(f"t{i}", f"src/f{i}.py", anthropic=anthropic),
            result(f"t{i}", f"def f{i}(x):\n    return x + {i}\n" * 100, anthropic=anthropic),
        ]
    done = MessageIn("assistant", "fixed: f3 returned the wrong value", client_id="done")
    messages = [*chat(6), request, *loop, done]
    brain.ingest(session, messages)
    return messages


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_tool_heavy_tail_is_stubbed_to_fit_the_budget_with_its_pairs_and_request(
    db_path: Path, fmt: Format
) -> None:
    with closing(Brain(db_path)) as brain:
        tool_heavy(brain, "s", anthropic=fmt == "anthropic")
        whole = assemble(brain, "s", 100_000, fmt)
        assert whole.tokens > 12_000
        assert whole.stubbed == 0
        out = assemble(brain, "s", 4_000, fmt)
        assert not out.over_budget
        assert out.tokens <= 4_000
        texts = output_texts(out.messages, fmt)
        assert "read every file under src/ and fix the bug" in texts
        assert "fixed: f3 returned the wrong value" in texts
        # Large results inside the tail became stubs naming the message describe recovers.
        assert out.stubbed >= 10
        stub = re.search(
            r"\[Tool Output: (\S+) \| tool=read \| \d+ bytes\] src/f0\.py", str(out.messages)
        )
        assert stub, str(out.messages)[:400]
        assert "return x + 0" in str(brain.describe(stub.group(1), session="s")["message"])
        # Every call is still answered right after it (assert_assembled checked the
        # pairs); the newest results stay whole while they fit.
        assert "return x + 19" in str(out.messages)


def test_a_tail_too_big_even_as_stubs_is_cut_to_the_newest_user_turn(db_path: Path) -> None:
    with closing(Brain(db_path)) as brain:
        brain.ingest("s", chat(40, words=200))  # ~300 tokens each: 12,000 in the tail
        brain.ingest("s", [MessageIn("user", "and now?", client_id="q")])
        out = assemble(brain, "s", 1_000)
        assert not out.over_budget
        assert out.tokens <= 1_000
        assert output_texts(out.messages, "openai")[-1] == "and now?"
        assert out.fresh_tail["count"] < 32
        # What the cut tail leaves out is named by one stand-in, not dropped unseen.
        assert out.dropped == {"summaries": 0, "messages": 0}
        assert out.gaps == {"count": 1, "messages": 41 - out.fresh_tail["count"], "summaries": 0}


def test_fresh_tail_zero_keeps_only_the_newest_user_turn_and_what_follows(db_path: Path) -> None:
    with closing(Brain(db_path)) as brain:
        messages = tool_heavy(brain, "s")
        out = assemble(brain, "s", 100_000, fresh_tail_count=0)
        assert out.fresh_tail["first_seq"] == 7  # the request
        assert out.fresh_tail["count"] == len(messages) - 6
        # Room left over goes to older history as usual.
        assert out.included["messages"] == len(messages)
        brain.ingest("s", [MessageIn("user", "thanks, now run the tests", client_id="q")])
        only = assemble(brain, "s", 100_000, fresh_tail_count=0)
        assert only.fresh_tail == {"count": 1, "tokens": only.fresh_tail["tokens"], "first_seq": 49}


def test_a_newest_user_message_larger_than_the_budget_is_over_budget_alone(
    db_path: Path,
) -> None:
    with closing(Brain(db_path)) as brain:
        brain.ingest("s", chat(40))
        huge = "please consider " + "word " * 3_000
        brain.ingest("s", [MessageIn("user", huge, client_id="huge")])
        out = assemble(brain, "s", 1_000)
        assert out.over_budget
        assert out.fresh_tail["count"] == 1
        assert [m["content"] for m in out.messages] == [huge]


def test_answers_made_up_for_unanswered_calls_stay_within_the_budget(small: Brain) -> None:
    # Each call is followed by more talk, so pairing answers it with an error
    # result; those answers cost tokens the selection did not count (the budget
    # was exceeded: 143 tokens for a budget of 102).
    messages: list[MessageIn] = []
    for i in range(12):
        messages += [call(f"u{i}", f"src/f{i}.py"), MessageIn("assistant", f"moving on {i}")]
    messages.append(MessageIn("user", "and now?"))
    small.ingest("s", messages)
    for budget in range(20, 400, 7):
        for fmt in FORMATS:
            out = assemble(small, "s", budget, fmt)
            assert out.tokens <= budget or out.over_budget
    out = assemble(small, "s", 10_000)
    assert out.pairing["synthesized"] == 12
    assert sum(1 for m in out.messages if m.get("content") == UNANSWERED) == 12


def test_summaries_go_in_before_raw_history(small: Brain) -> None:
    small.ingest("s", chat(40))
    small.compact("s")
    small.ingest("s", chat(6, start=40))
    full = assemble(small, "s", 100_000, detail=False)
    summaries = full.included["summaries"]
    assert summaries >= 1
    assert full.included["messages"] > full.fresh_tail["count"]
    # Room for the tail and the summaries only: raw history is what goes.
    tight = assemble(small, "s", full.tokens - 1, detail=False)
    assert tight.included["summaries"] == summaries
    assert tight.gaps["messages"] >= 1  # named by a stand-in
    assert tight.dropped == {"summaries": 0, "messages": 0}


def test_when_pairing_overflows_the_budget_the_newest_summary_goes_not_the_oldest(
    small: Brain,
) -> None:
    # The drop loop after pairing gave up summaries oldest first: the summary of
    # the conversation's beginning went before newer, shallower ones.
    small.ingest("s", chat(60))
    small.compact("s")
    unanswered = [call("u0", "a.py"), MessageIn("assistant", "moving on")]
    unanswered += [call("u1", "b.py"), MessageIn("assistant", "moving on again")]
    small.ingest("s", [*chat(10, start=60), MessageIn("user", "read them"), *unanswered])
    small.compact("s")
    full = assemble(small, "s", 100_000, detail=False)
    assert full.pairing["synthesized"] == 2  # answers the selection does not count
    assert full.included["messages"] == full.fresh_tail["count"]  # nothing raw before the tail
    shown = [summary_id(t) for t in output_texts(full.messages, "openai") if "<summary" in t[:9]]
    assert len(shown) >= 2
    # Every item fits by its own cost; the made-up answers push it over.
    budget = full.fresh_tail["tokens"] + int(
        small.store.scalar(
            "SELECT sum(token_count) FROM context_items WHERE summary_id IS NOT NULL"
        )
    )
    assert full.tokens > budget
    tight = assemble(small, "s", budget, detail=False)
    assert tight.tokens <= budget
    assert tight.gaps["summaries"] >= 1  # named by a stand-in
    kept = [summary_id(t) for t in output_texts(tight.messages, "openai") if "<summary" in t[:9]]
    assert kept[0] == shown[0]
    assert shown[-1] not in kept


# -- summaries --------------------------------------------------------------------------------


def test_summaries_are_xml_user_messages_in_context_order(small: Brain) -> None:
    small.ingest("s", chat(60))
    small.compact("s")
    ids = [
        str(r[0])
        for r in small.store.execute(
            "SELECT s.summary_id FROM context_items c JOIN summaries s ON s.id = c.summary_id "
            "ORDER BY c.pos"
        )
    ]
    assert len(ids) >= 2
    openai = assemble(small, "s", 100_000, "openai", detail=False)
    shown = [m for m in openai.messages if SUMMARY_XML.match(str(m["content"]))]
    assert [summary_id(m["content"]) for m in shown] == ids
    assert all(m["role"] == "user" for m in shown)
    assert openai.messages[: len(ids)] == shown
    first = shown[0]["content"]
    assert re.fullmatch(r'<summary id="sum_[0-9a-f]{16}" .*</summary>', first, re.DOTALL)
    assert "<content>\n" in first

    anthropic = assemble(small, "s", 100_000, "anthropic", detail=False)
    head = anthropic.messages[0]
    assert head["role"] == "user"  # consecutive user turns merge into one user message
    blocks = head["content"][: len(ids)]
    assert [summary_id(b["text"]) for b in blocks] == ids


# -- tool pairing -----------------------------------------------------------------------------


@pytest.mark.parametrize("anthropic", [True, False])
def test_an_out_of_order_result_is_moved_next_to_its_call(small: Brain, anthropic: bool) -> None:
    small.ingest(
        "s",
        [
            MessageIn("user", "read a"),
            call("c1", "a.py", anthropic=anthropic),
            MessageIn("user", "still there?"),
            result("c1", "contents of a", anthropic=anthropic),
            MessageIn("assistant", "done"),
        ],
    )
    for fmt in FORMATS:
        out = assemble(small, "s", 10_000, fmt)
        assert out.pairing["moved"] == 1
        assert out.pairing["dropped_results"] == 0
        flat = str(out.messages)
        assert flat.index("contents of a") < flat.index("still there?")


def test_a_call_still_running_is_left_unanswered(small: Brain) -> None:
    small.ingest("s", [MessageIn("user", "read a"), call("c1", "a.py")])
    out = assemble(small, "s", 10_000)
    assert out.pairing["synthesized"] == 0
    assert out.messages[-1]["tool_calls"][0]["id"] == "c1"


def test_a_result_whose_call_was_folded_is_dropped_not_orphaned(small: Brain) -> None:
    small.ingest("s", [MessageIn("user", "go"), call("c1", "a.py"), *chat(30, start=1)])
    small.compact("s")
    small.ingest("s", [result("c1", "very late")])
    out = assemble(small, "s", 10_000, detail=False)
    assert out.pairing["dropped_results"] == 1
    assert "very late" not in str(out.messages)


def test_a_reused_call_id_whose_earlier_result_was_folded_is_answered_not_dropped(
    small: Brain,
) -> None:
    # A server numbering calls afresh in every response (``call_0``): the folded result
    # answers the earlier call (``brain.lcm.pairing``'s rule), so the new call has no
    # result anywhere and gets the made-up answer, not dropped as answered elsewhere.
    small.ingest("s", [MessageIn("user", "go"), call("c1", "a.py"), result("c1", "old")])
    small.ingest("s", chat(30, start=1))
    small.compact("s")
    small.ingest("s", [call("c1", "b.py"), MessageIn("user", "and?")])
    out = assemble(small, "s", 10_000)
    assert out.pairing["dropped_calls"] == 0
    assert out.pairing["synthesized"] == 1
    assert "b.py" in str(out.messages)
    assert sum(1 for m in out.messages if m.get("content") == UNANSWERED) == 1


# -- stubs ------------------------------------------------------------------------------------


def test_stubs_stand_in_for_large_tool_outputs_and_describe_recovers_them(small: Brain) -> None:
    in_file = "\n".join(f"row {i}: " + "data " * 8 for i in range(60))  # over 100 tokens
    inline = "output " * 50  # under the payload threshold, over stub_tokens
    small.ingest(
        "s",
        [
            MessageIn("user", "look"),
            call("c1", "src/big.py"),
            result("c1", in_file, cid="r1"),
            call("c2", "src/small.py"),
            result("c2", inline, cid="r2"),
            *chat(6, start=1),
        ],
    )
    out = assemble(small, "s", 10_000, stubs=True, stub_tokens=20)
    assert out.stubbed == 1
    stubs = [m["content"] for m in out.messages if str(m.get("content")).startswith(STUB_PREFIX)]
    assert len(stubs) == 2
    by_file, by_message = sorted(stubs, key=lambda t: "file_" not in t)
    found = re.match(
        r"\[Tool Output: (file_[0-9a-f]{16}) \| tool=read \| (\d+) bytes\] src/big\.py", by_file
    )
    assert found, by_file
    assert int(found.group(2)) == len(in_file)
    described = small.describe(found.group(1), session="s")
    assert described["content"] == in_file
    assert described["message_id"] == "r1"
    assert by_message.startswith(f"{STUB_PREFIX}r2 | tool=read | {len(inline)} bytes]")
    assert by_message.endswith("src/small.py")
    assert small.describe("r2", session="s")["message"]["content"] == inline
    # Without stubs the inline output is shown whole; the file one stays a stub.
    plain = assemble(small, "s", 10_000)
    assert inline in str(plain.messages)
    assert in_file not in str(plain.messages)


# -- the cache --------------------------------------------------------------------------------


def test_another_engines_ingest_and_compaction_are_seen_on_the_next_assemble(
    small: Brain, cold: Brain
) -> None:
    small.ingest("s", chat(40))
    before = assemble(small, "s", 100_000, detail=False)
    assert before.included["summaries"] == 0
    cold.compact("s")
    after = assemble(small, "s", 100_000, detail=False)
    assert after.included["summaries"] >= 1
    assert after.tokens < before.tokens
    cold.ingest("s", [MessageIn("user", "one more thing")])
    assert assemble(small, "s", 100_000, detail=False).messages[-1]["content"] == "one more thing"


def test_assembling_a_session_with_no_messages_yet_is_an_empty_context(small: Brain) -> None:
    before = small.info().conversations
    for fmt in FORMATS:
        result = small.assemble("nobody", AssembleOptions(budget=100, format=fmt))
        assert result.messages == []
        assert result.system is None
        assert result.tokens == 0
        assert not result.over_budget
        assert result.included == {"summaries": 0, "messages": 0}
        assert result.fresh_tail["count"] == 0
    assert small.info().conversations == before  # asking created nothing
    with pytest.raises(NotFound):
        small.compact("nobody")  # still no such session


SYSTEM = "You are a careful assistant. Answer in English. Never delete files."


def test_a_system_message_is_pinned_first_and_counted_while_older_history_gives_way(
    small: Brain,
) -> None:
    small.ingest("s", [MessageIn("system", SYSTEM), *chat(60)])
    cost = small.assemble("s", AssembleOptions(budget=1_000_000)).tokens
    for budget in (300, 600, cost - 1):
        result = assemble(small, "s", budget)
        assert result.messages[0] == {"role": "system", "content": SYSTEM}
        assert [m["role"] for m in result.messages].count("system") == 1
        # Older history gave way (a stand-in names it), not the system message.
        assert result.gaps["messages"] > 0
        assert result.tokens <= budget
        anthropic = assemble(small, "s", budget, "anthropic")
        assert anthropic.system == SYSTEM
        assert anthropic.tokens <= budget


def test_compaction_never_folds_a_system_message(small: Brain) -> None:
    small.ingest("s", [*chat(20), MessageIn("system", SYSTEM), *chat(40, start=20)])
    small.compact("s")
    result = assemble(small, "s", 1_000)
    assert result.included["summaries"] >= 1
    assert result.messages[0] == {"role": "system", "content": SYSTEM}
    summaries = " ".join(t for t in output_texts(result.messages, "openai") if "<summary" in t)
    assert SYSTEM not in summaries
    assert assemble(small, "s", 1_000, "anthropic").system == SYSTEM


def test_speaker_names_are_kept_as_openai_names_and_anthropic_prefixes(small: Brain) -> None:
    small.ingest(
        "s",
        [
            MessageIn("system", "Moderate the meeting.", name="chair"),
            MessageIn("user", "I propose we ship on Friday.", name="Alice"),
            MessageIn("user", "Friday is too early for me.", name="Bob"),
            MessageIn("assistant", "Noted: Alice wants Friday, Bob objects.", name="scribe"),
            MessageIn("user", "No name on this one."),
        ],
    )
    openai = assemble(small, "s", 10_000).messages
    assert [m.get("name") for m in openai] == ["chair", "Alice", "Bob", "scribe", None]
    anthropic = assemble(small, "s", 10_000, "anthropic")
    assert anthropic.system == "chair: Moderate the meeting."
    texts = output_texts(anthropic.messages, "anthropic")
    assert texts == [
        "Alice: I propose we ship on Friday.",
        "Bob: Friday is too early for me.",
        "scribe: Noted: Alice wants Friday, Bob objects.",
        "No name on this one.",
    ]
