"""The periods rollups cover: UTC calendar days and ISO weeks (Monday to Monday).

Stored timestamps are UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (``brain.clock``), so a
period is a pair of such strings and "written in the period" is a string
comparison. Tested through tests/brain/lcm/rollups/.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Final, Literal

from brain import clock

Period = Literal["day", "week"]
PERIODS: Final[tuple[Period, ...]] = ("day", "week")
SPAN: Final[dict[Period, timedelta]] = {"day": timedelta(days=1), "week": timedelta(days=7)}
"""How far back ``recent`` looks for a period with no ``since``."""


def day_of(stamp: str) -> date:
    """The UTC date of a stored timestamp."""
    return date.fromisoformat(stamp[:10])


def period_start(day: date, period: Period) -> date:
    """The first day of the period holding ``day`` (the Monday of its ISO week)."""
    return day if period == "day" else day - timedelta(days=day.weekday())


def bounds(start: date, period: Period) -> tuple[str, str]:
    """The period starting on ``start`` as stored timestamps: ``[start, end)``."""
    begin = datetime(start.year, start.month, start.day, tzinfo=UTC)
    return clock.iso(begin), clock.iso(begin + SPAN[period])
