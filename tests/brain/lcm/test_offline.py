"""brain.lcm.offline and brain.lcm.baselines: the offline summarizers by name, and the
baselines they are measured against, at the budget they all share."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from brain import BrainConfig
from brain.config import CompactionConfig
from brain.lcm.offline import OFFLINE_NAMES, offline_summarizer
from brain.lcm.summary_contract import (
    TRUNCATION_MARKER,
    SourceItem,
    SummaryRequest,
    input_tokens,
    offline_budget,
)
from brain.tokens import estimate_tokens
from tests.brain.lcm.summary_requests import requests


def _request(n: int = 40) -> SummaryRequest:
    items = tuple(
        SourceItem(
            f"m{i}",
            "user" if i % 2 else "assistant",
            f"Sentence {i} of the log mentions host-{i}. Another clause follows it here.",
            f"2023-05-08T13:{i:02d}:00Z",
            name="Ann" if i % 2 else "Bob",
        )
        for i in range(n)
    )
    return SummaryRequest("leaf", 0, items, 200)


def test_each_name_gives_its_summarizer_and_an_unknown_name_is_refused() -> None:
    names = {n: offline_summarizer(n).name for n in OFFLINE_NAMES}
    assert names == {
        "default": "facts",
        "extractive_v1": "extractive",
        "truncation": "truncation",
        "random": "random",
    }
    with pytest.raises(ValueError, match="offline_summarizer must be one of"):
        offline_summarizer("gpt")
    with pytest.raises(ValueError, match="offline_summarizer must be default"):
        BrainConfig(compaction=CompactionConfig(offline_summarizer="gpt"))


def test_truncation_keeps_the_head_within_the_shared_budget() -> None:
    request = _request()
    summary = offline_summarizer("truncation").summarize(request)

    assert summary.startswith("[2023-05-08 13:00] Bob (assistant): Sentence 0")
    assert summary.endswith(TRUNCATION_MARKER)
    assert estimate_tokens(summary) <= offline_budget(request)


def test_random_sentences_are_seeded_by_the_source_and_shown_in_order() -> None:
    request = _request()
    summarizer = offline_summarizer("random")
    summary = summarizer.summarize(request)

    assert summary == summarizer.summarize(request)
    lines = summary.splitlines()[:-1]
    assert len(lines) >= 2
    stamps = [line[:18] for line in lines]
    assert stamps == sorted(stamps)
    assert estimate_tokens(summary) <= offline_budget(request)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_every_baseline_obeys_the_size_rule(request: SummaryRequest) -> None:
    source = input_tokens(request)
    for name in ("truncation", "random"):
        summary = offline_summarizer(name).summarize(request)
        if source > 8:
            assert estimate_tokens(summary) <= request.target_tokens
            assert estimate_tokens(summary) < source
