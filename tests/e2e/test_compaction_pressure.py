"""Compaction and assembly under pressure, through a real daemon.

``compact`` with ``target_tokens`` folds only what it must: it ends at or under
the target, near it, not at the bottom of what folding everything gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
            assembled = client.call("assemble", {"session": session, "budget": 100_000})
            assert assembled["context_tokens"] == report["tokens_after"]
            assert assembled["included"]["summaries"] >= 1
