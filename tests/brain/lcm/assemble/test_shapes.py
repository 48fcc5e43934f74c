"""brain.lcm.assemble: one conversation gets the same context whichever shape it was
ingested in.

Claude answers several tool calls in one user turn (``tool_result`` blocks side by
side); OpenAI sends one ``tool`` message per result. The tail, the stubs and the
budget must not tell the two apart: a message counts in the fresh tail, costs,
and is stubbed result by result, as the OpenAI shape's messages are.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, BrainConfig, MessageIn
from brain.lcm.assemble import Assembled, AssembleOptions, Format
from brain.lcm.render import STUB_PREFIX
from brain.tokens import estimate_tokens, message_cost
from tests.brain.lcm.helpers import SMALL, assert_assembled, chat, new_session

GAP_TAG = "<history_gap "

FORMATS: tuple[Format, ...] = ("openai", "anthropic")

# Tool outputs stay inline up to 1,500 tokens (the 30 KB result was under
# the payload limit too); the largest size below goes to a payload file.
CONFIG = BrainConfig(
    large_payload_tokens=1_500,
    # Compaction keeps a tail of 12 messages: every tool round below is in it, so
    # what is folded is the same plain history in both shapes.
    compaction=dataclasses.replace(SMALL, fresh_tail_count=12),
)
SIZES = (2, 37, 600, 2_999, 7_000)
"""Tool output lengths in characters: tiny, small, over small stub tiers, large, a file."""


@pytest.fixture
def engine(db_path: Path) -> Iterator[Brain]:
    """An engine whose compaction folds plain history and keeps the tool rounds raw."""
    brain = Brain(db_path, CONFIG)
    try:
        yield brain
    finally:
        brain.close()


def output(n: int, size: int) -> str:
    """A tool output of ``size`` characters, told apart by ``n``."""
    line = f"out{n} " + "abcdefgh " * 8 + "\n"
    return (line * (size // len(line) + 1))[:size]


def openai_id(message_id: str, block: int) -> str:
    """The id of the OpenAI tool message for block ``block`` of the Anthropic message
    ``message_id``: as long as a stub's ``ID | content[N]``, so a stub costs the
    same in both shapes (a stub names its message; ids are the host's)."""
    wanted = len(f"{message_id} | content[{block}]")
    return f"{message_id}-{block}".ljust(wanted, "x")


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[MessageIn], list[MessageIn]]:
    """One conversation in both shapes: (Anthropic, OpenAI).

    Plain history, then one or two tool rounds: a request, an assistant turn making
    one to three calls (single or parallel), their results (one user turn of
    ``tool_result`` blocks, or one ``tool`` message each), sometimes an answer.
    """
    history = chat(draw(st.integers(0, 30)))
    anthropic, openai = list(history), list(history)
    for r in range(draw(st.integers(1, 2))):
        request = MessageIn("user", f"round {r}: read these files and tell me what changed")
        anthropic.append(request)
        openai.append(request)
        sizes = draw(st.lists(st.sampled_from(SIZES), min_size=1, max_size=3), label="outputs")
        ids = [f"toolu_{r}_{n}" for n in range(len(sizes))]
        args = [orjson.dumps({"path": f"src/f{r}_{n}.py"}).decode() for n in range(len(sizes))]
        anthropic.append(
            MessageIn(
                "assistant",
                [
                    {"type": "tool_use", "id": i, "name": "read", "input": orjson.loads(a)}
                    for i, a in zip(ids, args, strict=True)
                ],
            )
        )
        openai.append(
            MessageIn(
                "assistant",
                None,
                tool_calls=[
                    {"id": i, "type": "function", "function": {"name": "read", "arguments": a}}
                    for i, a in zip(ids, args, strict=True)
                ],
            )
        )
        texts = [output(10 * r + n, size) for n, size in enumerate(sizes)]
        results = f"r{r}"
        anthropic.append(
            MessageIn(
                "user",
                [
                    {"type": "tool_result", "tool_use_id": i, "content": t}
                    for i, t in zip(ids, texts, strict=True)
                ],
                client_id=results,
            )
        )
        openai += [
            MessageIn(
                "tool",
                t,
                tool_call_id=i,
                client_id=openai_id(results, n) if len(sizes) > 1 else results,
            )
            for n, (i, t) in enumerate(zip(ids, texts, strict=True))
        ]
        if draw(st.booleans()):
            answer = MessageIn("assistant", f"round {r}: the files are read")
            anthropic.append(answer)
            openai.append(answer)
    return anthropic, openai


# What must differ between the shapes: which message (and block) a stub names, the
# ids of payload files and summaries, and when the summarized messages were sent.
_STUB_ID = re.compile(re.escape(STUB_PREFIX) + r".+?(?: \| content\[\d+\])?(?= \| )")
_SUMMARY_ID = re.compile(r"sum_[0-9a-f]{16}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?")


def _plain(text: str) -> str:
    if text.startswith(GAP_TAG):
        # A stand-in for history left out: where it stands is the decision; its seqs,
        # counts and ids are each shape's own account (as ``included.messages`` is).
        return GAP_TAG
    text = _STUB_ID.sub(STUB_PREFIX + "ID", text)
    return _TIME.sub("TIME", _SUMMARY_ID.sub("sum_ID", text))


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content or "")


def _gap_cost(out: Assembled) -> int:
    """What the stand-ins in ``out`` cost (each is a one-text turn of its own)."""
    texts: list[str] = []
    for m in out.messages:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts += [b["text"] for b in blocks or () if b.get("type") == "text"]
    return sum(message_cost(estimate_tokens(t)) for t in texts if t.startswith(GAP_TAG))


def seen(out: Assembled, fmt: Format) -> list[tuple[str, ...]]:
    """What the model is shown, block by block (message boundaries left out: the
    shapes group results differently), with ``_plain``'s differences taken out."""
    atoms: list[tuple[str, ...]] = [("system", _plain(out.system))] if out.system else []
    for m in out.messages:
        role, content = m["role"], m.get("content")
        if fmt == "openai":
            if role == "tool":
                atoms.append(("result", m["tool_call_id"], _plain(_result_text(content))))
                continue
            if isinstance(content, str) and content:
                atoms.append((role, _plain(content)))
            elif isinstance(content, list):
                atoms += [(role, _plain(b["text"])) for b in content if b.get("type") == "text"]
            for c in m.get("tool_calls") or ():
                atoms.append(("call", c["id"], c["function"]["name"], c["function"]["arguments"]))
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for b in blocks:
            if b["type"] == "text":
                atoms.append((role, _plain(b["text"])))
            elif b["type"] == "tool_use":
                atoms.append(("call", b["id"], b["name"], orjson.dumps(b["input"]).decode()))
            elif b["type"] == "tool_result":
                atoms.append(("result", b["tool_use_id"], _plain(_result_text(b["content"]))))
    return atoms


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(shapes=conversations(), data=st.data())
def test_one_conversation_gets_the_same_context_in_either_shape(
    engine: Brain, shapes: tuple[list[MessageIn], list[MessageIn]], data: st.DataObject
) -> None:
    # Names of one length: a stand-in names its session, and costs by its length.
    base = new_session()
    sessions = f"{base}a", f"{base}o"
    compact = data.draw(st.booleans(), label="compact")
    for session, messages in zip(sessions, shapes, strict=True):
        engine.ingest(session, messages)
        if compact:
            engine.compact(session)
    options = AssembleOptions(
        budget=data.draw(st.integers(1, 6_000), label="budget"),
        format=data.draw(st.sampled_from(FORMATS), label="format"),
        stubs=data.draw(st.booleans(), label="stubs"),
        stub_tokens=data.draw(st.sampled_from([50, 200, 1_000]), label="stub_tokens"),
        fresh_tail_count=data.draw(st.none() | st.integers(0, 12), label="fresh_tail"),
    )
    anthropic, openai = (engine.assemble(s, options) for s in sessions)
    for session, out in zip(sessions, (anthropic, openai), strict=True):
        assert_assembled(engine, session, out, options.format)
    # The same history, summaries, raw results and stubs, in the same order ...
    assert seen(anthropic, options.format) == seen(openai, options.format)
    # ... at the same cost, with the same account of what was given up.
    assert anthropic.tokens - _gap_cost(anthropic) == openai.tokens - _gap_cost(openai)
    assert anthropic.stubbed == openai.stubbed
    assert anthropic.over_budget == openai.over_budget
    assert anthropic.included["summaries"] == openai.included["summaries"]
    assert anthropic.dropped["summaries"] == openai.dropped["summaries"]
    assert anthropic.fresh_tail["tokens"] == openai.fresh_tail["tokens"]
