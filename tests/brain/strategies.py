"""Hypothesis strategies for messages in the shapes clients send (OpenAI and Anthropic)."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from brain import MessageIn

# Values orjson round-trips exactly: 64-bit integers, finite floats, str keys.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

# Mostly short text, sometimes long enough to cross a small payload threshold.
texts = st.text(max_size=30) | st.text(min_size=100, max_size=400)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)
base64_data = st.binary(max_size=600).map(lambda b: base64.b64encode(b).decode())

text_block = st.builds(lambda t: {"type": "text", "text": t}, texts)
image_block = st.builds(
    lambda data, media: {
        "type": "image",
        "source": {"type": "base64", "media_type": media, "data": data},
    },
    base64_data,
    st.sampled_from(["image/png", "image/jpeg"]),
)
openai_image_block = st.builds(
    lambda data: {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
    base64_data,
)
thinking_block = st.builds(
    lambda t, sig: {"type": "thinking", "thinking": t, "signature": sig},
    texts,
    st.text(max_size=20),
)
redacted_thinking_block = st.builds(
    lambda data: {"type": "redacted_thinking", "data": data}, base64_data
)
tool_use_block = st.builds(
    lambda call_id, name, args: {"type": "tool_use", "id": call_id, "name": name, "input": args},
    ids,
    names,
    st.dictionaries(st.text(max_size=8), json_values, max_size=4),
)
tool_result_block = st.builds(
    lambda call_id, body, extra: (
        {"type": "tool_result", "tool_use_id": call_id, "content": body} | extra
    ),
    ids,
    texts | st.lists(text_block | image_block, max_size=4),
    st.just({}) | st.builds(lambda e: {"is_error": e}, st.booleans()),
)
# A text with web-search citations (Anthropic), and a block of a type brain does
# not know (a newer SDK's), with whatever members it carries.
cited_text_block = st.builds(
    lambda t, url, title: {
        "type": "text",
        "text": t,
        "citations": [
            {"type": "web_search_result_location", "url": url, "title": title, "cited_text": t}
        ],
    },
    texts,
    st.text(max_size=20),
    st.text(max_size=20),
)
future_block = st.builds(
    lambda kind, members: members | {"type": kind},
    st.sampled_from(["future_thing", "web_search_tool_result", "search_result"]),
    st.dictionaries(names, json_values, max_size=3),
)
blocks = st.lists(
    text_block
    | image_block
    | openai_image_block
    | thinking_block
    | redacted_thinking_block
    | tool_use_block
    | tool_result_block
    | cited_text_block
    | future_block,
    max_size=5,
)

openai_tool_call = (
    st.builds(
        lambda call_id, name, args: {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": args},
        },
        ids,
        names,
        texts,
    )
    | st.builds(  # ChatCompletionMessageCustomToolCall: free-text input
        lambda call_id, name, text: {
            "id": call_id,
            "type": "custom",
            "custom": {"name": name, "input": text},
        },
        ids,
        names,
        texts,
    )
    | st.builds(  # a call type no SDK has yet: kept and paired by its id
        lambda call_id, name, args: {
            "id": call_id,
            "type": "mcp",
            "mcp": {"name": name, "args": args},
        },
        ids,
        names,
        json_values,
    )
)
zones = st.sampled_from(
    [None, UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
)
timestamps = st.none() | st.builds(
    lambda moment, zone: moment.replace(tzinfo=zone).isoformat(),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)),
    zones,
)


# Message-level fields the SDKs add (OpenAI response dumps, reasoning servers, Anthropic
# response messages), as they come: kept and given back as sent.
annotation = st.builds(
    lambda url, title, start: {
        "type": "url_citation",
        "url_citation": {"url": url, "title": title, "start_index": start, "end_index": start + 5},
    },
    st.text(max_size=20),
    st.text(max_size=20),
    st.integers(0, 100),
)
message_extras = st.fixed_dictionaries(
    {},
    optional={
        "refusal": texts,
        "annotations": st.lists(annotation, max_size=2),
        "audio": st.builds(
            lambda audio_id, transcript: {"id": audio_id, "transcript": transcript},
            ids,
            texts,
        ),
        "reasoning_content": texts,
        "type": st.just("message"),
        "usage": st.fixed_dictionaries(
            {"input_tokens": st.integers(0, 999), "output_tokens": st.integers(0, 999)}
        ),
        "stop_reason": st.sampled_from(["end_turn", "tool_use"]),
    },
)
# Members no SDK has yet (any message may carry them): the host's data, kept as sent.
# Not the members brain reads, nor its reserved ``__brain_`` names; never null
# (a null member says nothing and is not kept).
_READ: frozenset[str] = frozenset(
    {"role", "content", "id", "name", "created_at", "tool_calls", "tool_call_id", "timestamp"}
)
future_members = st.dictionaries(
    names.filter(lambda k: k not in _READ and not k.startswith("__brain_")),
    json_values.filter(lambda v: v is not None),
    max_size=2,
)


@st.composite
def messages(draw: st.DrawFn, client_id: str | None = None) -> MessageIn:
    """One message of any role (OpenAI's ``developer`` and legacy ``function`` too),
    in OpenAI or Anthropic shape, with or without SDK extras and members no SDK
    has yet.

    An assistant message sometimes has no content (null or missing) beside its
    tool calls, refusal or audio, as the OpenAI API returns it.
    """
    role = draw(st.sampled_from(["user", "assistant", "system", "tool", "developer", "function"]))
    name = draw(st.none() | names)
    created_at = draw(timestamps)
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    content: str | list[dict[str, Any]] | None
    extra: dict[str, Any] = draw(future_members)
    if role == "assistant":
        extra |= draw(message_extras)
    absent = False
    if role == "function":  # OpenAI's legacy function result: the function's name, a string
        content = draw(texts)
        name = draw(names)
    elif role == "tool":  # OpenAI tool result: string or text blocks, plus the call id
        content = draw(texts | st.lists(text_block, max_size=3))
        tool_call_id = draw(ids)
    else:
        content = draw(texts | blocks)
        if role == "assistant":
            tool_calls = draw(st.none() | st.lists(openai_tool_call, min_size=1, max_size=3))
            if (tool_calls or "refusal" in extra or "audio" in extra) and draw(st.booleans()):
                content = None
                absent = draw(st.booleans())
    return MessageIn(
        role=role,
        content=content,
        client_id=client_id,
        name=name,
        created_at=created_at,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        extra=extra or None,
        content_absent=absent,
    )


@st.composite
def conversations(draw: st.DrawFn, with_ids: bool, max_size: int = 6) -> list[MessageIn]:
    """A list of messages; with ``with_ids`` each has a distinct client id."""
    size = draw(st.integers(min_value=1, max_value=max_size))
    out = []
    for i in range(size):
        client_id = f"m{i}" if with_ids or draw(st.booleans()) else None
        out.append(draw(messages(client_id=client_id)))
    return out


def as_sent(msg: MessageIn) -> dict[str, Any]:
    """What ``Brain.get_message`` should give back for ``msg`` (without its id)."""
    out: dict[str, Any] = {"role": msg.role}
    if not msg.content_absent:
        out["content"] = msg.content
    out.update(msg.extra or {})
    if msg.name is not None:
        out["name"] = msg.name
    if msg.tool_calls:
        out["tool_calls"] = msg.tool_calls
    if msg.tool_call_id is not None:
        out["tool_call_id"] = msg.tool_call_id
    return out


# -- tool-heavy conversations (lossless context tests) -----------------------------------

WORDS = (
    "the build failed at step three because the cache was stale",
    "we decided to use SQLite with WAL for the store",
    "error: connection refused on port 8080",
    "see src/brain/compaction.py line 214",
    "run pytest -x tests/brain",
    "Alice approved the migration plan on 2026-03-01",
    "the answer is 42",
    "ok",
    "next we should fix the flaky test",
    "https://example.com/docs/api",
    "summary of results so far",
    "retry with backoff and a circuit breaker",
    "TODO: check the budget math",
)
PAYLOAD_LINE = "line {n}: lorem ipsum dolor sit amet, consectetur adipiscing elit"

sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(". ".join)


@st.composite
def _tool_output(draw: st.DrawFn, large_chars: int) -> str:
    """A tool's output: a sentence or two, now and then a payload over ``large_chars``."""
    if draw(st.integers(0, 5)) == 0:
        lines = draw(st.integers(large_chars // 50 + 2, large_chars // 30 + 6))
        return "\n".join(PAYLOAD_LINE.format(n=n) for n in range(lines))
    return draw(sentences)


@st.composite
def tool_conversations(
    draw: st.DrawFn, max_turns: int = 24, large_chars: int = 400
) -> list[MessageIn]:
    """A conversation of user and assistant turns, many of them tool rounds.

    A tool round is an assistant message making 1-3 calls (OpenAI ``tool_calls``
    or Anthropic ``tool_use``) and their results (``tool`` messages, or user
    messages with ``tool_result`` blocks), delivered in order, reversed, late
    (after the next turn), early (before the call) or with one missing. Tool
    outputs are sometimes larger than ``large_chars`` (payload files). Call ids
    are unique, or in some conversations numbered afresh in every response
    (``call_0``, ``call_1``, as some model servers do); most messages carry a
    client id ``m<i>``, some none.
    """
    out: list[MessageIn] = []
    late: list[MessageIn] = []
    calls = 0
    renumber = draw(st.integers(0, 3)) == 0  # ids start again at 0 in every response
    for _turn in range(draw(st.integers(1, max_turns))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "tools"]))
        if kind != "tools":
            out.append(MessageIn(kind, draw(sentences)))
            out += late
            late = []
            continue
        anthropic = draw(st.booleans())
        n = draw(st.integers(1, 3))
        first = 0 if renumber else calls
        ids = [f"{'toolu' if anthropic else 'call'}_{first + i}" for i in range(n)]
        calls += n
        intro = draw(st.none() | sentences)
        paths = [f"src/file_{calls}_{i}.py" for i in range(n)]
        outputs = [draw(_tool_output(large_chars)) for _ in range(n)]
        if anthropic:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": intro}] if intro else []
            blocks += [
                {"type": "tool_use", "id": c, "name": "read", "input": {"path": p}}
                for c, p in zip(ids, paths, strict=True)
            ]
            call = MessageIn("assistant", blocks)
            together = draw(st.booleans())
            # Now and then the user types something along with the results.
            remark = (
                [{"type": "text", "text": draw(sentences)}] if draw(st.integers(0, 4)) == 0 else []
            )
            results = (
                [
                    MessageIn(
                        "user",
                        [
                            {"type": "tool_result", "tool_use_id": c, "content": o}
                            for c, o in zip(ids, outputs, strict=True)
                        ]
                        + remark,
                    )
                ]
                if together
                else [
                    MessageIn("user", [{"type": "tool_result", "tool_use_id": c, "content": o}])
                    for c, o in zip(ids, outputs, strict=True)
                ]
            )
        else:
            tool_calls = [
                {
                    "id": c,
                    "type": "function",
                    "function": {"name": "read", "arguments": f'{{"path": "{p}"}}'},
                }
                for c, p in zip(ids, paths, strict=True)
            ]
            call = MessageIn("assistant", intro or "", tool_calls=tool_calls)
            results = [
                MessageIn("tool", o, name="read", tool_call_id=c)
                for c, o in zip(ids, outputs, strict=True)
            ]
        order = draw(
            st.sampled_from(["in_order", "in_order", "reversed", "late", "early", "missing"])
        )
        if order == "reversed":
            results.reverse()
        elif order == "missing":
            results.pop(draw(st.integers(0, len(results) - 1)))
        if order == "early":
            out += [*results, call]
        else:
            out.append(call)
            if order == "late":
                late += results
            else:
                out += results
    out += late
    return [
        replace(m, client_id=f"m{i}") if draw(st.integers(0, 4)) else m for i, m in enumerate(out)
    ]
