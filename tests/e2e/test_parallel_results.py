"""Parallel tool results through a real daemon: the context a model is given does not
depend on the shape its host speaks.

Claude answers two tool calls in one user turn holding both ``tool_result``
blocks; OpenAI sends two ``tool`` messages. Issue 26 found the Anthropic shape
shown the raw 30 KB result and none of its history, where the OpenAI shape got
a stub and everything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from protocol.client import Client

BIG = "\n".join(f"line {i}: " + "x" * 60 for i in range(430))
"""A ~30 KB tool output: under the large-payload limit, so it is stored inline."""
SMALL = "ok"


def history(n: int) -> list[dict[str, Any]]:
    """``n`` alternating user/assistant messages of about 60 tokens each."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i}: " + " ".join(f"word{(i * 7 + k) % 97}" for k in range(30)),
        }
        for i in range(n)
    ]


def anthropic_shape() -> list[dict[str, Any]]:
    """40 turns, then two parallel ``tool_use`` calls answered in one user turn."""
    return [
        *history(40),
        {"role": "user", "content": "read both files"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "big.txt"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read", "input": {"path": "ok.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": BIG},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": SMALL},
            ],
        },
    ]


def openai_shape() -> list[dict[str, Any]]:
    """The same conversation as OpenAI sends it: one ``tool`` message per result."""
    calls = [
        ("toolu_a", {"path": "big.txt"}),
        ("toolu_b", {"path": "ok.txt"}),
    ]
    return [
        *history(40),
        {"role": "user", "content": "read both files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read", "arguments": orjson.dumps(args).decode()},
                }
                for call_id, args in calls
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_a", "content": BIG},
        {"role": "tool", "tool_call_id": "toolu_b", "content": SMALL},
    ]


def _results(out: dict[str, Any], fmt: str) -> dict[str, str]:
    """The tool results an assembled context shows, by call id."""
    if fmt == "openai":
        return {m["tool_call_id"]: m["content"] for m in out["messages"] if m["role"] == "tool"}
    return {
        b["tool_use_id"]: b["content"]
        for m in out["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    }


def test_parallel_anthropic_results_get_a_stub_and_keep_their_history_as_openai_ones_do(
    tmp_path: Path,
) -> None:
    with Client.spawn(tmp_path / "b.db", args=("--auto-compact", "false")) as client:
        ids: dict[str, list[str]] = {}
        for shape, messages in (("anthropic", anthropic_shape()), ("openai", openai_shape())):
            ids[shape] = client.call("ingest", {"session": shape, "messages": messages})["ids"]
            client.call("compact", {"session": shape})
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        for shape in ("anthropic", "openai"):
            for fmt in ("anthropic", "openai"):
                params = {"session": shape, "budget": 8_000, "stubs": True, "format": fmt}
                out = client.call("assemble", params)
                seen[shape, fmt] = out
                # The large result is a stub, the small one is shown, nothing is left out.
                assert out["stubbed"] == 1
                assert out["dropped"] == {"summaries": 0, "messages": 0}
                assert not out["over_budget"]
                assert out["tokens"] <= 8_000
                results = _results(out, fmt)
                assert results["toolu_b"] == SMALL
                assert results["toolu_a"].startswith("[Tool Output: ")
                assert "big.txt" in results["toolu_a"]  # the call's hint
                assert BIG[:200] not in str(out["messages"])
        # The same decisions in either shape: the tail, the summaries, about the same
        # cost (the stub names a different message, and which of its blocks).
        for fmt in ("anthropic", "openai"):
            a, o = seen["anthropic", fmt], seen["openai", fmt]
            assert a["included"]["summaries"] == o["included"]["summaries"]
            assert a["expanded"] == o["expanded"]  # the same summaries opened into detail
            assert a["included"]["summaries"] + a["expanded"] >= 1
            assert a["fresh_tail"]["first_seq"] == o["fresh_tail"]["first_seq"]
            assert abs(a["tokens"] - o["tokens"]) <= 5
        # Each stub names what describe needs: the message, and in the Anthropic turn
        # holding both results, the block.
        anthropic_stub = _results(seen["anthropic", "anthropic"], "anthropic")["toolu_a"]
        assert anthropic_stub.startswith(f"[Tool Output: {ids['anthropic'][-1]} | content[0] |")
        described = client.call("describe", {"id": ids["anthropic"][-1], "session": "anthropic"})
        assert described["message"]["content"][0]["content"] == BIG
        openai_stub = _results(seen["openai", "openai"], "openai")["toolu_a"]
        assert openai_stub.startswith(f"[Tool Output: {ids['openai'][-2]} | tool=read |")
        described = client.call("describe", {"id": ids["openai"][-2], "session": "openai"})
        assert described["message"]["content"] == BIG
