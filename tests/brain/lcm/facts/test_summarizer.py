"""brain.lcm.facts: the offline default keeps who, what, when and how many, and says so."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from brain.lcm.facts import FactSummarizer
from brain.lcm.summarize import summarize_with_escalation
from brain.lcm.summary_contract import (
    EXPAND_PREFIX,
    NOTHING_OMITTED,
    SourceItem,
    SummaryRequest,
    input_tokens,
    offline_budget,
)
from brain.tokens import estimate_tokens
from tests import ROOT
from tests.brain.lcm.summary_requests import _body_and_footer, requests

facts = FactSummarizer()

FILLER = [
    "Wow, that's so awesome, I love it!",
    "Thanks so much, that means a lot to me!",
    "Haha yeah, totally, sounds great!",
    "Aww, that's really sweet of you to say.",
    "Oh nice, I'm so happy for you!",
]


def _item(i: int, speaker: str, text: str, day: int = 8, role: str = "user") -> SourceItem:
    return SourceItem(f"D1:{i}", role, text, f"2023-05-{day:02d}T13:{i:02d}:00Z", name=speaker)


def _chat(texts: list[tuple[str, str]], day: int = 8) -> tuple[SourceItem, ...]:
    return tuple(
        _item(i, who, text, day, "user" if who == "Caroline" else "assistant")
        for i, (who, text) in enumerate(texts)
    )


def test_every_line_names_its_speaker_from_name_not_the_role() -> None:
    items = _chat(
        [
            ("Caroline", "I went to the LGBTQ support group on Friday and met Priya there."),
            ("Melanie", "I painted a lake sunrise for the Riverside gallery show."),
            *[("Caroline" if i % 2 else "Melanie", f) for i, f in enumerate(FILLER)],
        ]
    )
    summary = facts.summarize(SummaryRequest("leaf", 0, items, 60))

    body, _ = _body_and_footer(summary)
    lines = body.splitlines()[1:]  # the first line is the header
    assert lines
    for line in lines:
        assert line.startswith(("Caroline: ", "Melanie: ")), line
    assert "user" not in body.split()
    assert "assistant" not in body.split()
    assert "Caroline, Melanie" in body.splitlines()[0]


def test_lines_carry_their_day_when_the_chunk_spans_days() -> None:
    items = (
        _item(1, "Caroline", "I signed up for the pottery class at Clayworks on 2 July.", day=8),
        _item(2, "Melanie", "Clayworks sounds great, Caroline, which teacher runs it?", day=8),
        _item(3, "Caroline", "Naoko runs it, she trained in Kyoto for 12 years.", day=8),
        _item(4, "Melanie", "We adopted a beagle called Biscuit from the Oakland shelter.", day=9),
        _item(5, "Caroline", "Biscuit is adorable! How old is he and does he like cats?", day=9),
        _item(6, "Melanie", "He is 3, loves cats, and sleeps on the couch all afternoon.", day=9),
    )
    items += tuple(_item(7 + i, "Melanie", f, day=9) for i, f in enumerate(FILLER * 2))
    summary = facts.summarize(SummaryRequest("leaf", 0, items, 200))

    body, _ = _body_and_footer(summary)
    header, *lines = body.splitlines()
    assert header.startswith("8 May 13:01 to 9 May 2023 13:16 | Caroline, Melanie")
    assert lines[0].startswith("[8 May] Caroline: ")
    assert lines[1].startswith("[9 May] Melanie: ")


def test_a_relative_date_is_kept_as_the_calendar_date_it_meant() -> None:
    items = (_item(1, "Caroline", "I went to the support group yesterday with Priya."),)
    items += tuple(_item(i + 2, "Melanie", f) for i, f in enumerate(FILLER))

    body, _ = _body_and_footer(facts.summarize(SummaryRequest("leaf", 0, items, 40)))

    assert "on 7 May 2023" in body
    assert "yesterday" not in body


def test_a_sentence_with_numbers_dates_and_names_is_kept_over_filler_at_the_same_budget() -> None:
    fact = "The Oakland 10K charity run on 14 June raised $2,300 for the Riverside shelter."
    for position in range(3):
        texts = [("Melanie", f) for f in FILLER]
        texts.insert(position, ("Caroline", fact))
        items = _chat(texts)
        request = SummaryRequest("leaf", 0, items, 40)

        body, _ = _body_and_footer(facts.summarize(request))

        assert "2,300" in body, body
        assert "Oakland" in body, body
        for filler in FILLER:
            assert filler.rstrip("!.") not in body


def test_a_decision_and_an_error_with_its_fix_are_kept_over_small_talk() -> None:
    texts = [
        ("Caroline", "We decided to pin the retry budget at 5 attempts for the importer."),
        ("Melanie", "pytest failed with BusyError in tests/test_store.py; a timeout fixed it."),
        *[("Melanie", f) for f in FILLER * 3],
    ]
    body, _ = _body_and_footer(facts.summarize(SummaryRequest("leaf", 0, _chat(texts), 70)))

    assert "decided to pin retry budget at 5 attempts" in body  # note form: no articles
    assert "BusyError" in body


def test_the_footer_names_only_what_was_left_out() -> None:
    texts = [
        ("Caroline", "The parser lives in tools/parse_feed.py and Okonkwo owns it since March."),
        ("Melanie", "Dana moved the Frankfurt replica to db-7 after the outage on 3 May 2023."),
        ("Caroline", "Ravi booked the Lisbon offsite at the Tivoli hotel for 42 people."),
        ("Melanie", "The Kyoto sprint shipped version 2.4.1 of the importer with Haruki."),
        *[("Melanie", f) for f in FILLER],
    ]
    items = _chat(texts)
    summary = facts.summarize(SummaryRequest("leaf", 0, items, 70))

    body, listing = _body_and_footer(summary)
    source = "\n".join(item.text for item in items).lower()
    terms = [t.strip() for t in listing.split(",")]
    assert listing not in (NOTHING_OMITTED, "earlier details")
    for term in terms:
        assert term.lower() in source, term
        assert term.lower() not in body.lower(), term


def test_the_footer_says_nothing_significant_omitted_when_only_filler_was_dropped() -> None:
    texts = [("Caroline", "Priya reviews tools/parse_feed.py on 2026-12-04 before the release.")]
    texts += [("Melanie", f) for f in FILLER]

    _, listing = _body_and_footer(facts.summarize(SummaryRequest("leaf", 0, _chat(texts), 400)))

    assert listing == NOTHING_OMITTED


def test_a_clause_longer_than_the_budget_is_cut_not_dropped() -> None:
    words = ["kestrel", "staging", "cluster", "frankfurt", "rollback", "canary"]
    texts = [("Caroline", " ".join(words[(i + k) % 6] for k in range(80))) for i in range(3)]
    summary = facts.summarize(SummaryRequest("leaf", 0, _chat(texts), 60))

    body, _ = _body_and_footer(summary)
    assert "Caroline: kestrel staging cluster frankfurt" in body
    assert body.endswith("\u2026")
    assert estimate_tokens(summary) <= 60


def test_a_repeated_fact_is_said_once() -> None:
    fact = "The staging database moved to host db-2 in Frankfurt on 3 May 2023."
    texts = [("Caroline", fact), ("Melanie", fact), ("Caroline", fact), *[("Melanie", "Ok.")] * 3]

    body, _ = _body_and_footer(facts.summarize(SummaryRequest("leaf", 0, _chat(texts), 200)))

    assert body.count("db-2") == 1


def test_a_one_off_fact_survives_a_boilerplate_sentence_every_message_repeats() -> None:
    # A host pasting the same banner into every prompt (an environment line, a
    # template, a signature): said in every message, it says nothing about any one,
    # however many paths and versions it names.
    banner = (
        "Context: cwd /srv/payments-api, branch release/2.14, Python 3.12.4, "
        "Postgres 16.2 on db-staging-04."
    )
    asks = [
        "The deploy key lives in vault/ci, remember where it is.",
        "Write down the release schedule for later.",
        "Where does the deploy key live? Search your memory.",
        "Summarise what we agreed about incidents.",
        "Thanks, that is all for today.",
    ]
    items: list[SourceItem] = []
    for i, ask in enumerate(asks):
        items.append(_item(2 * i, "Ann", f"{ask} {banner}"))
        items.append(_item(2 * i + 1, "Bot", f"Noted, turn {i + 1}.", role="assistant"))
    summary = facts.summarize(SummaryRequest("leaf", 0, tuple(items), 60))

    body, _ = _body_and_footer(summary)
    assert "deploy key lives in vault/ci" in body
    assert "payments-api" not in body


def test_the_same_request_gives_the_same_summary_in_another_process() -> None:
    items = _chat([("Caroline" if i % 3 else "Melanie", t) for i, t in enumerate(_story())])
    request = SummaryRequest("leaf", 0, items, 120)
    here = facts.summarize(request)
    assert facts.summarize(request) == here
    code = (
        "import sys, pickle\n"
        "from brain.lcm.facts import FactSummarizer\n"
        "request = pickle.loads(sys.stdin.buffer.read())\n"
        "sys.stdout.write(FactSummarizer().summarize(request))\n"
    )
    import pickle

    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    other = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(request),
        capture_output=True,
        env=env,
        check=True,
        cwd=ROOT,
    ).stdout.decode()
    assert other == here


def test_a_condensed_summary_keeps_a_rare_fact_of_one_child() -> None:
    children = []
    for c in range(4):
        texts = [
            ("Caroline", "We talked about the garden and the painting class again."),
            ("Melanie", "The painting class in the garden was fun, the garden looks lovely."),
        ]
        if c == 2:
            texts.append(("Caroline", "Priya flew to Reykjavik for the Hekla volcano survey."))
        leaf = facts.summarize(SummaryRequest("leaf", 0, _chat(texts, day=8 + c), 60))
        children.append(
            SourceItem(
                f"sum_{c}",
                "summary",
                leaf,
                f"2023-05-{8 + c:02d}T14:00:00Z",
                earliest_at=f"2023-05-{8 + c:02d}T13:00:00Z",
            )
        )
    assert "Reykjavik" in children[2].text
    request = SummaryRequest("condensed", 1, tuple(children), 50)

    summary = facts.summarize(request)

    body, _ = _body_and_footer(summary)
    assert "Reykjavik" in body
    assert "[10 May] Caroline: " in body  # the child's line keeps its day and speaker
    assert estimate_tokens(summary) <= 50


def test_a_condensed_summary_reads_summaries_of_another_format() -> None:
    children = tuple(
        SourceItem(
            f"sum_{c}",
            "summary",
            f"The team moved the build to runner-{c} after the outage.\n"
            f"Expand for details about: pipeline-{c}",
            f"2023-05-{8 + c:02d}T14:00:00Z",
            earliest_at=f"2023-05-{8 + c:02d}T13:00:00Z",
        )
        for c in range(3)
    )
    summary = facts.summarize(SummaryRequest("condensed", 1, children, 60))

    body, listing = _body_and_footer(summary)
    assert "runner-" in body
    assert "pipeline-" in listing  # the children's own omissions are still omitted


def test_aggressive_summaries_are_smaller() -> None:
    items = _chat([("Caroline" if i % 2 else "Melanie", t) for i, t in enumerate(_story() * 3)])
    request = SummaryRequest("leaf", 0, items, 400)

    normal = facts.summarize(request)
    aggressive = facts.summarize(replace(request, aggressive=True))

    assert estimate_tokens(aggressive) <= offline_budget(replace(request, aggressive=True))
    assert estimate_tokens(aggressive) < estimate_tokens(normal)


def test_the_escalation_ladder_falls_back_to_the_fact_summarizer() -> None:
    class Broken:
        name = "llm:broken"

        def summarize(self, request: SummaryRequest) -> str:
            return "I'm sorry, I can't help with that."

    items = _chat([("Caroline", t) for t in _story()])
    outcome = summarize_with_escalation(Broken(), SummaryRequest("leaf", 0, items, 200))

    assert outcome.summarizer == "fallback"
    body, _ = _body_and_footer(outcome.text)
    assert body.splitlines()[-1].startswith("Caroline: ")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_any_request_gives_a_summary_within_the_size_rule_ending_with_the_footer(
    request: SummaryRequest,
) -> None:
    summary = facts.summarize(request)

    source = input_tokens(request)
    if source <= 8:
        assert estimate_tokens(summary) <= min(source, request.target_tokens)
        return
    assert estimate_tokens(summary) <= request.target_tokens
    assert estimate_tokens(summary) < source
    if offline_budget(request) >= 8:
        assert summary.rsplit("\n", 1)[-1].startswith(EXPAND_PREFIX)


def _story() -> list[str]:
    return [
        "I started a pottery class at Clayworks on Tuesday evenings.",
        "Wow, that's awesome!",
        "My daughter Emma turned 7 and we went to the aquarium in Monterey.",
        "We decided to repaint the kitchen blue before the holidays.",
        "Thanks so much!",
        "The car broke down on I-80, the mechanic said the alternator failed.",
        "I'm reading 'Charlotte's Web' to the kids at bedtime.",
        "Haha yeah!",
    ]


_PLACES = ["Lisbon", "Oslo", "Kyoto", "Quito", "Nairobi", "Hanoi", "Perth", "Tulsa", "Zagreb"]
_THINGS = ["ukulele", "kayak", "telescope", "sourdough", "bonsai", "drone", "loom", "easel"]


def _facts_chat(count: int) -> tuple[SourceItem, ...]:
    """A chat where every message says a different dense fact (nothing to drop as filler)."""
    texts = [
        f"In {_PLACES[i % len(_PLACES)]} I bought a {_THINGS[i % len(_THINGS)]} for "
        f"{10 + i} euros from shop number {100 + 7 * i}."
        for i in range(count)
    ]
    return tuple(
        SourceItem(
            f"D1:{i}",
            "user",
            text,
            f"2023-05-08T{13 + i // 60}:{i % 60:02d}:00Z",
            name="Caroline" if i % 2 else "Melanie",
        )
        for i, text in enumerate(texts)
    )


def test_a_leaf_that_must_shrink_its_source_fills_its_budget() -> None:
    # The footer's reserve it did not use goes to clauses: a leaf of a large chunk
    # ends within a few tokens of its budget.
    request = SummaryRequest("leaf", 0, _facts_chat(120), 300)
    summary = facts.summarize(request)

    assert offline_budget(request) - 6 <= estimate_tokens(summary) <= offline_budget(request)
    assert summary.rsplit("\n", 1)[1].startswith(EXPAND_PREFIX)


def test_a_leaf_with_room_for_more_than_a_quarter_of_its_source_keeps_to_a_quarter() -> None:
    request = SummaryRequest("leaf", 0, _facts_chat(40), 1200)
    source = input_tokens(request)
    assert offline_budget(request) > source // 2  # room for half of it

    summary = facts.summarize(request)

    assert estimate_tokens(summary) <= source // 4
    aggressive = facts.summarize(replace(request, aggressive=True))
    assert estimate_tokens(aggressive) <= source // 8


def test_what_the_speakers_come_back_to_is_kept_over_a_detail_said_once() -> None:
    items = _chat(
        [
            ("Caroline", "We adopted a beagle named Biscuit from the shelter."),
            ("Melanie", "My cousin visited the Zenith gallery near the harbour."),
            ("Caroline", "Biscuit is adorable, right?"),
            ("Melanie", "Biscuit sounds sweet!"),
            ("Caroline", "Biscuit already knows how to sit."),
            *[("Caroline" if i % 2 else "Melanie", f) for i, f in enumerate(FILLER)],
        ]
    )
    summary = facts.summarize(SummaryRequest("leaf", 0, items, 40))

    body, _ = _body_and_footer(summary)
    assert "beagle named Biscuit" in body
    assert "Zenith" not in body
