"""The clauses a fact summary chooses from: a leaf's messages, or a condensed summary's children.

A message is cut into clauses (``brain.lcm.facts.clauses``), tidied and its
relative dates resolved from its own time; the first clause after another
speaker's question is an answer. A child summary's lines are read back: its
header and footer are not clauses (the footer's terms are inherited by the
new footer), a ``[8 May]`` label gives the day, ``Caroline: a; b | Melanie: c``
the speakers and clauses; lines of other formats are read sentence by sentence.
Tests: tests/brain/lcm/facts/test_summarizer.py.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Final

from brain.lcm.facts.clauses import MONTH_NAMES, clauses, parse_at, resolve_dates, sentences, tidy
from brain.lcm.facts.scoring import ANSWER_BONUS, Clause, Scorer
from brain.lcm.summary_contract import EXPAND_LINE, NOTHING_OMITTED, SourceItem

# Lines of the summaries a condensed summary reads back.
_HEADER: Final = re.compile(
    r"^\d{1,2} [A-Z][a-z]+(?: \d{4})?(?: \d\d:\d\d)?(?: to [^|]*)?(?: \|.*)?$"
)
_DAY_LABEL: Final = re.compile(r"^\[(\d{1,2} [A-Za-z]+(?: \d{4})?)\]\s*")
_TURN: Final = re.compile(r"^([^:\[\]\n|;]{1,40}): (.+)$")
_LABEL: Final = re.compile(r"^(\d{1,2}) ([A-Za-z]+)(?: (\d{4}))?$")
_FOREIGN_PREFIX: Final = re.compile(r"^(?:\[[^\]]{0,40}\]\s*(?:\w+:\s*)?|[-*\u2022]\s+|#+\s+)+")


def read_messages(items: tuple[SourceItem, ...], scorer: Scorer) -> list[Clause]:
    """The clauses of a leaf's messages, in order."""
    out: list[Clause] = []
    asker: str | None = None  # speaker of the last message ending in "?"
    for index, item in enumerate(items):
        speaker = item.name or item.role
        scorer.person(speaker)
        at = parse_at(item.at)
        answering = asker is not None and asker != speaker
        first = True
        for sentence in sentences(item.text):
            for raw in clauses(sentence):
                text = tidy(resolve_dates(raw, at))
                if not text:
                    continue
                bonus = ANSWER_BONUS if answering and first else 0.0
                _add(out, scorer, index, text, at.date() if at else None, speaker, bonus)
                first = False
        asker = speaker if item.text.rstrip().endswith("?") else None
    return out


def read_children(items: tuple[SourceItem, ...], scorer: Scorer) -> tuple[list[Clause], list[str]]:
    """The clauses of a condensed summary's children, in order, and the terms their
    footers list (what they left out)."""
    out: list[Clause] = []
    inherited: list[str] = []
    for index, item in enumerate(items):
        at = parse_at(item.at)
        earliest = parse_at(item.earliest_at) if item.earliest_at else at
        fallback = (
            at.date()
            if at is not None and earliest is not None and (earliest.date() == at.date())
            else None
        )
        for number, raw in enumerate(item.text.split("\n")):
            line = raw.strip()
            if not line:
                continue
            expand = EXPAND_LINE.match(line)
            if expand:
                inherited.extend(_split_terms(expand.group(1)))
                continue
            if number == 0 and _HEADER.match(line):
                continue
            label_match = _DAY_LABEL.match(line)
            day = fallback
            if label_match:
                day = _label_day(label_match.group(1), at)
                line = line[label_match.end() :]
            for turn in line.split(" | "):
                match = _TURN.match(turn)
                if match is None:
                    for text in sentences(_FOREIGN_PREFIX.sub("", turn)):
                        _add(out, scorer, index, text, day, None, 0.0)
                    continue
                speaker = match.group(1)
                scorer.person(speaker)
                for piece in match.group(2).split("; "):
                    if piece.strip():
                        _add(out, scorer, index, piece.strip(), day, speaker, 0.0)
    return out, inherited


def _add(
    out: list[Clause],
    scorer: Scorer,
    source: int,
    text: str,
    day: date | None,
    speaker: str | None,
    bonus: float,
) -> None:
    clause = scorer.clause(len(out), source, text, day, speaker, bonus)
    if clause is not None:
        out.append(clause)


def _label_day(label: str, at: datetime | None) -> date | None:
    """The day a child's line label names (``8 May`` or ``8 May 2023``; the year from
    the child's time when the label has none)."""
    match = _LABEL.match(label)
    if match is None:
        return at.date() if at is not None else None
    day, month, year = match.groups()
    months = [m.lower() for m in MONTH_NAMES]
    if month.lower() not in months:
        return at.date() if at is not None else None
    number = months.index(month.lower()) + 1
    guess = int(year) if year else (at.year if at is not None else None)
    if guess is None:
        return None
    if not year and at is not None and number > at.month:
        guess -= 1  # "20 Dec" in a summary ending in January
    try:
        return date(guess, number, int(day))
    except ValueError:
        return None


def _split_terms(listing: str) -> list[str]:
    if listing.strip().lower() in (NOTHING_OMITTED, "earlier details", "source", ""):
        return []
    return [t.strip() for t in listing.split(",") if t.strip()]
