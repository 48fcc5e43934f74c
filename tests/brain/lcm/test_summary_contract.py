"""brain.lcm.summary_contract: timestamps, what reads as reasoning, the truncation last resort."""

from __future__ import annotations

import pytest

from brain.lcm.summary_contract import (
    looks_like_reasoning,
    short_time,
    truncate_source,
)
from brain.tokens import estimate_tokens
from tests.brain.lcm.summary_requests import (
    _leaf,
)


def test_short_time_formats_stored_timestamps_and_leaves_others_alone() -> None:
    assert short_time("2026-11-22T14:03:59.123Z") == "2026-11-22 14:03"
    assert short_time("yesterday") == "yesterday"


# -- reasoning detection -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "<think>The user wants a summary</think> Summary: ...",
        "  <thinking>\nfirst",
        "Thinking: the conversation is about",
        "Let me summarise the conversation.",
        "I need to produce a summary of",
        "Okay, so the user talked about",
        "OK so first",
        "Alright, let me",
        "Hmm, the messages",
        "The user wants me to summarise",
        "We need to write a summary.",
        "I'm sorry, but I can't help with that.",
        "I cannot summarise this content.",
    ],
)
def test_reasoning_and_refusals_are_recognised(text: str) -> None:
    assert looks_like_reasoning(text)


@pytest.mark.parametrize(
    "text",
    [
        "[2026-11-22 14:03] user: Let me know when the build is green.",
        "The team decided to think about caching later.",
        "So far the migration has moved 40% of rows.",
        "Okonkwo reviewed the plan.",
        "Letters from the archive were scanned.",
    ],
)
def test_summaries_that_mention_thinking_later_are_not_reasoning(text: str) -> None:
    assert not looks_like_reasoning(text)


def test_truncate_source_never_exceeds_its_limit_even_for_cjk() -> None:
    request = _leaf("数据库被锁定了\uff0c我们决定明天再试。" * 40, "好的" * 30)

    for limit in (0, 1, 5, 9, 12, 50, 200):
        assert estimate_tokens(truncate_source(request, limit)) <= limit
