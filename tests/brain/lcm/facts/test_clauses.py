"""brain.lcm.facts.clauses: clauses cut, said shorter, and relative dates made absolute."""

from __future__ import annotations

from datetime import datetime

from brain.lcm.facts.clauses import clauses, day_text, parse_at, resolve_dates, squeeze, tidy

SAID_AT = datetime(2023, 5, 8, 13, 56)  # a Monday


def test_relative_dates_become_the_calendar_dates_they_meant() -> None:
    cases = {
        "I went to the group yesterday.": "I went to the group on 7 May 2023.",
        "Yesterday was fun": "on 7 May 2023 was fun",
        "I painted it last year": "I painted it in 2022",
        "since last year": "since 2022",
        "We go camping next month": "We go camping in June 2023",
        "I ran a race last Saturday": "I ran a race the Saturday before 8 May 2023",
        "It happened last week": "It happened the week before 8 May 2023",
        "see you tomorrow": "see you on 9 May 2023",
    }
    for said, meant in cases.items():
        assert resolve_dates(said, SAID_AT) == meant


def test_a_text_without_relative_dates_or_without_a_time_is_unchanged() -> None:
    assert resolve_dates("I moved from Sweden 4 years ago", SAID_AT) == (
        "I moved from Sweden 4 years ago"
    )
    assert resolve_dates("yesterday", None) == "yesterday"


def test_clauses_split_at_semicolons_dashes_and_new_statements() -> None:
    assert clauses("I fixed the test; the build is green") == [
        "I fixed the test",
        "the build is green",
    ]
    assert clauses("The story was gripping - the actors were great") == [
        "The story was gripping",
        "the actors were great",
    ]
    assert clauses("We won, but I hurt my ankle") == ["We won", "but I hurt my ankle"]
    assert clauses("Apples, pears and plums") == ["Apples, pears and plums"]


def test_openers_and_hedges_go_and_a_bare_reaction_is_nothing() -> None:
    assert tidy("Oh wow, I really started a pottery class!") == "I started a pottery class!"
    assert tidy("Hey Mel! I just moved to Denver.") == "I moved to Denver."
    assert tidy("Thanks so much!") == ""


def test_note_form_drops_articles_the_opening_i_and_frames_a_photo() -> None:
    assert squeeze("I went to a support group on 7 May 2023") == (
        "went to support group on 7 May 2023"
    )
    assert squeeze("[image: a photo of a dog on a beach]") == "(photo: dog on beach)"
    assert squeeze("not a problem") == "not problem"


def test_times_and_days_read_as_people_say_them() -> None:
    at = parse_at("2023-05-08T13:56:00Z")
    assert at == SAID_AT
    assert parse_at("not a time") is None
    assert day_text(SAID_AT) == "8 May 2023"
    assert day_text(SAID_AT, year=False) == "8 May"


def test_code_and_commands_are_left_as_written() -> None:
    for code in (
        "git commit -a -m 'just a fix'",
        "`just build` runs the tests",
        "set the timeout = 5000 in the config",
        "run ./scripts/a.sh really fast",
    ):
        assert squeeze(tidy(code)) == code
