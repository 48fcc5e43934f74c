"""Time expressions in a query, resolved to date intervals against a conversation's "now".

"What did we say on 8 May 2023", "in May", "last year", "two weeks ago": a question
names a time in the conversation's own frame, not the reader's. ``resolve`` turns the
expressions it recognises into half-open ``[start, end)`` date intervals, given the
anchor (the conversation's latest message date). The ranking stage uses "the turn
was written inside one of them" as a feature, so a wrong or vague reading only
weighs a little instead of hiding turns (no filtering: relative phrases in a
question often describe when a thing happened, not when it was talked about).

Recognised: ``8 May 2023`` / ``May 8, 2023`` / ``May 2023`` / a bare month (the latest
such month up to the anchor) / ``last``/``this`` + month, ``week``, ``month``,
``year``, weekday names / ``yesterday``, ``today`` / ``N days|weeks|months|years
ago`` (N a digit or a word up to twelve) / a year from 1900 to 2099.
Tested in tests/brain/recall/search/test_when.py.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Final

import regex

Interval = tuple[date, date]
"""``[start, end)``: the first day in, the first day after."""

MONTHS: Final = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
_NUMBERS: Final = {
    w: i + 1
    for i, w in enumerate(
        [
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
}
_NUMBERS.update({"a": 1, "an": 1, "couple": 2, "few": 3})
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH: Final = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY: Final = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR: Final = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS: Final = (
    ("day", regex.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", regex.I)),
    ("day", regex.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", regex.I)),
    ("month", regex.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", regex.I)),
    (
        "ago",
        regex.compile(r"\b(?P<n>\d+|[a-z]+)\s+(?P<unit>day|week|month|year)s?\s+ago\b", regex.I),
    ),
    (
        "last",
        regex.compile(
            r"\b(?P<which>last|this|past|previous)\s+(?P<what>week|month|year|weekend|"
            + "|".join(_WEEKDAYS)
            + "|"
            + "|".join(sorted(MONTHS, key=len, reverse=True))
            + r")\b",
            regex.I,
        ),
    ),
    ("yesterday", regex.compile(r"\b(?P<word>yesterday|today|tonight)\b", regex.I)),
    (
        "bare_month",
        regex.compile(rf"\b(?:in|during|since|of|early|late|mid)\s+{_MONTH}\b", regex.I),
    ),
    ("year", regex.compile(rf"\b(?:in|during|of|since)?\s*{_YEAR}\b", regex.I)),
)


def resolve(query: str, anchor: date) -> list[Interval]:
    """The intervals the time expressions of ``query`` name, seen from ``anchor``.

    Each span of text is read once, by the most specific pattern (a full date before
    its month and its year). Impossible dates (31 February) are skipped.
    """
    taken: list[tuple[int, int]] = []
    out: list[Interval] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(query):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            interval = _interval(kind, m, anchor)
            if interval is not None:
                taken.append((m.start(), m.end()))
                out.append(interval)
    return out


def _interval(kind: str, m: regex.Match[str], anchor: date) -> Interval | None:
    try:
        if kind == "day":
            day = date(int(m["year"]), MONTHS[m["month"].lower()], int(m["day"]))
            return day, day + timedelta(days=1)
        if kind == "month":
            return _month(int(m["year"]), MONTHS[m["month"].lower()])
        if kind == "year":
            return date(int(m["year"]), 1, 1), date(int(m["year"]) + 1, 1, 1)
        if kind == "bare_month":
            return _latest_month(MONTHS[m["month"].lower()], anchor, include_current=True)
        if kind == "ago":
            return _ago(m["n"].lower(), m["unit"].lower(), anchor)
        if kind == "last":
            return _last(m["which"].lower(), m["what"].lower(), anchor)
        if kind == "yesterday":
            day = anchor - timedelta(days=1) if m["word"].lower() == "yesterday" else anchor
            return day, day + timedelta(days=1)
    except ValueError:
        return None
    return None


def _month(year: int, month: int) -> Interval:
    end = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return date(year, month, 1), end


def _latest_month(month: int, anchor: date, *, include_current: bool) -> Interval:
    """That month in the anchor's year if it is not after the anchor, else a year before."""
    year = anchor.year
    if month > anchor.month or (month == anchor.month and not include_current):
        year -= 1
    return _month(year, month)


def _ago(word: str, unit: str, anchor: date) -> Interval | None:
    n = int(word) if word.isdigit() else _NUMBERS.get(word)
    if n is None or n > 1000:
        return None
    if unit == "day":
        day = anchor - timedelta(days=n)
        return day, day + timedelta(days=1)
    if unit == "week":
        # A week ago is vague: the week around that day.
        day = anchor - timedelta(weeks=n)
        return day - timedelta(days=3), day + timedelta(days=4)
    if unit == "month":
        total = anchor.year * 12 + anchor.month - 1 - n
        return _month(total // 12, total % 12 + 1)
    return date(anchor.year - n, 1, 1), date(anchor.year - n + 1, 1, 1)


def _last(which: str, what: str, anchor: date) -> Interval | None:
    this = which == "this"
    if what in ("week", "weekend"):
        monday = anchor - timedelta(days=anchor.weekday())
        start = monday if this else monday - timedelta(weeks=1)
        return start, start + timedelta(weeks=1)
    if what == "month":
        if this:
            return _month(anchor.year, anchor.month)
        total = anchor.year * 12 + anchor.month - 2
        return _month(total // 12, total % 12 + 1)
    if what == "year":
        year = anchor.year if this else anchor.year - 1
        return date(year, 1, 1), date(year + 1, 1, 1)
    if what in _WEEKDAYS:
        back = (anchor.weekday() - _WEEKDAYS.index(what)) % 7 or (0 if this else 7)
        day = anchor - timedelta(days=back)
        return day, day + timedelta(days=1)
    return _latest_month(MONTHS[what], anchor, include_current=this)
