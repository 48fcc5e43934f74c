"""brain.clock: the one form timestamps are stored in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from brain.clock import iso, now_iso, parse


def test_a_moment_is_stored_in_utc_with_milliseconds_and_a_z() -> None:
    moment = datetime(2026, 3, 1, 1, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert iso(moment) == "2026-02-28T23:30:15.123Z"


def test_a_naive_moment_is_taken_as_utc() -> None:
    assert iso(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"


def test_years_before_1000_keep_four_digits() -> None:
    assert iso(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00.000Z"


def test_now_is_in_the_stored_form_and_parses_back_aware() -> None:
    stamp = now_iso()
    assert stamp.endswith("Z")
    assert len(stamp) == len("2026-01-02T03:04:05.000Z")
    assert parse(stamp).tzinfo is not None


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
def test_stored_timestamps_parse_back_to_the_millisecond_and_sort_as_strings(
    moment: datetime,
) -> None:
    aware = moment.replace(tzinfo=UTC)
    stamp = iso(aware)
    assert parse(stamp) == aware.replace(microsecond=aware.microsecond // 1000 * 1000)
    later = aware + timedelta(milliseconds=1)
    if later.year <= 9999:
        assert iso(later) > stamp
