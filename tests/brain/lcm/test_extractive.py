"""brain.lcm.extractive: who said what and when, salient sentences first, deterministic."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from brain.lcm.extractive import ExtractiveSummarizer
from brain.lcm.summary_contract import (
    EXPAND_PREFIX,
    NOTHING_OMITTED,
    SourceItem,
    SummaryRequest,
    input_tokens,
)
from brain.tokens import estimate_tokens
from tests import ROOT
from tests.brain.lcm.summary_requests import (
    CHATTER,
    _at,
    _body_and_footer,
    _conversation,
    _leaf,
    extractive,
    requests,
)

# -- the extractive summarizer -----------------------------------------------------------


def test_leaf_summary_keeps_who_said_what_and_when_in_chronological_order() -> None:
    request = _leaf(*_conversation(12), target_tokens=300)

    summary = extractive.summarize(request)

    body, _ = _body_and_footer(summary)
    lines = body.splitlines()
    assert lines
    stamps = []
    for line in lines:
        match = re.match(r"\[(2026-11-22 \d\d:\d\d)\] (user|assistant): \S", line)
        assert match, line
        stamps.append(match.group(1))
    assert stamps == sorted(stamps)
    assert lines[0].startswith("[2026-11-22 14:00] user: ")


def test_leaf_summary_prefers_decisions_errors_and_entities_over_filler() -> None:
    request = _leaf(*_conversation(10), target_tokens=250)

    body, _ = _body_and_footer(extractive.summarize(request))

    assert "We decided to keep the busy timeout" in body
    assert "BusyError" in body or "failed with exit code 1" in body
    for filler in CHATTER:
        assert filler not in body


def test_summary_is_under_target_and_smaller_than_input() -> None:
    request = _leaf(*_conversation(40), target_tokens=200)

    summary = extractive.summarize(request)

    assert estimate_tokens(summary) <= 200
    assert estimate_tokens(summary) < input_tokens(request)


def test_expand_line_names_salient_things_that_were_left_out_and_only_those() -> None:
    texts = [
        "We decided to ship the importer on Friday.",
        "The parser lives in tools/parse_feed.py and Okonkwo owns it.",
        "Dana asked whether https://example.org/spec covers the retry rules.",
        *_conversation(20),
    ]
    request = _leaf(*texts, target_tokens=120)

    body, listing = _body_and_footer(extractive.summarize(request))

    source = "\n".join(item.text for item in request.items).lower()
    terms = [t.strip() for t in listing.split(",")]
    assert listing != NOTHING_OMITTED
    for term in terms:
        assert term.lower() in source, term
        assert term.lower() not in body.lower(), term


def test_expand_line_says_nothing_significant_omitted_when_only_filler_was_dropped() -> None:
    request = _leaf(
        "We decided to ship the importer on 2026-12-04 after Priya reviews tools/parse_feed.py.",
        *["Okay, thanks!", "Sure.", "Cool.", "Great, thank you!", "Yes.", "Nice, got it."] * 4,
        target_tokens=500,
    )

    _, listing = _body_and_footer(extractive.summarize(request))

    assert listing == NOTHING_OMITTED


def test_aggressive_summary_keeps_roughly_half() -> None:
    request = _leaf(*_conversation(60), target_tokens=800)

    normal = extractive.summarize(request)
    aggressive = extractive.summarize(replace(request, aggressive=True))

    assert estimate_tokens(aggressive) <= estimate_tokens(normal) * 0.6 + 20
    assert _body_and_footer(aggressive)[0]


def test_summary_is_not_padded_to_the_target_when_the_input_is_small() -> None:
    request = _leaf(*_conversation(6), target_tokens=10_000)

    summary = extractive.summarize(request)

    assert estimate_tokens(summary) <= input_tokens(request) * 3 // 5


def test_sentences_already_in_the_previous_summary_are_not_repeated() -> None:
    repeated = "The staging database moved to the new host db-2 in Frankfurt last night."
    fresh = "The staging cache moved to the new host cache-7 in Dublin this morning."
    request = _leaf(repeated, fresh, *CHATTER, target_tokens=40, previous=f"- {repeated}")

    body, _ = _body_and_footer(extractive.summarize(request))

    assert fresh in body
    assert repeated not in body


def test_condensed_summary_has_a_time_range_header_per_child_and_decisions_first() -> None:
    children = []
    for c in range(3):
        leaf = extractive.summarize(_leaf(*_conversation(12 + c), target_tokens=200))
        children.append(
            SourceItem(f"sum_{c}", "summary", leaf, _at(60 * c + 30), earliest_at=_at(60 * c))
        )
    request = SummaryRequest("condensed", 1, tuple(children), target_tokens=400)

    summary = extractive.summarize(request)

    body, _ = _body_and_footer(summary)
    headers = [line for line in body.splitlines() if line.startswith("[")]
    assert headers == [
        "[2026-11-22 14:00 to 14:30]",
        "[2026-11-22 15:00 to 15:30]",
        "[2026-11-22 16:00 to 16:30]",
    ]
    bullets = [line for line in body.splitlines() if not line.startswith("[")]
    assert all(line.startswith("- ") for line in bullets)
    assert "user:" not in body  # per-message prefixes belong to leaves
    first_bullets = [body.split(h + "\n", 1)[1].splitlines()[0] for h in headers]
    assert any("decided" in b or "will" in b for b in first_bullets)


def test_deeper_condensed_levels_are_shorter() -> None:
    children = tuple(
        SourceItem(
            f"sum_{c}",
            "summary",
            extractive.summarize(_leaf(*_conversation(30), target_tokens=600)),
            _at(c + 1),
            earliest_at=_at(c),
        )
        for c in range(4)
    )
    sizes = [
        estimate_tokens(
            extractive.summarize(SummaryRequest("condensed", depth, children, target_tokens=2000))
        )
        for depth in (1, 2, 3)
    ]

    assert sizes[0] > sizes[1] > sizes[2]


def test_children_expand_lists_carry_into_the_condensed_expand_line() -> None:
    child = (
        "[2026-11-22 14:00] user: We decided to ship on Friday.\n"
        f"{EXPAND_PREFIX}quarterly-report.xlsx, Okonkwo"
    )
    items = tuple(
        SourceItem(f"sum_{i}", "summary", child.replace("Friday", day), _at(i), earliest_at=_at(i))
        for i, day in enumerate(["Friday", "Monday", "Tuesday"])
    )

    _, listing = _body_and_footer(
        extractive.summarize(SummaryRequest("condensed", 1, items, target_tokens=200))
    )

    assert "quarterly-report.xlsx" in listing
    assert "Okonkwo" in listing


def test_tiny_inputs_come_back_verbatim() -> None:
    request = _leaf("ok", "fine")  # 2 tokens

    assert extractive.summarize(request) == "ok\nfine"


def test_extractive_output_is_the_same_in_another_process_with_other_hash_seeds() -> None:
    script = (
        "from tests.brain.lcm.summary_requests import _leaf, _conversation, extractive\n"
        "print(extractive.summarize(_leaf(*_conversation(25), target_tokens=150)))\n"
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, check=True
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1
    assert outputs.pop().decode().rstrip("\n") == extractive.summarize(
        _leaf(*_conversation(25), target_tokens=150)
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_extractive_output_fits_target_and_input_and_ends_with_the_expand_line(
    request: SummaryRequest,
) -> None:
    summary = extractive.summarize(request)

    size, source = estimate_tokens(summary), input_tokens(request)
    assert size <= request.target_tokens
    if source > 8:
        assert size < source
        assert summary.splitlines()[-1].startswith(EXPAND_PREFIX)
    else:
        assert size <= source


@settings(max_examples=100, deadline=None)
@given(requests())
def test_extractive_output_is_deterministic(request: SummaryRequest) -> None:
    assert extractive.summarize(request) == ExtractiveSummarizer().summarize(request)
