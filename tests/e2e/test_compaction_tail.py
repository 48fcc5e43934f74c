"""``compact`` with ``fold_tail``, through a real daemon: a target that only folding
into the fresh tail can reach.

A host whose request overflows the model's window when everything outside the fresh
tail is already folded (the OpenClaw plugin on a context-length error) asks for a
target and ``fold_tail``: brain folds the tail too, oldest first, but never the newest
user message or what follows it, and never a tool call apart from its result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protocol.client import Client
from protocol.errors import InvalidParams

from .test_compaction_pressure import VOCABULARY

WORDS = VOCABULARY  # the words of the pressure tests' turns


def _text(i: int) -> str:
    return f"turn {i}: " + " ".join(f"{WORDS[(i + k) % len(WORDS)]}{k}" for k in range(30))


def _tool_turn(i: int) -> list[dict[str, Any]]:
    """A user request, a tool call, its result and the answer."""
    call = {
        "id": f"call{i}",
        "type": "function",
        "function": {"name": "read", "arguments": json.dumps({"path": f"src/f{i}.py"})},
    }
    return [
        {"role": "user", "content": _text(i)},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call{i}", "content": f"def f{i}(x): ...\n" * 20},
        {"role": "assistant", "content": f"answer {i}: " + _text(i + 1)},
    ]


def _raw(assembled: dict[str, Any]) -> list[dict[str, Any]]:
    """The assembled messages that are not summaries (OpenAI format)."""
    return [
        m
        for m in assembled["messages"]
        if not (isinstance(m.get("content"), str) and m["content"].startswith("<summary id="))
    ]


def test_compact_with_fold_tail_reaches_a_target_that_only_the_tail_can_give(
    tmp_path: Path,
) -> None:
    # Eight tool turns (32 messages) all inside the default 32-message tail: nothing is
    # outside it, so a plain targeted compact folds nothing, as OpenClaw's overflow
    # recovery found (and failed the turn).
    messages = [m for i in range(8) for m in _tool_turn(i)]
    with Client.spawn(tmp_path / "b.db", args=["--auto-compact", "false"]) as client:
        client.call("ingest", {"session": "s", "messages": messages})
        before = client.call("assemble", {"session": "s", "budget": 100_000, "detail": False})
        assert before["included"]["summaries"] == 0
        target = before["context_tokens"] // 3
        plain = client.call("compact", {"session": "s", "target_tokens": target})
        assert plain["summaries"] == []
        assert plain["tokens_after"] == before["context_tokens"]

        folded = client.call(
            "compact", {"session": "s", "target_tokens": target, "fold_tail": True}
        )
        assert folded["summaries"]
        assert folded["tokens_after"] <= target
        after = client.call("assemble", {"session": "s", "budget": 100_000, "detail": False})
        assert after["context_tokens"] == folded["tokens_after"]
        assert after["included"]["summaries"] >= 1
        raw = _raw(after)
        # The newest user turn and everything after it are still there, verbatim.
        assert [(m["role"], m["content"] or "") for m in raw[-4:]] == [
            (m["role"], m["content"]) for m in messages[-4:]
        ]
        _assert_pairs_whole(raw)


def test_fold_tail_keeps_the_newest_user_message_and_every_tool_pair_whole(
    tmp_path: Path,
) -> None:
    # A target of 0 cannot be reached: the tail shrinks to its floor and no further.
    # Each target in between lands the chunk's end somewhere else in the tool turns.
    messages = [m for i in range(8) for m in _tool_turn(i)]
    with Client.spawn(tmp_path / "b.db", args=["--auto-compact", "false"]) as client:
        full = 0
        for n, target in enumerate((0, 1_400, 1_000, 700, 300)):
            session = f"s{n}"
            full = client.call("ingest", {"session": session, "messages": messages})[
                "context_tokens"
            ]
            report = client.call(
                "compact", {"session": session, "target_tokens": target, "fold_tail": True}
            )
            assert report["summaries"], (target, full)
            assembled = client.call(
                "assemble", {"session": session, "budget": 100_000, "detail": False}
            )
            raw = _raw(assembled)
            assert [m["role"] for m in raw[-4:]] == ["user", "assistant", "tool", "assistant"]
            assert raw[-4]["content"] == messages[-4]["content"]
            _assert_pairs_whole(raw)
            if target == 0:
                # The floor: only the newest user message and what follows it.
                assert len(raw) == 4
                assert report["tokens_after"] > 0


def _assert_pairs_whole(raw: list[dict[str, Any]]) -> None:
    """Every raw tool result follows its call, and every raw call is answered."""
    calls = {c["id"] for m in raw for c in m.get("tool_calls") or []}
    results = {m["tool_call_id"] for m in raw if m["role"] == "tool"}
    assert calls == results


def test_fold_tail_without_a_target_is_refused(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "b.db") as client:
        client.call("ingest", {"session": "s", "message": {"role": "user", "content": "hi"}})
        with pytest.raises(InvalidParams, match="fold_tail: needs target_tokens"):
            client.call("compact", {"session": "s", "fold_tail": True})
