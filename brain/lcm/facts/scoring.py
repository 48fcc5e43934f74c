"""What one clause is worth to the fact summarizer: its facts, their weights, its bonus.

A *fact* is an entity (``brain.lcm.entities.extract``: names, dates,
quantities, paths, commands, errors, versions, identifiers), a number, a
slashed name ("vault/ci/7") or a content word (``brain.lcm.facts.words``:
stemmed; stop words dropped; reactions weigh a quarter), an uncommon English
word weighing more than a common one. A first-person report of something done
or owned, a decision or commitment, an error or its fix, and the answer to
another speaker's question get a bonus; a remark on the listener loses a
little; a clause with no content word gets no bonus. A clause repeated in many
messages weighs less (``discount_repeats``); in a leaf a fact said in several
messages weighs more (``favour_topics``), in a condensed summary a fact of few
children does (``favour_rare``).
Tests: tests/brain/lcm/facts/test_summarizer.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Final

from brain.lcm.entities.extract import extract
from brain.lcm.facts.clauses import squeeze
from brain.lcm.facts.words import FILLER_WORDS, STOP_WORDS, rarity, stem, terms, tokens
from brain.lcm.summary_contract import clip_text, units

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
WORD_WEIGHT: Final = 1.0
_NUMBER_WEIGHT: Final = 2.0
_RARE_WORD: Final = 1.0  # an uncommon English word weighs up to this much more
_FILLER_WEIGHT: Final = 0.25  # reactions: rarely the point, sometimes the answer ("happy")
_PRESENT_NAME_WEIGHT: Final = 0.25  # the people talking are in the header already
_RARE_BONUS: Final = 0.5  # condensed: a fact of one child weighs 1.5x, of all about 1x
_TOPIC_BONUS: Final = 0.5  # leaf: a fact of n messages weighs 1 + ln(n) / 2
_REPORT_BONUS: Final = 2.0
_ADDRESSED_PENALTY: Final = 0.5
_DECISION_BONUS: Final = 1.5
_ERROR_BONUS: Final = 1.5
ANSWER_BONUS: Final = 1.0
_CLIP: Final = 300  # characters of one clause (a pasted log line is not a fact)
_REPEATS_KEPT: Final = 2  # a clause said in more messages than this is boilerplate

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
# Names joined by slashes ("vault/ci/7", "feature/login"): one thing, not three words.
_SLASHED: Final = re.compile(r"(?<![\w/])[\w.-]+(?:/[\w.-]+)+")
_VOCATIVE: Final = re.compile(r",\s*([A-Z][a-z]+)\s*[.!?\u2026]*$")
_DIGITS: Final = re.compile(r"\d+")


@dataclass(slots=True)
class Clause:
    """One clause a summary may keep, weighed."""

    pos: int  # chronological position in the source
    text: str
    size: int  # units (quarter tokens)
    day: date | None
    speaker: str | None
    facts: dict[str, float]  # fact key -> weight (rarity applied)
    bonus: float
    shown: list[tuple[str, str]]  # (kind, how it reads) of entities, for header and footer
    source: int  # the message (leaf) or child (condensed) it came from
    picked: bool = False
    share: float = 1.0  # of its gain counted when ranking (``discount_repeats``)


class Scorer:
    """Weighs the clauses of one summary; knows the people talking (``person``)."""

    def __init__(self, *, condensed: bool) -> None:
        self.condensed = condensed
        self.people: list[str] = []

    def person(self, speaker: str) -> None:
        """Note ``speaker`` as one of the people talking (in order of first word)."""
        if speaker not in self.people:
            self.people.append(speaker)

    def clause(
        self,
        pos: int,
        source: int,
        text: str,
        day: date | None,
        speaker: str | None,
        bonus: float,
    ) -> Clause | None:
        """``text`` weighed as a clause at ``pos`` (None when nothing of it is left)."""
        text = self._unaddressed(text)
        if not text:
            return None
        if _REPORT.search(text) and _DONE.search(text):
            bonus += _REPORT_BONUS  # what someone did or has: "I set up a 5K charity run"
        elif _ADDRESSED.search(text):
            bonus -= _ADDRESSED_PENALTY  # remarks on the listener: "You'd be a great counselor"
        if not self.condensed:
            text = squeeze(text)
        text = clip_text(text, _CLIP).rstrip(".!;, ")
        if not text:
            return None
        facts: dict[str, float] = {}
        shown: list[tuple[str, str]] = []
        whole: list[tuple[int, int]] = []  # spans of entities that are one fact
        for mention in extract(text):
            key = f"{mention.kind}:{mention.key}"
            weight = _ENTITY_WEIGHT.get(mention.kind, 2.0)
            if mention.kind == "name":
                if not self._is_name(mention.key, mention.start):
                    continue  # a capitalised opener ("That's", "Anything"): its words count
                if self.present(mention.key):
                    weight = _PRESENT_NAME_WEIGHT
            if weight > _PRESENT_NAME_WEIGHT:
                shown.append((mention.kind, mention.text))
            facts[key] = max(facts.get(key, 0.0), weight)
            if mention.kind not in ("name", "date", "quantity"):
                whole.append((mention.start, mention.end))
        bare = _without_spans(text, whole)
        for token in tokens(bare):
            if (
                token in STOP_WORDS
                or token in FILLER_WORDS
                or (len(token) < 3 and not token.isdigit())
            ):
                continue
            if token.isalpha():
                weight = WORD_WEIGHT * (1.0 + _RARE_WORD * rarity(token))
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
        if not any(w >= WORD_WEIGHT for w in facts.values()):
            bonus = min(bonus, 0.0)  # a reaction is no report, decision or answer
        return Clause(pos, text, units(text), day, speaker, facts, bonus, shown, source)

    def present(self, key: str) -> bool:
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
        if match and self.present(match.group(1).casefold()):
            text = text[: match.start()].rstrip(" ,")
        return text if any(c.isalnum() for c in text) else ""


def discount_repeats(clauses: list[Clause]) -> None:
    """A clause said (near-verbatim: numbers aside) in more than two of the chunk's
    messages has its weight shared among them when clauses are ranked (``share``): a
    template, a signature, an environment banner or an acknowledgement pasted into every
    message says nothing about any one of them, and its many names and numbers must not
    crowd out the fact said once. It still goes in when room remains (and when every
    clause is repeated alike, they rank as before)."""
    shapes = [_shape(clause.text) for clause in clauses]
    said_in: dict[str, set[int]] = {}
    for clause, shape in zip(clauses, shapes, strict=True):
        said_in.setdefault(shape, set()).add(clause.source)
    for clause, shape in zip(clauses, shapes, strict=True):
        count = len(said_in[shape])
        if count > _REPEATS_KEPT:
            clause.share = 1 / count  # its weight shared among the messages repeating it


def _without_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the spans blanked: a date, version or path is one fact, not its
    numbers and words again ("3.12.4" is no 3, 12 and 4)."""
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + " " + text[end:]
    return text


def _shape(text: str) -> str:
    return " ".join(_DIGITS.sub("#", text.casefold()).split())


def favour_topics(clauses: list[Clause]) -> None:
    """In a leaf, a fact said in several of the chunk's messages weighs more (x1.35 in
    two, x2 in eight: ``1 + ln(messages) / 2``): what the speakers come back to, a
    pet's name, a file being fixed, an error met again, is what the conversation is
    about and what a later question asks; a word said once in passing is less often
    the point. (Applied after ``discount_repeats``: a pasted banner stays discounted.)"""
    _reweigh_by_sources(clauses, lambda sources: 1.0 + _TOPIC_BONUS * math.log(sources))


def favour_rare(clauses: list[Clause]) -> None:
    """In a condensed summary a fact of few children weighs more than one of many: the
    topics are everyone's, the rare detail is what one child alone still holds. (In a
    leaf, rarity is the word's own: ``rarity`` in ``Scorer.clause``.)"""
    _reweigh_by_sources(clauses, lambda sources: 1.0 + _RARE_BONUS / sources)


def _reweigh_by_sources(clauses: list[Clause], factor: Callable[[int], float]) -> None:
    """Multiply each fact's weight by ``factor(n)``, n = how many sources (messages or
    children) among ``clauses`` say it."""
    said_in: dict[str, set[int]] = {}
    for clause in clauses:
        for key in clause.facts:
            said_in.setdefault(key, set()).add(clause.source)
    for clause in clauses:
        for key, weight in clause.facts.items():
            clause.facts[key] = weight * factor(len(said_in[key]))
