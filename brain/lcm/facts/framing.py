"""A fact summary's first and last lines: the header, and the ``Expand for details about:`` footer.

The header says the time range, the people and the most mentioned entities
(``8 May 13:56 to 9 June 2023 10:37 | Caroline, Melanie | LGBTQ, Sweden``). The
footer names what the clauses left out mention and the summary does not: their
entities, then the children's own lists, then their repeated or uncommon
words; ``nothing significant omitted`` when only filler was dropped.
Tests: tests/brain/lcm/facts/test_summarizer.py.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Final

from brain.lcm.facts.clauses import day_text, parse_at
from brain.lcm.facts.scoring import Clause
from brain.lcm.facts.words import FILLER_WORDS, rarity, stem, tokens
from brain.lcm.summary_contract import EXPAND_PREFIX, NOTHING_OMITTED, SourceItem, units
from brain.tokens import estimate_tokens

_HEADER_ENTITIES: Final = 4
_HEADER_KINDS: Final = frozenset(("name", "url", "path", "code", "error", "identifier", "version"))
FOOTER_MAX_UNITS: Final = 320
_FOOTER_MAX_TERMS: Final = 10


def span(items: tuple[SourceItem, ...]) -> tuple[datetime | None, datetime | None]:
    """The earliest and latest moments of the source (None when no time parses)."""
    moments = [parse_at(i.at) for i in items] + [
        parse_at(i.earliest_at) for i in items if i.earliest_at
    ]
    known = [m for m in moments if m is not None]
    return (min(known), max(known)) if known else (None, None)


def header(
    start: datetime | None,
    end: datetime | None,
    people: list[str],
    clauses: list[Clause],
    max_tokens: int,
) -> str:
    """``8 May 13:56 to 9 May 2023 10:02 | Caroline, Melanie | Sweden, adoption``."""
    if start is None or end is None:
        return ""
    one_year = start.year == end.year
    first = f"{day_text(start.date(), year=not one_year)} {start:%H:%M}"
    if start.date() == end.date():
        first = f"{day_text(start.date())} {start:%H:%M}"
        when = first if start == end else f"{first} to {end:%H:%M}"
    else:  # "8 May 13:01 to 9 May 2023 13:06": the year once
        when = f"{first} to {day_text(end.date())} {end:%H:%M}"
    parts = [when]
    if people:
        parts.append(", ".join(people[:6]))
    mentions: Counter[str] = Counter(
        written
        for c in clauses
        for kind, written in c.shown
        if kind in _HEADER_KINDS and len(written) <= 40
    )
    top = sorted(mentions, key=lambda t: -mentions[t])[:_HEADER_ENTITIES]
    if top:
        parts.append(", ".join(top))
    line = " | ".join(parts)
    while estimate_tokens(line) > max_tokens // 4 and len(parts) > 1:
        parts.pop()  # the header is at most a quarter of the room
        line = " | ".join(parts)
    return line if estimate_tokens(line) <= max(1, max_tokens // 4) else ""


def footer(
    clauses: list[Clause], inherited: list[str], kept: str, room: int, min_gain: float
) -> str:
    """``Expand for details about:`` what the dropped clauses name that ``kept`` does not,
    within ``room`` units."""
    low = kept.lower()
    kept_words = {stem(t) for t in tokens(low)}
    dropped = [c for c in clauses if not c.picked and c.bonus + sum(c.facts.values()) >= min_gain]
    counts: Counter[str] = Counter()
    order: dict[str, int] = {}
    for clause in dropped:
        for _, written in clause.shown:
            if written.lower() not in low:
                counts[written] += 1
                order.setdefault(written, len(order))
    entities = sorted(counts, key=lambda t: (-counts[t], order[t]))
    children = [t for t in inherited if t.lower() not in low]
    topics: Counter[str] = Counter()
    first: dict[str, str] = {}
    for clause in dropped:
        for token in tokens(clause.text):
            if len(token) < 4 or not token.isalpha() or token in FILLER_WORDS:
                continue
            term = stem(token)
            if f"w:{term}" in clause.facts and term not in kept_words:
                topics[term] += 1
                first.setdefault(term, token)
    # Topics: said more than once, or uncommon words (the detail a reader would
    # expand for); the most mentioned and the rarest first.
    scored = {t: n + 2 * rarity(first[t]) for t, n in topics.items()}
    words = [
        first[t]
        for t in sorted(scored, key=lambda t: -scored[t])
        if topics[t] >= 2 or rarity(first[t]) >= 0.8
    ]
    room -= len(EXPAND_PREFIX)
    picked: list[str] = []
    used = 0
    for raw in (*entities, *children, *words):
        term = raw.strip(" .,;:()[]{}'\"")
        cost = units(term) + (2 if picked else 0)
        if len(term) < 2 or any(term.lower() in p.lower() for p in picked):
            continue
        if used + cost <= room:
            picked.append(term)
            used += cost
        if len(picked) >= _FOOTER_MAX_TERMS:
            break
    if picked:
        return EXPAND_PREFIX + ", ".join(picked)
    if not dropped and not inherited and len(NOTHING_OMITTED) <= room:
        return EXPAND_PREFIX + NOTHING_OMITTED
    return EXPAND_PREFIX + ("earlier details" if room >= 15 else "source")
