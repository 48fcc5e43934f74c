"""brain.lcm.summarize: the extractive summarizer, the escalation ladder and its size rules."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.errors import ProviderError
from brain.lcm.summarize import (
    EXPAND_PREFIX,
    NOTHING_OMITTED,
    TRUNCATION_MARKER,
    ExtractiveSummarizer,
    SourceItem,
    SummaryRequest,
    input_tokens,
    looks_like_reasoning,
    short_time,
    summarize_with_escalation,
    truncate_source,
)
from brain.tokens import estimate_tokens
from tests import ROOT

extractive = ExtractiveSummarizer()


def _at(minute: int) -> str:
    return f"2026-11-22T{14 + minute // 60:02d}:{minute % 60:02d}:00.000Z"


def _leaf(
    *texts: str, target_tokens: int = 400, previous: str | None = None, aggressive: bool = False
) -> SummaryRequest:
    """A leaf request over ``texts``, alternately from user and assistant, a minute apart."""
    items = tuple(
        SourceItem(f"msg_{i}", ("user", "assistant")[i % 2], text, _at(i))
        for i, text in enumerate(texts)
    )
    return SummaryRequest("leaf", 0, items, target_tokens, previous, aggressive)


def _body_and_footer(summary: str) -> tuple[str, str]:
    body, _, footer = summary.rpartition("\n")
    assert footer.startswith(EXPAND_PREFIX), summary
    return body, footer.removeprefix(EXPAND_PREFIX)


CHATTER = [
    "Okay, thanks!",
    "Sure.",
    "Sounds good to me, nothing to add from my side right now honestly.",
    "Hmm, that is an interesting way to look at the whole situation.",
]
WORK = [
    "We decided to keep the busy timeout at 5000 ms until the benchmark on 2026-12-01.",
    "Running `pytest tests/brain -q` failed with exit code 1 in tests/brain/test_store.py.",
    "Traceback: apsw.BusyError: database is locked while Priya ran the maintenance job.",
    "The WAL notes are at https://sqlite.org/wal.html and explain checkpoint starvation.",
    "Marcus will move the loader into brain/config.py next week.",
]


def _conversation(n: int) -> tuple[str, ...]:
    texts = []
    for i in range(n):
        work = WORK[i % len(WORK)].replace("5000", str(5000 + i))
        texts.append(f"{CHATTER[i % len(CHATTER)]} {work} {CHATTER[(i + 1) % len(CHATTER)]}")
    return tuple(texts)


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


def test_short_time_formats_stored_timestamps_and_leaves_others_alone() -> None:
    assert short_time("2026-11-22T14:03:59.123Z") == "2026-11-22 14:03"
    assert short_time("yesterday") == "yesterday"


def test_extractive_output_is_the_same_in_another_process_with_other_hash_seeds() -> None:
    script = (
        "from tests.brain.lcm.test_summarize import _leaf, _conversation, extractive\n"
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


# -- escalation ------------------------------------------------------------------------------


@dataclass
class Scripted:
    """Stands in for arbitrary model output: returns (or raises) the scripted answers in turn."""

    answers: list[str | Exception]
    name: str = "llm:test"
    requests: list[SummaryRequest] = field(default_factory=list)

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


REQUEST = _leaf(*_conversation(30), target_tokens=300)
GOOD = "[2026-11-22 14:00] user: decided the timeout.\nExpand for details about: Priya"


def test_escalation_accepts_a_good_first_answer() -> None:
    primary = Scripted([GOOD])

    outcome = summarize_with_escalation(primary, REQUEST)

    assert (outcome.text, outcome.summarizer, outcome.attempts) == (GOOD, "llm:test", 1)
    assert not primary.requests[0].aggressive


@pytest.mark.parametrize(
    "bad",
    ["", "   \n\t", "<think>I should summarise", "Let me think about this.", "Okay, so the user"],
)
def test_escalation_rejects_empty_and_reasoning_answers_then_tries_aggressive(bad: str) -> None:
    primary = Scripted([bad, GOOD])

    outcome = summarize_with_escalation(primary, REQUEST)

    assert (outcome.text, outcome.summarizer, outcome.attempts) == (GOOD, "llm:test:aggressive", 2)
    assert [r.aggressive for r in primary.requests] == [False, True]


def test_escalation_rejects_an_answer_not_smaller_than_its_input_then_falls_back() -> None:
    echo = "\n".join(item.text for item in REQUEST.items) + "\nAnd that is everything said."
    primary = Scripted([echo, echo + " Really."])
    assert estimate_tokens(echo) >= input_tokens(REQUEST)
    loose = replace(REQUEST, target_tokens=input_tokens(REQUEST) * 2)

    outcome = summarize_with_escalation(primary, loose)

    assert outcome.summarizer == "fallback"
    assert outcome.attempts == 3
    assert estimate_tokens(outcome.text) < input_tokens(loose)
    assert outcome.text.splitlines()[-1].startswith(EXPAND_PREFIX)


def test_escalation_rejects_an_answer_more_than_half_again_over_target() -> None:
    too_long = "word " * (300 * 6 // 5 * 2)  # about 1.6x the 300-token target
    primary = Scripted([too_long, GOOD])

    outcome = summarize_with_escalation(primary, REQUEST)

    assert outcome.summarizer == "llm:test:aggressive"


def test_an_answer_slightly_over_target_is_kept_and_trimmed_to_fit_with_its_expand_line() -> None:
    lines = [f"[2026-11-22 14:{i:02d}] user: point number {i} about the plan" for i in range(28)]
    answer = "\n".join([*lines, f"{EXPAND_PREFIX}Priya, tools/parse_feed.py"])
    assert 300 < estimate_tokens(answer) <= 450
    primary = Scripted([answer])

    outcome = summarize_with_escalation(primary, REQUEST)

    assert outcome.summarizer == "llm:test"
    assert estimate_tokens(outcome.text) <= 300
    kept = outcome.text.splitlines()
    assert kept[0] == lines[0]
    assert kept[-1] == f"{EXPAND_PREFIX}Priya, tools/parse_feed.py"


def test_provider_errors_move_on_down_the_ladder() -> None:
    primary = Scripted([ProviderError("HTTP 503"), ProviderError("circuit open")])

    outcome = summarize_with_escalation(primary, REQUEST)

    assert (outcome.summarizer, outcome.attempts) == ("fallback", 3)
    assert len(primary.requests) == 2


def test_a_failing_fallback_ends_in_hard_truncation_with_a_marker() -> None:
    primary = Scripted([""])
    fallback = Scripted(["Let me try"], name="other")

    outcome = summarize_with_escalation(primary, REQUEST, fallback)

    assert outcome.summarizer == "fallback:truncated"
    assert outcome.attempts == 4
    assert outcome.text.endswith("\n" + TRUNCATION_MARKER)
    assert outcome.text.startswith("[2026-11-22 14:00] user: ")
    assert estimate_tokens(outcome.text) <= 300


def test_the_fallback_is_asked_for_less_than_the_target() -> None:
    fallback = Scripted([GOOD], name="other")

    summarize_with_escalation(Scripted([""]), REQUEST, fallback)

    assert fallback.requests[0].target_tokens < REQUEST.target_tokens
    assert fallback.requests[0].aggressive


def test_an_extractive_primary_is_its_own_fallback() -> None:
    outcome = summarize_with_escalation(extractive, REQUEST)

    assert outcome.summarizer == "extractive"
    assert outcome.attempts == 1
    assert outcome.text == extractive.summarize(REQUEST)


def test_tiny_inputs_are_returned_verbatim_without_asking_the_primary() -> None:
    primary = Scripted([GOOD])
    request = _leaf("hi", "ok", target_tokens=100)

    outcome = summarize_with_escalation(primary, request)

    assert (outcome.text, outcome.summarizer, outcome.attempts) == ("hi\nok", "verbatim", 0)
    assert primary.requests == []


def test_truncate_source_never_exceeds_its_limit_even_for_cjk() -> None:
    request = _leaf("数据库被锁定了\uff0c我们决定明天再试。" * 40, "好的" * 30)

    for limit in (0, 1, 5, 9, 12, 50, 200):
        assert estimate_tokens(truncate_source(request, limit)) <= limit


# -- properties -----------------------------------------------------------------------------

_VOCABULARY = (
    "the a we decided will should error failed Priya Marcus deploy cache timeout retry plan "
    "database locked tomorrow because it's fine ok thanks"
)
_words = st.sampled_from(_VOCABULARY.split(" "))
_fragments = st.one_of(
    _words,
    _words,
    _words,
    st.integers(-10_000, 10**9).map(str),
    st.sampled_from(["brain/store.py", "/etc/hosts", "~/notes.md", "`git push`", "$ ls -la"]),
    st.sampled_from(["https://example.org/a?b=1", "ValueError:", "exit code 2", "Traceback"]),
    st.datetimes().map(lambda d: d.isoformat()),
    st.text(alphabet="数据库被锁定了我们决定明天再试好的こんにちは한국어", min_size=1, max_size=12),
    st.sampled_from([".", "!", "?", ",", "\n", "\n\n", " - ", "。", "\uff1a", "😀"]),
    st.text(max_size=8),
)
_texts = st.lists(_fragments, max_size=60).map(" ".join)


@st.composite
def requests(draw: st.DrawFn) -> SummaryRequest:
    n = draw(st.integers(1, 25))
    depth = draw(st.integers(0, 4))
    minutes = sorted(draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n)))
    items = []
    for i, minute in enumerate(minutes):
        text = draw(_texts)
        if depth:
            if draw(st.booleans()):
                text += f"\n{EXPAND_PREFIX}" + draw(_texts)
            items.append(SourceItem(f"sum_{i}", "summary", text, _at(minute), _at(minute // 2)))
        else:
            role = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
            items.append(SourceItem(f"msg_{i}", role, text, _at(minute)))
    return SummaryRequest(
        "condensed" if depth else "leaf",
        depth,
        tuple(items),
        target_tokens=draw(st.integers(8, 3_000)),
        previous=draw(st.none() | _texts),
        aggressive=draw(st.booleans()),
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


_adversarial = st.one_of(
    _texts,
    st.text(),
    st.sampled_from(["", " ", "<think>", "Let me think", "I'm sorry, I can't"]),
    _texts.map(lambda t: t * 50),
    _texts.map(lambda t: f"{t}\n{EXPAND_PREFIX}{t * 20}"),
    st.just(ProviderError("down")),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests(),
    st.lists(_adversarial, min_size=1, max_size=3),
    st.lists(_adversarial, min_size=1, max_size=1) | st.none(),
    st.integers(-5, 3_000),
)
def test_escalation_result_obeys_the_size_rules_whatever_the_summarizers_return(
    request: SummaryRequest,
    answers: list[str | Exception],
    fallback_answers: list[str | Exception] | None,
    target: int,
) -> None:
    request = replace(request, target_tokens=target)
    primary = Scripted(answers)
    fallback = Scripted(fallback_answers, name="fb") if fallback_answers else None
    source = input_tokens(request)

    outcome = summarize_with_escalation(primary, request, fallback)

    size = estimate_tokens(outcome.text)
    if source > 8:
        assert size < source
        assert size <= max(target, 0)
    else:
        assert size <= min(source, max(target, 0))
    if outcome.summarizer not in ("verbatim", "fallback:truncated"):
        assert outcome.text
        assert outcome.text == outcome.text.strip()
        assert not looks_like_reasoning(outcome.text)
