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

import bisect
import heapq
import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime
from typing import Final

from brain.lcm.entities.extract import extract
from brain.lcm.facts.clauses import (
    MONTH_NAMES,
    clauses,
    day_text,
    parse_at,
    resolve_dates,
    sentences,
    squeeze,
    tidy,
)
from brain.lcm.facts.words import FILLER_WORDS, STOP_WORDS, rarity, stem, terms, tokens
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
_NUMBER_WEIGHT: Final = 2.0
_RARE_WORD: Final = 1.0  # an uncommon English word weighs up to this much more
_FILLER_WEIGHT: Final = 0.25  # reactions: rarely the point, sometimes the answer ("happy")
_PRESENT_NAME_WEIGHT: Final = 0.25  # the people talking are in the header already
_RARE_BONUS: Final = 0.5  # condensed: a fact of one child weighs 1.5x, of all about 1x
_REPORT_BONUS: Final = 2.0
_ADDRESSED_PENALTY: Final = 0.5
_DECISION_BONUS: Final = 1.5
_ERROR_BONUS: Final = 1.5
_ANSWER_BONUS: Final = 1.0
_MIN_DENSITY: Final = 1 / 2 / 4  # plain words: at least one fact weight per two tokens
_MIN_GAIN: Final = 1.5  # below this a clause says nothing new worth a line
_AGGRESSIVE_MIN_GAIN: Final = 3.0
_COST_PAD: Final = 24  # units: favours fuller clauses over fragments at equal density
_MIN_CLIPPED: Final = 40  # units: a cut clause shorter than this says nothing
_CLIP: Final = 300  # characters of one clause (a pasted log line is not a fact)
_HEADER_ENTITIES: Final = 4
_FOOTER_MAX_UNITS: Final = 320
_FOOTER_MAX_TERMS: Final = 10

_DECISION: Final = re.compile(
    r"\b(?:decid\w*|decision|we'll|we will|i'll|i will|will|won't|agreed|let's|plan\w*|"
    r"going to|gonna|need to|must|todo|deadline|chose|choose|approv\w*|commit to|next step)\b",
    re.IGNORECASE,
)
_REPORT: Final = re.compile(r"\b(?:I|I'm|I've|I'd|we|we've|my|our|me|us)\b", re.IGNORECASE)
_DONE: Final = re.compile(
    r"\b(?:\w{3,}ed|went|got|made|took|gave|found|bought|saw|met|won|ran|began|began|started|"
    r"built|wrote|read|lost|left|came|had|did|sold|paid|drove|flew|became|chose|kept|"
    r"have|has|own|live|work|collect|use|play|since|ago|last|on \d)\b",
    re.IGNORECASE,
)
_ADDRESSED: Final = re.compile(
    r"^(?:you|you're|you'd|you've|your|that's|it's|sounds)\b", re.IGNORECASE
)
_ERROR: Final = re.compile(
    r"\b(?:error|exception|fail\w*|traceback|crash\w*|panic|denied|not found|broken|bug|"
    r"fix\w*|resolv\w*|workaround|solved|patch\w*)\b",
    re.IGNORECASE,
)
# Lines of the summaries a condensed summary reads back.
_HEADER: Final = re.compile(
    r"^\d{1,2} [A-Z][a-z]+(?: \d{4})?(?: \d\d:\d\d)?(?: to [^|]*)?(?: \|.*)?$"
)
_DAY_LABEL: Final = re.compile(r"^\[(\d{1,2} [A-Za-z]+(?: \d{4})?)\]\s*")
_TURN: Final = re.compile(r"^([^:\[\]\n|;]{1,40}): (.+)$")
_LABEL: Final = re.compile(r"^(\d{1,2}) ([A-Za-z]+)(?: (\d{4}))?$")
_HEADER_KINDS: Final = frozenset(("name", "url", "path", "code", "error", "identifier", "version"))
# Names joined by slashes ("vault/ci/7", "feature/login"): one thing, not three words.
_SLASHED: Final = re.compile(r"(?<![\w/])[\w.-]+(?:/[\w.-]+)+")
_VOCATIVE: Final = re.compile(r",\s*([A-Z][a-z]+)\s*[.!?\u2026]*$")
_FOREIGN_PREFIX: Final = re.compile(r"^(?:\[[^\]]{0,40}\]\s*(?:\w+:\s*)?|[-*\u2022]\s+|#+\s+)+")


@dataclass(slots=True)
class _Clause:
    pos: int  # chronological position in the source
    text: str
    size: int  # units (quarter tokens)
    day: date | None
    speaker: str | None
    facts: dict[str, float]  # fact key -> weight (rarity applied by _weigh)
    bonus: float
    shown: list[tuple[str, str]]  # (kind, how it reads) of entities, for header and footer
    source: int  # the message (leaf) or child (condensed) it came from
    picked: bool = False


class _Summary:
    """One summary in the making: clauses weighed, then picked under a budget (units)."""

    def __init__(self, request: SummaryRequest) -> None:
        self.request = request
        self.condensed = request.kind == "condensed" or request.depth >= 1
        self.min_gain = _AGGRESSIVE_MIN_GAIN if request.aggressive else _MIN_GAIN
        self.clauses: list[_Clause] = []
        self.inherited: list[str] = []
        self.people: list[str] = []
        self._runs: dict[tuple[date | None, str | None], bool] = {}
        self._days: dict[date | None, bool] = {}
        self._any = False
        self.start, self.end = _span(request.items)
        if self.condensed:
            self._read_children()
        else:
            self._read_messages()
        days = {c.day for c in self.clauses if c.day is not None}
        self.dated = len(days) > 1
        self.with_year = len({d.year for d in days}) > 1
        self._weigh()

    # -- reading ------------------------------------------------------------------------

    def _read_messages(self) -> None:
        asker: str | None = None  # speaker of the last message ending in "?"
        for index, item in enumerate(self.request.items):
            speaker = item.name or item.role
            self._person(speaker)
            at = parse_at(item.at)
            answering = asker is not None and asker != speaker
            first = True
            for sentence in sentences(item.text):
                for raw in clauses(sentence):
                    text = tidy(resolve_dates(raw, at))
                    if not text:
                        continue
                    bonus = _ANSWER_BONUS if answering and first else 0.0
                    self._add(index, text, at.date() if at else None, speaker, bonus)
                    first = False
            asker = speaker if item.text.rstrip().endswith("?") else None

    def _read_children(self) -> None:
        for index, item in enumerate(self.request.items):
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
                    self.inherited.extend(_split_terms(expand.group(1)))
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
                            self._add(index, text, day, None, 0.0)
                        continue
                    speaker = match.group(1)
                    self._person(speaker)
                    for piece in match.group(2).split("; "):
                        if piece.strip():
                            self._add(index, piece.strip(), day, speaker, 0.0)

    def _person(self, speaker: str) -> None:
        if speaker not in self.people:
            self.people.append(speaker)

    def _add(
        self, source: int, text: str, day: date | None, speaker: str | None, bonus: float
    ) -> None:
        text = self._unaddressed(text)
        if not text:
            return
        if _REPORT.search(text) and _DONE.search(text):
            bonus += _REPORT_BONUS  # what someone did or has: "I set up a 5K charity run"
        elif _ADDRESSED.search(text):
            bonus -= _ADDRESSED_PENALTY  # remarks on the listener: "You'd be a great counselor"
        if not self.condensed:
            text = squeeze(text)
        text = clip_text(text, _CLIP).rstrip(".!;, ")
        if not text:
            return
        facts: dict[str, float] = {}
        shown: list[tuple[str, str]] = []
        for mention in extract(text):
            key = f"{mention.kind}:{mention.key}"
            weight = _ENTITY_WEIGHT.get(mention.kind, 2.0)
            if mention.kind == "name":
                if not self._is_name(mention.key, mention.start):
                    continue  # a capitalised opener ("That's", "Anything"): its words count
                if self._present(mention.key):
                    weight = _PRESENT_NAME_WEIGHT
            if weight > _PRESENT_NAME_WEIGHT:
                shown.append((mention.kind, mention.text))
            facts[key] = max(facts.get(key, 0.0), weight)
        for token in tokens(text):
            if (
                token in STOP_WORDS
                or token in FILLER_WORDS
                or (len(token) < 3 and not token.isdigit())
            ):
                continue
            if token.isalpha():
                weight = _WORD_WEIGHT * (1.0 + _RARE_WORD * rarity(token))
                key = f"w:{stem(token)}"
            else:
                weight = _NUMBER_WEIGHT  # "3", "10k", "v2": how many, which one
                key = f"number:{token}"
            facts[key] = max(facts.get(key, 0.0), weight)
        for name in _SLASHED.findall(text):
            key = f"path:{name.casefold()}"
            if key not in facts:
                facts[key] = _ENTITY_WEIGHT["path"]
                shown.append(("path", name))
        for term in terms(text, filler=True):
            facts.setdefault(f"w:{term}", _FILLER_WEIGHT)
        if _DECISION.search(text):
            bonus += _DECISION_BONUS
        if _ERROR.search(text):
            bonus += _ERROR_BONUS
        if not any(w >= _WORD_WEIGHT for w in facts.values()):
            bonus = min(bonus, 0.0)  # a reaction is no report, decision or answer
        self.clauses.append(
            _Clause(len(self.clauses), text, units(text), day, speaker, facts, bonus, shown, source)
        )

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
        """In a condensed summary a fact of few children weighs more than one of many: the
        topics are everyone's, the rare detail is what one child alone still holds. (In a
        leaf, rarity is the word's own: ``rarity`` in ``_add``.)"""
        if not self.condensed:
            return
        said_in: dict[str, set[int]] = {}
        for clause in self.clauses:
            for key in clause.facts:
                said_in.setdefault(key, set()).add(clause.source)
        for clause in self.clauses:
            for key, weight in clause.facts.items():
                clause.facts[key] = weight * (1.0 + _RARE_BONUS / len(said_in[key]))

    # -- lines --------------------------------------------------------------------------

    def _joint(self, before: _Clause | None, clause: _Clause) -> str:
        """What goes between two consecutive picked clauses (``before`` None: the first).

        When the summary spans days there is a line per day, ``[8 May] Caroline: a; b |
        Melanie: c``; otherwise a line per speaker turn, ``Caroline: a; b``. A clause
        without a speaker (a foreign child summary's line) is shown bare."""
        who = f"{clause.speaker}: " if clause.speaker else ""
        if self.dated:
            day = f"[{day_text(clause.day, year=self.with_year)}] " if clause.day else ""
            if before is None:
                return day + who
            if before.day != clause.day:
                return "\n" + day + who
            if before.speaker == clause.speaker:
                return "; "
            return " | " + who
        if before is None:
            return who
        if before.speaker == clause.speaker:
            return "; "
        return "\n" + who

    def _size(self, clause: _Clause, before: _Clause | None, after: _Clause | None) -> int:
        """What inserting ``clause`` between picked neighbours adds to the text, exactly."""
        if self.dated:
            # A line per day, a run per speaker within it: "[8 May] A: x; y | B: z".
            if self._runs.get((clause.day, clause.speaker)):
                return clause.size + 2
            who = units(f"{clause.speaker}: ") if clause.speaker else 0
            if self._days.get(clause.day):
                return clause.size + 3 + who
            label = units(f"[{day_text(clause.day, year=self.with_year)}] ") if clause.day else 0
            return clause.size + (1 if self._any else 0) + label + who
        added = units(self._joint(before, clause)) + clause.size
        if after is not None:
            added += units(self._joint(clause, after)) - units(self._joint(before, after))
        return added

    def _dated_body(self, picked: list[_Clause]) -> str:
        """The picked clauses as day lines, each speaker's run in order of first pick time."""
        days: dict[date | None, dict[str | None, list[str]]] = {}
        for clause in picked:
            days.setdefault(clause.day, {}).setdefault(clause.speaker, []).append(clause.text)
        lines = []
        for day, runs in days.items():
            label = f"[{day_text(day, year=self.with_year)}] " if day else ""
            turns = [(f"{who}: " if who else "") + "; ".join(texts) for who, texts in runs.items()]
            lines.append(label + " | ".join(turns))
        return "\n".join(lines)

    # -- choosing -----------------------------------------------------------------------

    def render(self, budget: int) -> str:
        """The summary within ``budget`` units (at least the footer minimum)."""
        reserve = min(_FOOTER_MAX_UNITS, max(FOOTER_MIN_TOKENS * 4 + 4, budget // 6))
        header = self._header(max(0, (budget - reserve) // 4))
        room = budget - reserve - (units(header) + 1 if header else 0)
        picked = self._pick(room)
        if self.dated:
            body = self._dated_body(picked)
        else:
            parts: list[str] = []
            before: _Clause | None = None
            for clause in picked:
                parts += (self._joint(before, clause), clause.text)
                before = clause
            body = "".join(parts)
        text = "\n".join(t for t in (header, body) if t)
        footer = self._footer(text, budget - units(text) - (1 if text else 0))
        return f"{text}\n{footer}" if text else footer

    def _pick(self, room: int) -> list[_Clause]:
        """Greedy by new fact weight per unit, lazily re-evaluated (facts count once);
        the clauses picked, in order."""
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
                cost = clause.size + units(self._joint(None, clause)) + 1 + _COST_PAD
                heap.append((-gain / cost, clause.pos))
        heapq.heapify(heap)
        order: list[int] = []  # picked positions, sorted
        spent = 0
        while heap and spent < room:
            _, pos = heapq.heappop(heap)
            clause = self.clauses[pos]
            gain = self._gain(clause, covered)
            if gain < self.min_gain:
                continue
            at = bisect.bisect(order, pos)
            before = self.clauses[order[at - 1]] if at else None
            after = self.clauses[order[at]] if at < len(order) else None
            size = self._size(clause, before, after)
            density = gain / (size + _COST_PAD)
            if heap and density < -heap[0][0] - 1e-12:
                heapq.heappush(heap, (-density, pos))  # stale: facts covered since
                continue
            if spent + size > room:
                continue
            if order and gain < _MIN_DENSITY * size and self._plain(clause, covered):
                continue  # says too little for its tokens (but a summary says something)
            spent += size
            covered.update(clause.facts)
            clause.picked = True
            self._any = True
            self._runs[(clause.day, clause.speaker)] = True
            self._days[clause.day] = True
            order.insert(at, pos)
        if not order:
            self._clipped(room, covered)
            order = [c.pos for c in self.clauses if c.picked]
        return [self.clauses[p] for p in order]

    def _clipped(self, room: int, covered: set[str]) -> None:
        """When no clause fits whole, the best one cut to the room: a summary says something."""
        best = max(
            (c for c in self.clauses if self._gain(c, covered) >= self.min_gain),
            key=lambda c: (self._gain(c, covered), -c.pos),
            default=None,
        )
        if best is None:
            return
        avail = room - units(self._joint(None, best)) - 1
        if avail < _MIN_CLIPPED:
            return
        text = clip_text(best.text, avail)
        while text and units(text) > avail:  # non-ASCII text costs more than its length
            text = clip_text(text[:-1], len(text) - 2)
        if text:
            best.text, best.size, best.picked = text, units(text), True

    @staticmethod
    def _plain(clause: _Clause, covered: set[str]) -> bool:
        """Whether all the clause adds is words: no new name, number, date or path."""
        return all(k.startswith("w:") for k in clause.facts if k not in covered)

    def _gain(self, clause: _Clause, covered: set[str]) -> float:
        return clause.bonus + sum(w for k, w in clause.facts.items() if k not in covered)

    # -- header and footer -------------------------------------------------------------

    def _header(self, max_tokens: int) -> str:
        """``8 May 13:56 to 9 May 2023 10:02 | Caroline, Melanie | Sweden, adoption``."""
        if self.start is None or self.end is None:
            return ""
        one_year = self.start.year == self.end.year
        start = f"{day_text(self.start.date(), year=not one_year)} {self.start:%H:%M}"
        if self.start.date() == self.end.date():
            start = f"{day_text(self.start.date())} {self.start:%H:%M}"
            span = start if self.start == self.end else f"{start} to {self.end:%H:%M}"
        else:  # "8 May 13:01 to 9 May 2023 13:06": the year once
            span = f"{start} to {day_text(self.end.date())} {self.end:%H:%M}"
        parts = [span]
        if self.people:
            parts.append(", ".join(self.people[:6]))
        mentions: Counter[str] = Counter(
            written
            for c in self.clauses
            for kind, written in c.shown
            if kind in _HEADER_KINDS and len(written) <= 40
        )
        top = sorted(mentions, key=lambda t: -mentions[t])[:_HEADER_ENTITIES]
        if top:
            parts.append(", ".join(top))
        header = " | ".join(parts)
        while estimate_tokens(header) > max_tokens // 4 and len(parts) > 1:
            parts.pop()  # the header is at most a quarter of the room
            header = " | ".join(parts)
        return header if estimate_tokens(header) <= max(1, max_tokens // 4) else ""

    def _footer(self, kept: str, room: int) -> str:
        """``Expand for details about:`` what the dropped clauses name that ``kept`` does not."""
        low = kept.lower()
        kept_words = {stem(t) for t in tokens(low)}
        dropped = [
            c
            for c in self.clauses
            if not c.picked and c.bonus + sum(c.facts.values()) >= self.min_gain
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
        for raw in (*entities, *inherited, *words):
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
        if not dropped and not self.inherited and len(NOTHING_OMITTED) <= room:
            return EXPAND_PREFIX + NOTHING_OMITTED
        return EXPAND_PREFIX + ("earlier details" if room >= 15 else "source")


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
