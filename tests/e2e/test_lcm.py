"""Lossless context memory through the daemon protocol, at the issue's scale.

A 3,000-message tool-heavy conversation (OpenAI and Anthropic shapes mixed,
some results out of order, a few never answered) is ingested in batches of
200 into a real daemon with the default compaction settings. The daemon
folds it in the background, unasked; ``assemble`` with a budget of 8,000 then
gives at most 8,000 tokens ending with the user's newest request and what
followed it, summaries as XML, every tool call answered; ``describe`` and
``expand`` lead from a summary back to the original messages.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from typing import Any

import pytest

from protocol.client import Client
from protocol.errors import NotFound
from tests.brain.lcm.helpers import assert_anthropic_pairs, assert_openai_pairs, output_texts
from tests.e2e.conftest import DEADLINE

MESSAGES = 3_000
BATCH = 200
BUDGET = 8_000
SUMMARY = re.compile(r'<summary id="(sum_[0-9a-f]{16})"')

_VOCABULARY = (  # noqa: SIM905 (a word list reads better as prose)
    "build test deploy cache index query vector graph node edge summary budget token "
    "session message error retry timeout config file path module function class import "
    "the a of to and in is was for on with that this it we should will not but fix check "
    "src/brain/compaction.py tests/e2e/test_lcm.py 404 500 2026-03-01 Alice Bob pytest"
).split()


def _text(rng: random.Random) -> str:
    """Deterministic prose of about 100-300 tokens (four characters a token)."""
    words: list[str] = []
    target = rng.randint(400, 1_200)
    size = 0
    while size < target:
        word = rng.choice(_VOCABULARY)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def tool_heavy_conversation(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` protocol messages: user requests, each followed by tool rounds and an answer."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    calls = 0
    while len(out) < n:
        out.append({"role": "user", "content": _text(rng)})
        for _ in range(rng.randint(1, 4)):
            ids = [f"call_{calls + i}" for i in range(rng.randint(1, 2))]
            calls += len(ids)
            outputs = [_text(rng) for _ in ids]
            if rng.random() < 0.5:  # OpenAI shape
                call = {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": c,
                            "type": "function",
                            "function": {"name": "read", "arguments": f'{{"path": "src/{c}.py"}}'},
                        }
                        for c in ids
                    ],
                }
                results = [
                    {"role": "tool", "tool_call_id": c, "name": "read", "content": o}
                    for c, o in zip(ids, outputs, strict=True)
                ]
            else:  # Anthropic shape: results in one user message
                call = {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": _text(rng)},
                        *(
                            {"type": "tool_use", "id": c, "name": "read", "input": {"path": c}}
                            for c in ids
                        ),
                    ],
                }
                results = [
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": c, "content": o}
                            for c, o in zip(ids, outputs, strict=True)
                        ],
                    }
                ]
            roll = rng.random()
            if roll < 0.05:
                results.reverse()  # out of order
            elif roll < 0.07:
                results = results[:-1]  # never answered (OpenAI) or nothing came back
            out += [call, *results]
        out.append({"role": "assistant", "content": _text(rng)})
    out = out[:n]
    for i, m in enumerate(out):
        m["id"] = f"m{i:05d}"
    return out


def _last_user_text(messages: list[dict[str, Any]]) -> str | None:
    """Text of the newest user message in the output that is neither a summary nor results."""
    for m in reversed(messages):
        if m["role"] != "user":
            continue
        content = m["content"]
        texts = (
            [content]
            if isinstance(content, str)
            else [b["text"] for b in content if b.get("type") == "text"]
        )
        texts = [t for t in texts if not SUMMARY.match(t)]
        if texts:
            return texts[-1]
    return None


def test_a_3000_message_tool_heavy_conversation_through_the_daemon(
    tmp_path: Path, record_property: Any
) -> None:
    conversation = tool_heavy_conversation(MESSAGES)
    sent = {m["id"]: m for m in conversation}
    newest_user = max(
        i
        for i, m in enumerate(conversation)
        if m["role"] == "user" and isinstance(m["content"], str)
    )
    log = tmp_path / "daemon.log"
    with log.open("wb") as stderr, Client.spawn(tmp_path / "lcm.db", stderr=stderr) as client:
        started = time.monotonic()
        for i in range(0, MESSAGES, BATCH):
            done = client.call("ingest", {"session": "s", "messages": conversation[i : i + BATCH]})
            assert done["ingested"] == len(conversation[i : i + BATCH])
        ingested = time.monotonic()

        # Summaries appear on their own: nobody asked for a compaction.
        while (info := client.call("info"))["summaries"] == 0:
            if time.monotonic() - ingested > DEADLINE:
                pytest.fail(f"no summaries {DEADLINE}s after ingest; see {log}")
            time.sleep(0.05)
        waited = time.monotonic() - ingested
        record_property("ingest_s", round(ingested - started, 2))
        record_property("first_summary_after_ingest_s", round(waited, 2))
        print(f"ingest {ingested - started:.2f}s; summaries {waited:.2f}s later: {info}")
        assert info["messages"] == MESSAGES
        # Let the background compaction finish (the count holds still for a while).
        stable_since, count = time.monotonic(), info["summaries"]
        while time.monotonic() - stable_since < 0.5:
            if time.monotonic() - ingested > DEADLINE:
                pytest.fail(f"compaction still running {DEADLINE}s after ingest")
            time.sleep(0.05)
            now = client.call("info")["summaries"]
            if now != count:
                stable_since, count = time.monotonic(), now
        print(f"settled {time.monotonic() - ingested:.2f}s after ingest with {count} summaries")

        for fmt in ("openai", "anthropic"):
            out = client.call("assemble", {"session": "s", "budget": BUDGET, "format": fmt})
            assert out["tokens"] <= BUDGET, out["tokens"]
            assert not out["over_budget"]
            messages = out["messages"]
            # The tail reaches back to the newest user message, whole.
            assert out["fresh_tail"]["first_seq"] <= newest_user + 1
            assert _last_user_text(messages) == conversation[newest_user]["content"]
            texts = output_texts(messages, fmt)
            after = [
                m["content"]
                for m in conversation[newest_user + 1 :]
                if m["role"] == "assistant" and isinstance(m["content"], str) and m["content"]
            ]
            assert all(a in texts for a in after)
            # Summaries, as XML user messages.
            summaries = [(found.group(1), t) for t in texts if (found := SUMMARY.match(t))]
            assert summaries, "no summary in the assembled context"
            assert all(t.endswith("</summary>") for _, t in summaries)
            summary_ids = [i for i, _ in summaries]
            # No orphaned tool call or result.
            if fmt == "openai":
                assert_openai_pairs(messages)
            else:
                assert_anthropic_pairs(messages)

        # describe and expand lead from a summary to the original messages.
        summary_id = summary_ids[0]
        described = client.call("describe", {"id": summary_id, "session": "s"})
        assert described["kind"] == "summary"
        expanded = client.call(
            "expand", {"id": summary_id, "session": "s", "max_tokens": 10_000_000}
        )
        assert not expanded["truncated"]
        reached = [e["id"] for e in expanded["items"] if e["kind"] == "message"]
        assert len(reached) == described["message_count"] > 0
        assert reached == [
            f"m{i:05d}" for i in range(described["first_seq"] - 1, described["last_seq"])
        ]
        for message_id in (reached[0], reached[len(reached) // 2], reached[-1]):
            message = client.call("describe", {"id": message_id, "session": "s"})
            assert message["message"]["content"] == sent[message_id]["content"]
            assert message["covered_by"] is not None
        # Another session cannot see them.
        client.call("ingest", {"session": "other", "message": {"role": "user", "content": "hi"}})
        for method, target in (
            ("describe", summary_id),
            ("expand", summary_id),
            ("describe", reached[0]),
        ):
            with pytest.raises(NotFound):
                client.call(method, {"id": target, "session": "other"})
