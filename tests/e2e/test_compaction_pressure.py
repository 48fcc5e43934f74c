"""Compaction and assembly under pressure, through a real daemon.

``compact`` with ``target_tokens`` folds only what it must: it ends at or under
the target, near it, not at the bottom of what folding everything gives. An
``assemble`` whose budget cannot take every summary keeps the condensed summary
of the conversation's beginning and gives up newer detail.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from brain.tokens import estimate_tokens, message_cost
from protocol.client import Client

VOCABULARY = [
    "release",
    "migration",
    "schema",
    "daemon",
    "budget",
    "summary",
    "window",
    "tail",
    "fixture",
    "sqlite",
    "pipeline",
    "deploy",
    "rollback",
    "ticket",
    "review",
    "branch",
    "merge",
    "cache",
    "index",
    "vector",
]


def _turns(n: int, *, words: int = 18, start: int = 0) -> list[dict[str, Any]]:
    """``n`` alternating user/assistant messages of about ``words * 2`` tokens each."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i}: "
            + " ".join(f"{VOCABULARY[(i * 7 + k) % len(VOCABULARY)]}{k}" for k in range(words)),
        }
        for i in range(start, start + n)
    ]


def _ingest(client: Client, session: str, turns: list[dict[str, Any]]) -> int:
    """Ingest ``turns`` in batches; the session's context tokens afterwards."""
    tokens = 0
    for start in range(0, len(turns), 100):
        batch = turns[start : start + 100]
        tokens = client.call("ingest", {"session": session, "messages": batch})["context_tokens"]
    return tokens


def test_compact_to_a_target_ends_at_or_under_it_and_near_it(tmp_path: Path) -> None:
    # The case: 643 turns folded into one 176-token summary for a
    # target of 3,000 left 1,619 tokens. Now the last pass is sized to what is
    # missing, so the context ends just under the target.
    turns = _turns(680)
    with Client.spawn(tmp_path / "b.db", args=["--auto-compact", "false"]) as client:
        for target in (3_000, 5_000, 8_000):
            session = f"target-{target}"
            before = _ingest(client, session, turns)
            assert before > 20_000
            report = client.call("compact", {"session": session, "target_tokens": target})
            assert report["tokens_before"] == before
            assert report["tokens_after"] <= target
            assert report["tokens_after"] >= 0.8 * target, report  # old: 1,983 for each
            assembled = client.call(
                "assemble", {"session": session, "budget": 100_000, "detail": False}
            )
            assert assembled["context_tokens"] == report["tokens_after"]
            assert assembled["included"]["summaries"] >= 1


SUMMARY = re.compile(r'<summary id="(sum_[0-9a-f]{16})" kind="(leaf|condensed)" depth="(\d+)"')


def _summaries(assembled: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    """(id, kind, depth, cost) of each summary in an assembled context, in order."""
    out = []
    for message in assembled["messages"]:
        content = message.get("content")
        if isinstance(content, str) and (found := SUMMARY.match(content)):
            cost = message_cost(estimate_tokens(content))
            out.append((found.group(1), found.group(2), int(found.group(3)), cost))
    return out


def test_under_budget_pressure_the_oldest_condensed_summary_stays(tmp_path: Path) -> None:
    # Summaries used to be taken newest first, stopping at the first that did
    # not fit: the condensed summary of the conversation's beginning went first.
    args = ["--auto-compact", "false", "--leaf-chunk-tokens", "300"]
    with Client.spawn(tmp_path / "b.db", args=args) as client:
        _ingest(client, "s", _turns(200))
        client.call("compact", {"session": "s"})  # condensed summaries over the oldest turns
        _ingest(client, "s", _turns(60, start=200))
        client.call("compact", {"session": "s"})  # newer leaf summaries, too few to condense
        full = client.call("assemble", {"session": "s", "budget": 100_000, "detail": False})
        every = _summaries(full)
        oldest = every[0]
        assert oldest[1] == "condensed"
        assert any(kind == "leaf" for _, kind, _, _ in every)
        # Room for the tail, the oldest summary and a little more: not for them all.
        budget = full["fresh_tail"]["tokens"] + oldest[3] + 200
        assert budget < full["tokens"]
        for fmt in ("openai", "anthropic"):
            tight = client.call(
                "assemble", {"session": "s", "budget": budget, "format": fmt, "detail": False}
            )
            assert tight["tokens"] <= budget
            assert not tight["over_budget"]
            assert tight["gaps"]["summaries"] > 0  # named by a stand-in
            if fmt == "openai":
                shown = [s[0] for s in _summaries(tight)]
                assert shown[0] == oldest[0]
                # Chronological: the summaries kept are in the context's order.
                assert shown == [s[0] for s in every if s[0] in shown]
                assert len(shown) >= 2  # the rest of the room went to newer detail
            else:
                texts = [
                    b["text"]
                    for m in tight["messages"]
                    for b in m["content"]
                    if b["type"] == "text"
                ]
                assert texts[0].startswith(f'<summary id="{oldest[0]}"')
