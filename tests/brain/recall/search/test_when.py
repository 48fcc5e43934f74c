"""brain.recall.search.when: time expressions resolved against the conversation's "now"."""

from __future__ import annotations

from datetime import date, timedelta

from hypothesis import given
from hypothesis import strategies as st

from brain.recall.search.when import resolve

NOW = date(2023, 8, 16)  # a Wednesday


def test_an_explicit_date_resolves_to_that_day_in_either_order() -> None:
    day = [(date(2023, 5, 8), date(2023, 5, 9))]
    assert resolve("what happened on 8 May 2023?", NOW) == day
    assert resolve("what happened on May 8th, 2023?", NOW) == day


def test_a_month_and_year_resolves_to_the_month_and_a_year_to_the_year() -> None:
    assert resolve("in June 2022", NOW) == [(date(2022, 6, 1), date(2022, 7, 1))]
    assert resolve("trips in 2021", NOW) == [(date(2021, 1, 1), date(2022, 1, 1))]


def test_a_bare_month_is_the_latest_such_month_up_to_now() -> None:
    assert resolve("what did she do in May", NOW) == [(date(2023, 5, 1), date(2023, 6, 1))]
    assert resolve("what did she do in October", NOW) == [(date(2022, 10, 1), date(2022, 11, 1))]


def test_relative_expressions_count_back_from_the_conversations_now() -> None:
    assert resolve("yesterday", NOW) == [(date(2023, 8, 15), date(2023, 8, 16))]
    assert resolve("three days ago", NOW) == [(date(2023, 8, 13), date(2023, 8, 14))]
    assert resolve("last month", NOW) == [(date(2023, 7, 1), date(2023, 8, 1))]
    assert resolve("last year", NOW) == [(date(2022, 1, 1), date(2023, 1, 1))]
    assert resolve("last week", NOW) == [(date(2023, 8, 7), date(2023, 8, 14))]
    assert resolve("last Friday", NOW) == [(date(2023, 8, 11), date(2023, 8, 12))]
    assert resolve("last May", NOW) == [(date(2023, 5, 1), date(2023, 6, 1))]  # the latest May
    assert resolve("last October", NOW) == [(date(2022, 10, 1), date(2022, 11, 1))]
    assert resolve("2 months ago", NOW) == [(date(2023, 6, 1), date(2023, 7, 1))]


def test_a_query_without_time_resolves_to_nothing() -> None:
    assert resolve("what is Caroline's favourite book?", NOW) == []


def test_an_impossible_day_falls_back_to_its_month() -> None:
    assert resolve("on 31 February 2023", NOW) == [(date(2023, 2, 1), date(2023, 3, 1))]


@given(st.dates(min_value=date(1950, 1, 1), max_value=date(2090, 12, 31)), st.dates())
def test_any_written_date_resolves_to_exactly_its_day(day: date, now: date) -> None:
    text = f"what did we do on {day.day} {day.strftime('%B')} {day.year}?"
    assert resolve(text, now) == [(day, day + timedelta(days=1))]


@given(st.text(max_size=80), st.dates(min_value=date(1901, 1, 1), max_value=date(2098, 12, 31)))
def test_any_text_resolves_to_well_formed_intervals_without_raising(text: str, now: date) -> None:
    for start, end in resolve(text, now):
        assert start < end
