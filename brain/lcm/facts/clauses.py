"""Cutting a message into clauses worth keeping, and saying them shorter.

A message is cut into sentences, a sentence into clauses at semicolons,
dashes and the conjunctions that start a new statement (", but", ", and I").
A clause loses its opening interjections ("Oh wow, ", "Hey Mel! ") and hedges
("really", "just", "I think"), and relative dates become the calendar dates
they meant, from the message's own time: "yesterday" said on 8 May 2023 is
"on 7 May 2023", "last year" is "in 2022". A summary read a month later, or a
question asking "when", needs the date, not the word.
Tested in tests/brain/lcm/facts/test_clauses.py.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Final

MONTH_NAMES: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

_SENTENCE: Final = re.compile(r"\s*\n\s*|(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])")
_CLAUSE: Final = re.compile(
    r"\s*;\s+|\s+[-\u2013\u2014]+\s+|,\s+(?=(?:but|so|and (?:i|we|he|she|they|it)|which)\b)",
    re.IGNORECASE,
)
# Openers that carry nothing: interjections, thanks, a greeting with the name it
# greets ("Hey Mel!"), reactions ("That's great!" is a whole filler clause).
_OPENER: Final = re.compile(
    r"^(?:(?:(?:hey|hi|hello|thanks|thank you)\s+(?-i:[A-Z][a-z]+)|"
    r"oh+|wow+|hey+|hi+|hello|yeah+|yes|yep|yup|nope|no|well|so|haha+|lol|omg|aww*|ah+|"
    r"hmm+|ok(?:ay)?|alright|sure|cool|nice|great|awesome|amazing|totally|absolutely|"
    r"definitely|thanks?(?: you)?(?: so much)?|thx|congrat(?:s|ulations))\b[\s,!.\u2026:-]*)+",
    re.IGNORECASE,
)
_HEDGES: Final = re.compile(
    r"\b(?:really|just|actually|totally|honestly|basically|literally|definitely|"
    r"so much|super|I think|I guess|you know|kind of|sort of)\b\s*",
    re.IGNORECASE,
)
_SPACES: Final = re.compile(r"\s{2,}")
# Code, commands and paths: backticks, shell and assignment signs, flags, calls, paths.
_CODE: Final = re.compile(r"[`$={}<>|\\]|(?:^|\s)--?\w|\w\(|::|\w/\w|^\s*[#/.~]")
_AGO_OR_ABSOLUTE: Final = re.compile(r"\d")

_WEEKDAYS: Final = "monday tuesday wednesday thursday friday saturday sunday".split()  # noqa: SIM905
_RELATIVE: Final = re.compile(
    r"\b(?:(?P<prep>since|from|until|of|for|in|during|by|before|after)\s+)?"
    r"(?P<what>yesterday|today|tonight|tomorrow|last night|this morning|"
    r"(?:last|this|next|this past) (?:year|month|week|weekend|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b",
    re.IGNORECASE,
)


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, whitespace collapsed, empty ones dropped."""
    out = []
    for raw in _SENTENCE.split(text):
        sentence = " ".join(raw.split())
        if sentence:
            out.append(sentence)
    return out


def clauses(sentence: str) -> list[str]:
    """The clauses of one sentence (at least one when it has any text)."""
    parts = [p.strip(" ,") for p in _CLAUSE.split(sentence)]
    return [p for p in parts if p]


def tidy(clause: str) -> str:
    """``clause`` without its opening interjections and hedges, or "" when that was all
    (hedges stay in code: ``just build`` is a command)."""
    text = _OPENER.sub("", clause).strip()
    if not _CODE.search(text):
        text = _HEDGES.sub("", text)
    text = _SPACES.sub(" ", text).strip(" ,")
    if not text or not any(c.isalnum() for c in text):
        return ""
    return text[0].upper() + text[1:] if text[0].islower() and clause[:1].isupper() else text


_ARTICLES: Final = re.compile(r"\b(?:[Aa]n?|[Tt]he|[Ss]o|[Vv]ery|[Pp]retty|[Qq]uite)\s+(?=[\w\"'])")
_SELF: Final = re.compile(
    r"^(?:I|I've|I'm|I am|I have|I was|I'd|It's|It is|It was|That's|That was|There's|"
    r"There are|There is|This is)\s+(?=\w)"
)
_PHOTO: Final = re.compile(
    r"\[image: (?:a |an )?(?:photography|photo|picture|close up|closeup)(?: of)?\s*([^\]]*)\]"
)


def squeeze(clause: str) -> str:
    """``clause`` in note form: no articles or intensifiers, no opening "I" (the line names
    its speaker), an image shown as "(photo: ...)". Meaning words are never dropped, and
    code is left as written (``git commit -a``, ``a = b``)."""
    if _CODE.search(clause):
        return clause
    text = _PHOTO.sub(lambda m: f"(photo: {m.group(1).strip()})", clause)
    text = _SELF.sub("", text)
    text = _ARTICLES.sub("", text)
    text = _SPACES.sub(" ", text).strip()
    return text or clause


def parse_at(at: str) -> datetime | None:
    """A message's ``created_at`` as a naive datetime (None if it is not ISO-8601)."""
    try:
        moment = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=None)


def day_text(moment: date, *, year: bool = True) -> str:
    """``8 May 2023`` (``8 May`` without the year): how a reader, and a question, says it."""
    text = f"{moment.day} {MONTH_NAMES[moment.month - 1]}"
    return f"{text} {moment.year}" if year else text


def resolve_dates(text: str, at: datetime | None) -> str:
    """``text`` with relative dates ("yesterday", "last year") said as calendar dates."""
    if at is None or _RELATIVE.search(text) is None:
        return text

    def calendar(match: re.Match[str]) -> str:
        prep = match.group("prep")
        what = match.group("what").lower()
        said = _said(what, at)
        if said is None:
            return match.group(0)
        kind, value = said
        if prep:  # "since last year" -> "since 2022"
            return f"{match.group('prep')} {value}"
        return f"{kind} {value}" if kind else value

    return _RELATIVE.sub(calendar, text)


def _said(what: str, at: datetime) -> tuple[str, str] | None:
    """(preposition, calendar phrase) for one relative date said at ``at``."""
    day = at.date()
    if what in ("yesterday", "last night"):
        return "on", day_text(at - timedelta(days=1))
    if what in ("today", "tonight", "this morning"):
        return "on", day_text(at)
    if what == "tomorrow":
        return "on", day_text(at + timedelta(days=1))
    which, unit = what.rsplit(" ", 1)
    if unit == "year":
        offset = {"last": -1, "next": 1}.get(which, 0)
        return "in", str(day.year + offset)
    if unit == "month":
        index = day.month - 1 + {"last": -1, "next": 1}.get(which, 0)
        year, month = day.year + index // 12, index % 12
        return "in", f"{MONTH_NAMES[month]} {year}"
    if unit in ("week", "weekend"):
        if which in ("last", "this past"):
            return "", f"the {unit} before {day_text(at)}"
        if which == "next":
            return "", f"the {unit} after {day_text(at)}"
        return "", f"the {unit} of {day_text(at)}"
    if unit in _WEEKDAYS:
        name = unit.capitalize()
        if which in ("last", "this past"):
            return "", f"the {name} before {day_text(at)}"
        if which == "next":
            return "", f"the {name} after {day_text(at)}"
        return "", f"{name} the week of {day_text(at)}"
    return None


def has_digit(text: str) -> bool:
    """Whether ``text`` carries a number."""
    return _AGO_OR_ABSOLUTE.search(text) is not None
