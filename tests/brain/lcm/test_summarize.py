"""brain.lcm.summarize: the escalation ladder and its size rules, whatever summarizers return."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.errors import ProviderError
from brain.lcm.summarize import (
    EXPAND_PREFIX,
    TRUNCATION_MARKER,
    SummaryRequest,
    input_tokens,
    looks_like_reasoning,
    summarize_with_escalation,
)
from brain.tokens import estimate_tokens
from tests.brain.lcm.summary_requests import (
    _conversation,
    _leaf,
    _texts,
    extractive,
    requests,
)

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
