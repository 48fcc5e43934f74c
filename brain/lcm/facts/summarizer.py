"""The fact summarizer: the offline default, keeping what later questions ask about.

Who, what, when, how many, which file, which decision: a summary is worth its
tokens when it keeps those. :class:`FactSummarizer` cuts the source into
clauses (``brain.lcm.facts.clauses``), weighs each by the facts it carries and
picks clauses greedily by new facts per token until the budget is spent:

- a *fact* is an entity (``brain.lcm.entities.extract``: names, dates,
  quantities, paths, commands, errors, versions, identifiers) or a content
  word (``brain.lcm.facts.words``: stemmed, stop words and reactions dropped);
- a fact counts once per summary, so a second clause saying the same thing
  gains nothing (deduplication across the chunk comes from this);
- a fact said in few of the chunk's messages (or few children, for a condensed
  summary) weighs more than one said everywhere: the rare detail is the one a
  question will be about, the topic is in the header anyway;
- decisions and commitments, errors and fixes, and the answer to a question
  (the first clause after another speaker's question) get a bonus; a clause
  carrying no fact (greetings, reactions, thanks) is never taken.

Output: a header line (time range, people, the most mentioned entities), then
one line per message that contributed, ``[8 May 2023] Caroline: clause; clause``
(the date only when the chunk spans days; the speaker is the message's
``name`` when it has one), chronological, and the ``Expand for details
about:`` footer naming entities and topics of the clauses left out that the
summary does not mention. A condensed summary reads its children's lines back
as clauses (speaker and date kept) and selects among them the same way.

The budget is the one every offline summarizer shares (``offline_budget``).
Deterministic: ties go to the earlier clause. Tests: tests/brain/lcm/facts/.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from brain.lcm.entities.extract import extract
from brain.lcm.facts.clauses import clauses, day_text, parse_at, resolve_dates, sentences, tidy
from brain.lcm.facts.words import FILLER_WORDS, STOP_WORDS, stem, terms, tokens
from brain.lcm.summary_contract import (
    EXPAND_LINE,
    EXPAND_PREFIX,
    FOOTER_MIN_TOKENS,
    NOTHING_OMITTED,
    TINY_INPUT_TOKENS,
    SourceItem,
    SummaryRequest,
    clip_text,
    input_tokens,
    offline_budget,
    truncate_source,
    units,
    verbatim,
)
from brain.tokens import estimate_tokens

__all__ = ["FactSummarizer"]


class FactSummarizer:
    """Deterministic, model-free summaries that keep the facts (see the module doc)."""

    name = "facts"

    def summarize(self, request: SummaryRequest) -> str:
        """Return the summary of ``request`` (never raises for valid requests)."""
        source = input_tokens(request)
        if source <= TINY_INPUT_TOKENS:
            return verbatim(request, min(source, request.target_tokens))
        budget = offline_budget(request)
        if budget < FOOTER_MIN_TOKENS:
            return truncate_source(request, budget)
        text = _Summary(request).render(budget * 4)
        if estimate_tokens(text) > budget:  # units bound the estimate; kept as a guard
            return truncate_source(request, budget)
        return text


# -- weights --------------------------------------------------------------------------------

_ENTITY_WEIGHT: Final = {
    "url": 2.5,
    "path": 2.5,
    "code": 2.5,
    "error": 2.5,
    "version": 2.0,
    "date": 2.5,
    "quantity": 2.0,
    "identifier": 2.0,
    "name": 2.0,
}
_WORD_WEIGHT: Final = 1.0
_PRESENT_NAME_WEIGHT: Final = 0.25  # the people talking are in the header already
_RARE_BONUS: Final = 0.5  # a fact in one message weighs 1.5x, in many about 1x
_DECISION_BONUS: Final = 1.5
_ERROR_BONUS: Final = 1.5
_ANSWER_BONUS: Final = 1.0
_MIN_GAIN: Final = 1.5  # below this a clause says nothing new worth a line
_AGGRESSIVE_MIN_GAIN: Final = 3.0
_COST_PAD: Final = 24  # units: favours fuller clauses over fragments at equal density
_CLIP: Final = 300  # characters of one clause (a pasted log line is not a fact)
_HEADER_ENTITIES: Final = 4
_FOOTER_MAX_UNITS: Final = 320
_FOOTER_MAX_TERMS: Final = 10

_DECISION: Final = re.compile(
    r"\b(?:decid\w*|decision|we'll|we will|i'll|i will|will|won't|agreed|let's|plan\w*|"
    r"going to|gonna|need to|must|todo|deadline|chose|choose|approv\w*|commit to|next step)\b",
    re.IGNORECASE,
)
_ERROR: Final = re.compile(
    r"\b(?:error|exception|fail\w*|traceback|crash\w*|panic|denied|not found|broken|bug|"
    r"fix\w*|resolv\w*|workaround|solved|patch\w*)\b",
    re.IGNORECASE,
)
# Lines of the summaries a condensed summary reads back.
_HEADER: Final = re.compile(r"^\d{1,2} [A-Z][a-z]+ \d{4}(?: \d\d:\d\d)?(?: to [^|]*)?(?: \|.*)?$")
_LINE: Final = re.compile(r"^(?:\[(?P<date>[^\]]{1,40})\]\s*)?(?:(?P<who>[^:\[\]\n]{1,40}): )?(?P<body>.+)$")
_VOCATIVE: Final = re.compile(r",\s*([A-Z][a-z]+)\s*[.!?\u2026]*$")
_FOREIGN_PREFIX: Final = re.compile(r"^(?:\[[^\]]{0,40}\]\s*(?:\w+:\s*)?|[-*\u2022]\s+|#+\s+)+")


@dataclass(slots=True)
class _Clause:
    group: int  # the output line it belongs to
    pos: int  # chronological position in the source
    text: str
    size: int  # units (quarter tokens)
    facts: dict[str, float]  # fact key -> weight (rarity applied later)
    bonus: float
    shown: list[tuple[str, str]]  # (fact key, how it reads) of entities, for the footer


@dataclass(slots=True)
class _Group:
    prefix: str
    speaker: str | None
    picked: list[_Clause] = field(default_factory=list)


class _Summary:
    """One summary in the making: clauses weighed, then picked under a budget (units)."""

    def __init__(self, request: SummaryRequest) -> None:
        self.request = request
        self.condensed = request.kind == "condensed" or request.depth >= 1
        self.min_gain = _AGGRESSIVE_MIN_GAIN if request.aggressive else _MIN_GAIN
        self.groups: list[_Group] = []
        self.clauses: list[_Clause] = []
        self.inherited: list[str] = []
        self.people: list[str] = []
        self.mentions: Counter[str] = Counter()  # entity shown form -> mentions
        self.start, self.end = _span(request.items)
        self.spans_days = self.start is not None and self.end is not None and (
            self.start.date() != self.end.date()
        )
        if self.condensed:
            self._read_children()
        else:
            self._read_messages()
        self._weigh()

    # -- reading ------------------------------------------------------------------------

    def _read_messages(self) -> None:
        previous_question: str | None = None  # speaker of the last message ending in "?"
        for item in self.request.items:
            speaker = item.name or item.role
            self._person(speaker)
            at = parse_at(item.at)
            date = f"[{day_text(at)}] " if at is not None and self.spans_days else ""
            group = len(self.groups)
            self.groups.append(_Group(f"{date}{speaker}: ", speaker))
            answering = previous_question is not None and previous_question != speaker
            first = True
            for sentence in sentences(item.text):
                for raw in clauses(sentence):
                    text = tidy(resolve_dates(raw, at))
                    if not text:
                        continue
                    bonus = _ANSWER_BONUS if answering and first else 0.0
                    self._add(group, text, bonus)
                    first = False
            text = item.text.rstrip()
            previous_question = speaker if text.endswith("?") else None

    def _read_children(self) -> None:
        for item in self.request.items:
            at = parse_at(item.at)
            earliest = parse_at(item.earliest_at) if item.earliest_at else at
            one_day = at is not None and earliest is not None and earliest.date() == at.date()
            default_date = day_text(at) if at is not None and one_day else None
            keys: dict[tuple[str | None, str | None], int] = {}
            for number, raw in enumerate(item.text.split("\n")):
                line = raw.strip()
                if not line:
                    continue
                expand = EXPAND_LINE.match(line)
                if expand:
                    self.inherited.extend(_split_terms(expand.group(1)))
                    continue
                if number == 0 and _HEADER.match(line):
                    continue
                match = _LINE.match(line)
                date, speaker, body = (
                    (match.group("date"), match.group("who"), match.group("body"))
                    if match
                    else (None, None, line)
                )
                if speaker is None:
                    body = _FOREIGN_PREFIX.sub("", line)
                date = date or default_date
                if speaker:
                    self._person(speaker)
                key = (date, speaker)
                if key not in keys:
                    keys[key] = len(self.groups)
                    label = f"[{date}] " if date else ""
                    who = f"{speaker}: " if speaker else ""
                    self.groups.append(_Group(label + who, speaker))
                pieces = body.split("; ") if speaker else sentences(body)
                for piece in pieces:
                    text = piece.strip()
                    if text:
                        self._add(keys[key], text, 0.0)

    def _person(self, speaker: str) -> None:
        if speaker not in self.people:
            self.people.append(speaker)

    def _add(self, group: int, text: str, bonus: float) -> None:
        text = clip_text(text, _CLIP)
        facts: dict[str, float] = {}
        shown: list[tuple[str, str]] = []
        text = self._unaddressed(text)
        if not text:
            return
        for mention in extract(text):
            key = f"{mention.kind}:{mention.key}"
            weight = _ENTITY_WEIGHT.get(mention.kind, 2.0)
            if mention.kind == "name":
                if not self._is_name(mention.key, mention.start):
                    continue  # a capitalised opener ("That's", "Anything"): its words count
                if self._present(mention.key):
                    weight = _PRESENT_NAME_WEIGHT
            if weight > _PRESENT_NAME_WEIGHT:
                shown.append((key, mention.text))
                self.mentions[mention.text] += 1
            facts[key] = max(facts.get(key, 0.0), weight)
        for term in terms(text):
            facts.setdefault(f"w:{term}", _WORD_WEIGHT)
        if _DECISION.search(text):
            bonus += _DECISION_BONUS
        if _ERROR.search(text):
            bonus += _ERROR_BONUS
        self.clauses.append(_Clause(group, len(self.clauses), text, units(text), facts, bonus, shown))

    def _present(self, key: str) -> bool:
        """Whether a name is one of the people talking (or a short form of one: "Mel")."""
        return any(
            p.casefold() == key or (len(key) >= 3 and p.casefold().startswith(key))
            for p in self.people
        )

    @staticmethod
    def _is_name(key: str, start: int) -> bool:
        if "'" in key or "\u2019" in key or key in STOP_WORDS or key in FILLER_WORDS:
            return False
        return start > 0 or " " in key

    def _unaddressed(self, text: str) -> str:
        """``text`` without a vocative naming someone present ("Thanks, Mel!" -> "Thanks")."""
        match = _VOCATIVE.search(text)
        if match and self._present(match.group(1).casefold()):
            text = text[: match.start()].rstrip(" ,")
        return text if any(c.isalnum() for c in text) else ""

    def _weigh(self) -> None:
        """Rarer facts weigh more: by the share of lines (messages, children) saying them."""
        said_in: dict[str, set[int]] = {}
        for clause in self.clauses:
            for key in clause.facts:
                said_in.setdefault(key, set()).add(clause.group)
        for clause in self.clauses:
            for key, weight in clause.facts.items():
                clause.facts[key] = weight * (1.0 + _RARE_BONUS / len(said_in[key]))

    # -- choosing -----------------------------------------------------------------------

    def render(self, budget: int) -> str:
        """The summary within ``budget`` units (at least the footer minimum)."""
        reserve = min(_FOOTER_MAX_UNITS, max(FOOTER_MIN_TOKENS * 4 + 4, budget // 6))
        header = self._header(max(0, (budget - reserve) // 4))
        room = budget - reserve - (units(header) + 1 if header else 0)
        self._pick(room)
        lines = [header] if header else []
        for group in self.groups:
            if group.picked:
                group.picked.sort(key=lambda c: c.pos)
                lines.append(group.prefix + "; ".join(c.text for c in group.picked))
        text = "\n".join(lines)
        footer = self._footer(text, budget - units(text) - (1 if text else 0))
        return f"{text}\n{footer}" if text else footer

    def _pick(self, room: int) -> None:
        """Greedy by new fact weight per unit, lazily re-evaluated (facts count once)."""
        covered: set[str] = set()
        previous = (self.request.previous or "").lower()
        seen: set[str] = set()
        heap: list[tuple[float, int]] = []
        for clause in self.clauses:
            low = clause.text.lower()
            if low in seen or (len(low) >= 24 and low in previous):
                continue  # said already, here or in the previous summary
            seen.add(low)
            gain = self._gain(clause, covered)
            if gain >= self.min_gain:
                heap.append((-gain / self._cost(clause), clause.pos))
        heapq.heapify(heap)
        spent = 0
        while heap and spent < room:
            _, pos = heapq.heappop(heap)
            clause = self.clauses[pos]
            gain = self._gain(clause, covered)
            if gain < self.min_gain:
                continue
            density = gain / self._cost(clause)
            if heap and density < -heap[0][0] - 1e-12:
                heapq.heappush(heap, (-density, pos))  # stale: covered facts since
                continue
            cost = self._size(clause)
            if spent + cost > room:
                continue
            spent += cost
            covered.update(clause.facts)
            clause.bonus = 0.0
            self.groups[clause.group].picked.append(clause)

    def _gain(self, clause: _Clause, covered: set[str]) -> float:
        return clause.bonus + sum(w for k, w in clause.facts.items() if k not in covered)

    def _size(self, clause: _Clause) -> int:
        """What taking the clause adds to the text: itself and "; ", or a new line."""
        group = self.groups[clause.group]
        if group.picked:
            return clause.size + 2
        return clause.size + units(group.prefix) + 1

    def _cost(self, clause: _Clause) -> float:
        return float(self._size(clause) + _COST_PAD)

    # -- header and footer -------------------------------------------------------------

    def _header(self, max_tokens: int) -> str:
        """``8 May 2023 13:56 to 9 May 2023 10:02 | Caroline, Melanie | Sweden, adoption``."""
        if self.start is None or self.end is None:
            return ""
        start = f"{day_text(self.start)} {self.start:%H:%M}"
        if self.start.date() == self.end.date():
            span = start if self.start == self.end else f"{start} to {self.end:%H:%M}"
        else:
            span = f"{start} to {day_text(self.end)} {self.end:%H:%M}"
        parts = [span]
        if self.people:
            parts.append(", ".join(self.people[:6]))
        top = [e for e, _ in sorted(self.mentions.items(), key=lambda kv: -kv[1])]
        if top:
            parts.append(", ".join(t for t in top[:_HEADER_ENTITIES] if len(t) <= 40))
        header = " | ".join(p for p in parts if p)
        while estimate_tokens(header) > max_tokens // 4 and len(parts) > 1:
            parts.pop()  # the header is at most a quarter of the room
            header = " | ".join(parts)
        return header if estimate_tokens(header) <= max(1, max_tokens // 4) else ""

    def _footer(self, kept: str, room: int) -> str:
        """``Expand for details about:`` what the dropped clauses name that ``kept`` does not."""
        low = kept.lower()
        kept_words = {stem(t) for t in tokens(low)}
        dropped = [
            c for c in self.clauses if c not in self.groups[c.group].picked and c.facts
        ]
        counts: Counter[str] = Counter()
        order: dict[str, int] = {}
        for clause in dropped:
            for _, written in clause.shown:
                if written.lower() not in low:
                    counts[written] += 1
                    order.setdefault(written, len(order))
        entities = sorted(counts, key=lambda t: (-counts[t], order[t]))
        inherited = [t for t in self.inherited if t.lower() not in low]
        topics: Counter[str] = Counter()
        first: dict[str, str] = {}
        for clause in dropped:
            for token in tokens(clause.text):
                if len(token) < 5 or not token.isalpha():
                    continue
                term = stem(token)
                if f"w:{term}" in clause.facts and term not in kept_words:
                    topics[term] += 1
                    first.setdefault(term, token)
        words = [first[t] for t, n in sorted(topics.items(), key=lambda kv: -kv[1]) if n >= 2]
        room -= len(EXPAND_PREFIX)
        picked: list[str] = []
        used = 0
        for term in (*entities, *inherited, *words):
            term = term.strip(" .,;:()[]{}'\"")
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
        if not dropped and not self.inherited and len(NOTHING_OMITTED) <= room:
            return EXPAND_PREFIX + NOTHING_OMITTED
        return EXPAND_PREFIX + ("earlier details" if room >= 15 else "source")


def _span(items: tuple[SourceItem, ...]) -> tuple[datetime | None, datetime | None]:
    moments = [parse_at(i.at) for i in items] + [
        parse_at(i.earliest_at) for i in items if i.earliest_at
    ]
    known = [m for m in moments if m is not None]
    return (min(known), max(known)) if known else (None, None)


def _split_terms(listing: str) -> list[str]:
    if listing.strip().lower() in (NOTHING_OMITTED, "earlier details", "source", ""):
        return []
    return [t.strip() for t in listing.split(",") if t.strip()]
