"""brain.lcm.render: the three steps together, on generated tool-heavy conversations and a store."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import Brain, BrainConfig, MessageIn
from brain.lcm.messages import load_range
from brain.lcm.render import (
    UNANSWERED,
    Block,
    PairingReport,
    Turn,
    pair_tools,
    render_anthropic,
    render_openai,
    summary_turn,
    turn_from_message,
)
from tests.brain.lcm.render.builders import (
    PNG,
)

# -- properties over tool-heavy conversations ----------------------------------------------

FATES = ("in_place", "in_place", "later", "anywhere", "missing", "duplicated", "elsewhere")
texts = st.sampled_from(["hi", "", " ", "look at 中文", "ok then", "line\nline"])


@st.composite
def tool_conversations(draw: st.DrawFn) -> tuple[list[Turn], frozenset[str]]:
    """Turns with calls whose results are in place, late, early, missing or doubled.

    Call ids are unique, so every result names exactly one call (or none: an
    orphan). Returns the turns and the ids answered outside them.
    """
    placed: list[tuple[float, int, Turn]] = []
    elsewhere: set[str] = set()
    counter = itertools.count()
    episodes = draw(st.integers(1, 7))
    end = episodes * 10 + 10

    def put(position: float, turn: Turn) -> None:
        placed.append((position, next(counter), turn))

    for i in range(episodes):
        at = i * 10
        kind = draw(st.sampled_from(["user", "summary", "assistant", "assistant"]))
        if kind == "user":
            put(at, Turn("user", (Block("text", draw(texts)),), f"u{i}", at))
            continue
        if kind == "summary":
            put(at, summary_turn(f"sum_{i}", f"<summary>{i}</summary>", at))
            continue
        calls = [
            Block("tool_call", call_id=f"c{i}_{j}", name="read", arguments='{"path": "p"}')
            for j in range(draw(st.integers(0, 3)))
        ]
        head = [Block("text", draw(texts))] if draw(st.booleans()) or not calls else []
        put(at, Turn("assistant", (*head, *calls), f"a{i}", at))
        grouped = draw(st.booleans())  # Anthropic style: results share one user turn
        in_place: list[Block] = []
        for call in calls:
            assert call.call_id is not None
            fate = draw(st.sampled_from(FATES))
            result = Block("tool_result", f"out {call.call_id}", call_id=call.call_id)
            if fate == "elsewhere":
                elsewhere.add(call.call_id)
            if fate in ("in_place", "duplicated"):
                in_place.append(result)
            if fate == "later":
                put(draw(st.floats(at + 2, end)), Turn("tool", (result,), f"r{call.call_id}", at))
            if fate in ("anywhere", "duplicated"):
                again = Block("tool_result", f"dup {call.call_id}", call_id=call.call_id)
                put(draw(st.floats(-1, end)), Turn("tool", (again,), f"d{call.call_id}", at))
        in_place = draw(st.permutations(in_place))
        if grouped and in_place:
            extra = [Block("text", "and")] if draw(st.booleans()) else []
            put(at + 1, Turn("user", (*in_place, *extra), f"g{i}", at))
        else:
            for k, result in enumerate(in_place):
                put(at + 1 + k / 10, Turn("tool", (result,), f"t{i}_{k}", at))
    for k in range(draw(st.integers(0, 2))):
        orphan = Block("tool_result", "orphan", call_id=f"orphan{k}")
        put(draw(st.floats(-1, end)), Turn("tool", (orphan,), f"o{k}", 0))
    placed.sort(key=lambda p: (p[0], p[1]))
    return [t for _, _, t in placed], frozenset(elsewhere)


def _calls(turns: list[Turn]) -> dict[str, Block]:
    return {b.call_id: b for t in turns for b in t.blocks if b.type == "tool_call" and b.call_id}


def _results(turns: list[Turn]) -> list[Block]:
    return [b for t in turns for b in t.blocks if b.type == "tool_result"]


def _check_paired(turns: list[Turn]) -> None:
    """Results directly follow their call's turn in call order; only a trailing call waits."""
    pending: list[str] = []  # calls of the last content turn not answered yet, in order
    skipped: list[str] = []  # calls passed over by a later call's result
    for turn in turns:
        kinds = {b.type for b in turn.blocks}
        assert turn.blocks, "no empty turns"
        if kinds == {"tool_result"}:
            for block in turn.blocks:
                assert block.call_id in pending, f"result {block.call_id} does not follow its call"
                at = pending.index(block.call_id)
                skipped += pending[:at]
                del pending[: at + 1]
            continue
        assert "tool_result" not in kinds, "results are never mixed into other turns"
        assert not pending, f"calls {pending} unanswered before later content"
        assert not skipped, f"calls {skipped} unanswered before later content"
        pending = [b.call_id or "" for b in turn.blocks if b.type == "tool_call"]


@settings(max_examples=300, deadline=None)
@given(tool_conversations())
def test_pairing_leaves_no_orphans_no_unanswered_calls_and_loses_no_result(
    case: tuple[list[Turn], frozenset[str]],
) -> None:
    turns, elsewhere = case
    out, report = pair_tools(turns, answered_elsewhere=elsewhere)
    _check_paired(out)

    calls_in, calls_out = _calls(turns), _calls(out)
    results_in, results_out = _results(turns), _results(out)
    answered_in = {b.call_id for b in results_in}
    kept = {b.call_id: b for b in results_out}
    assert len(kept) == len(results_out), "one result per call"
    for call_id in calls_in:
        if call_id in answered_in:
            # Moved, not discarded: a present call keeps one of its results.
            assert call_id in calls_out
            assert not kept[call_id].is_error
            assert kept[call_id].text in {b.text for b in results_in if b.call_id == call_id}
        elif call_id in elsewhere:
            assert call_id not in calls_out
    for kept_id, block in kept.items():
        assert kept_id in calls_out
        assert block.is_error == (kept_id not in answered_in)
    assert report.synthesized == sum(len(t.blocks) for t in out if t.synthetic)
    assert report.dropped_results == len(results_in) - sum(
        1 for b in results_out if b.text != UNANSWERED
    )
    assert report.dropped_calls == len(calls_in) - len(calls_out)
    # Pairing what is already paired changes nothing.
    again, report_again = pair_tools(out, answered_elsewhere=elsewhere)
    assert again == out
    assert report_again == PairingReport(0, 0, 0, 0)


def _trailing_ids(turns: list[Turn]) -> set[str]:
    """Ids of calls left waiting at the end of paired turns (in progress)."""
    answered = {b.call_id for b in _results(turns)}
    content = [t for t in turns if any(b.type != "tool_result" for b in t.blocks)]
    if not content:
        return set()
    last = content[-1]
    return {b.call_id or "" for b in last.blocks if b.type == "tool_call"} - answered


@settings(max_examples=300, deadline=None)
@given(tool_conversations())
def test_anthropic_output_alternates_starts_with_user_and_answers_every_tool_use(
    case: tuple[list[Turn], frozenset[str]],
) -> None:
    turns, elsewhere = case
    paired, _ = pair_tools(turns, answered_elsewhere=elsewhere)
    waiting = _trailing_ids(paired)
    _, messages = render_anthropic(paired)
    if not messages:
        return
    assert messages[0]["role"] == "user"
    for i, msg in enumerate(messages):
        assert msg["content"], "no empty content"
        for block in msg["content"]:
            if block["type"] == "text":
                assert block["text"].strip()
        if i:
            assert msg["role"] != messages[i - 1]["role"], "roles alternate"
        types = [b["type"] for b in msg["content"]]
        if msg["role"] == "user":
            assert "tool_use" not in types
            assert types == sorted(types, key=lambda t: t != "tool_result"), "results first"
            given_ids = {b["tool_use_id"] for b in msg["content"] if b["type"] == "tool_result"}
            if given_ids:
                previous = messages[i - 1]["content"]
                assert given_ids <= {b["id"] for b in previous if b["type"] == "tool_use"}
        else:
            assert "tool_result" not in types
            use_ids = {b["id"] for b in msg["content"] if b["type"] == "tool_use"}
            answered = set()
            if i + 1 < len(messages):
                answered = {
                    b["tool_use_id"]
                    for b in messages[i + 1]["content"]
                    if b["type"] == "tool_result"
                }
            assert use_ids - answered <= waiting


@settings(max_examples=300, deadline=None)
@given(tool_conversations())
def test_openai_output_answers_every_tool_call_with_the_following_tool_messages(
    case: tuple[list[Turn], frozenset[str]],
) -> None:
    turns, elsewhere = case
    paired, _ = pair_tools(turns, answered_elsewhere=elsewhere)
    waiting = _trailing_ids(paired)
    messages = render_openai(paired)
    for i, msg in enumerate(messages):
        assert msg["role"] in ("system", "user", "assistant", "tool")
        if msg["role"] == "tool":
            j = i - 1
            while messages[j]["role"] == "tool":
                j -= 1
            call_ids = [c["id"] for c in messages[j].get("tool_calls", ())]
            assert msg["tool_call_id"] in call_ids, "a tool message answers the calls before it"
        if msg.get("tool_calls"):
            ids = [c["id"] for c in msg["tool_calls"]]
            following = []
            for nxt in messages[i + 1 :]:
                if nxt["role"] != "tool":
                    break
                following.append(nxt["tool_call_id"])
            assert following == [c for c in ids if c not in waiting]
            assert set(ids) - set(following) <= waiting
        elif msg["role"] == "assistant":
            assert msg["content"] is not None


# -- end to end through a real store ----------------------------------------------------------


@pytest.fixture
def brain(db_path: Path) -> Iterator[Brain]:
    """An engine with a small payload threshold, so tool outputs go to payload files."""
    engine = Brain(db_path, BrainConfig(large_payload_tokens=64))
    try:
        yield engine
    finally:
        engine.close()


def _stored(brain: Brain, session: str, messages: list[MessageIn]) -> list[Turn]:
    brain.ingest(session, messages)
    row = brain.store.one("SELECT id FROM conversations WHERE session_id = ?", (session,))
    assert row is not None
    return [turn_from_message(m) for m in load_range(brain.store, int(row[0]), 1, 10**9)]


def test_an_openai_agent_conversation_renders_back_in_both_shapes(brain: Brain) -> None:
    big = "line of a large config file\n" * 40
    turns = _stored(
        brain,
        "openai",
        [
            MessageIn("system", "You are a coding agent.", client_id="s"),
            MessageIn("user", "What port does the app use?", client_id="u1"),
            MessageIn(
                "assistant",
                "",
                client_id="a1",
                tool_calls=[
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "conf/app.toml"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ss -ltn"}'},
                    },
                ],
            ),
            MessageIn("tool", big, client_id="t1", tool_call_id="call_1"),
            MessageIn("tool", "LISTEN 0 128 *:8080", client_id="t2", tool_call_id="call_2"),
            MessageIn("assistant", "It listens on 8080.", client_id="a2"),
        ],
    )
    paired, report = pair_tools(turns)
    assert report == PairingReport(0, 0, 0, 0)
    messages = render_openai(paired)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert messages[2]["content"] is None
    assert [c["function"]["name"] for c in messages[2]["tool_calls"]] == ["read_file", "bash"]
    stub = messages[3]["content"]
    assert stub.startswith("[Tool Output: file_")
    assert stub.endswith(f" | tool=read_file | {len(big.encode())} bytes] conf/app.toml")
    assert messages[4] == {
        "role": "tool",
        "tool_call_id": "call_2",
        "content": "LISTEN 0 128 *:8080",
    }

    system, anthropic = render_anthropic(paired)
    assert system == "You are a coding agent."
    assert [m["role"] for m in anthropic] == ["user", "assistant", "user", "assistant"]
    assert anthropic[1]["content"][0] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "read_file",
        "input": {"path": "conf/app.toml"},
    }
    assert [b["tool_use_id"] for b in anthropic[2]["content"]] == ["call_1", "call_2"]
    assert anthropic[2]["content"][0]["content"] == stub


def test_an_anthropic_agent_conversation_renders_back_in_both_shapes(brain: Brain) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    thinking = {"type": "thinking", "thinking": "List the dir.", "signature": "EqQBCgIYAhIM"}
    turns = _stored(
        brain,
        "anthropic",
        [
            MessageIn("user", [{"type": "text", "text": "What is in this dir?"}, image]),
            MessageIn(
                "assistant",
                [
                    thinking,
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "bash",
                        "input": {"command": "ls"},
                    },
                ],
            ),
            MessageIn(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "README.md\nsrc"}],
                    }
                ],
            ),
            MessageIn("assistant", [{"type": "text", "text": "A README and src."}]),
        ],
    )
    paired, report = pair_tools(turns)
    assert report == PairingReport(0, 0, 0, 0)
    system, messages = render_anthropic(paired)
    assert system is None
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "What is in this dir?"}, image]},
        {
            "role": "assistant",
            "content": [
                thinking,
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "README.md\nsrc"}],
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "A README and src."}]},
    ]
    openai = render_openai(paired)
    assert openai[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }
    assert openai[1]["content"] == "Let me look."  # the thinking is left out
    assert openai[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "README.md\nsrc"}


def test_a_stored_conversation_with_a_late_result_and_a_lost_one_is_repaired(brain: Brain) -> None:
    def call(call_id: str, command: str) -> dict[str, Any]:
        arguments = orjson.dumps({"command": command}).decode()
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "bash", "arguments": arguments},
        }

    turns = _stored(
        brain,
        "messy",
        [
            MessageIn("user", "build it"),
            MessageIn("assistant", "", tool_calls=[call("c1", "make"), call("c2", "make test")]),
            MessageIn("user", "are you there?"),
            MessageIn("tool", "built", tool_call_id="c1"),
            MessageIn("tool", "stale output", tool_call_id="c0"),
            MessageIn("assistant", "Built; tests never reported."),
        ],
    )
    paired, report = pair_tools(turns)
    assert report == PairingReport(moved=1, dropped_results=1, dropped_calls=0, synthesized=1)
    messages = render_openai(paired)
    assert [(m["role"], m.get("tool_call_id")) for m in messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
        ("assistant", None),
    ]
    assert messages[3]["content"] == UNANSWERED


def test_a_large_stored_image_is_shown_as_its_reference(brain: Brain) -> None:
    big = base64.b64encode(bytes(range(256)) * 4).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": big}}
    (turn,) = _stored(brain, "img", [MessageIn("user", [image])])
    (block,) = turn.blocks
    assert block.type == "text"
    assert block.text.startswith("[Large payload file_")
    assert " | image | " in block.text
    assert big not in block.text
