"""The extractive summarizer: deterministic, model-free, the default and everybody's last resort.

:class:`ExtractiveSummarizer` needs no model: it keeps the sentences that carry
decisions, errors, numbers, names, paths, commands and URLs, with who said them
and when, and ends with an "Expand for details about:" line naming what it left
out. Tests: tests/brain/lcm/test_extractive.py.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

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
    short_time,
    truncate_source,
    units,
    verbatim,
    who,
)
from brain.tokens import estimate_tokens


class ExtractiveSummarizer:
    """Deterministic, model-free summaries built from the source's most informative sentences.

    Leaf (depth 0): one line per message that contributed, ``[YYYY-MM-DD HH:MM]
    role: sentence sentence``, in chronological order. Sentences are scored by
    what they carry (decisions, errors, numbers and dates, capitalised names,
    file paths, commands, URLs, questions), the best one of each message gets
    a bonus so many voices survive, filler and repeats are penalised, and the
    best are taken greedily until the budget is spent.

    Condensed (depth >= 1): per child summary a ``[start to end]`` header and
    a few short bullets, decisions first, then errors, then lines with
    entities; fewer and shorter at each depth. Children's own "Expand for
    details about:" lists feed this summary's list.

    The budget is ``target_tokens``, kept below the input size, at most 60% of
    the input (beyond about 100 tokens) so a summary is a real reduction, and
    halved when ``aggressive``. The last line is always ``Expand for details
    about: ...`` when the budget allows it (8 tokens or more); inputs of 8
    tokens or fewer come back verbatim, truncated to the target.
    """

    name = "extractive"

    def summarize(self, request: SummaryRequest) -> str:
        """Return the extractive summary of ``request`` (never raises for valid requests)."""
        source = input_tokens(request)
        if source <= TINY_INPUT_TOKENS:
            return verbatim(request, min(source, request.target_tokens))
        # At most 60% of the input, so a summary is a real reduction, except
        # for small inputs, where line prefixes and the footer need the room.
        budget = min(request.target_tokens, source - 1, max(_SMALL_INPUT_TOKENS, source * 3 // 5))
        if request.aggressive:
            budget = min(budget, max(FOOTER_MIN_TOKENS, budget // 2))
        if budget < FOOTER_MIN_TOKENS:
            return truncate_source(request, budget)
        text = _Extraction(request).render(budget * 4)
        if estimate_tokens(text) > budget:  # unreachable while units bounds estimate_tokens
            return truncate_source(request, budget)
        return text


# -- extraction ---------------------------------------------------------------------------

_SMALL_INPUT_TOKENS: Final = 64
_FOOTER_MAX_UNITS: Final = 320
_FOOTER_MAX_TERMS: Final = 10
_EARLIER: Final = "earlier details"
_GENERIC_TERM: Final = "source"  # fits the smallest footer: 26 + 6 characters = 8 tokens

# Per depth: longest sentence kept (characters), sentences kept per source item.
_LEAF_CLIP, _LEAF_PER_ITEM = 320, 8
_CONDENSED_CLIP = {1: 220, 2: 160}
_CONDENSED_PER_ITEM = {1: 6, 2: 4}
_DEEP_CLIP, _DEEP_PER_ITEM = 120, 3


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SENTENCE_SPLIT = re.compile(r"\s*\n\s*|(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])")
# Scoring runs on every sentence of ~20k-token chunks, so these are tuned for
# speed: applied to the lowercased sentence, no IGNORECASE, literal
# alternatives first (sre skips ahead on their first characters), and the
# expensive exact patterns (paths, URLs) only behind a cheap substring test.
_DECISION = re.compile(
    r"(?:decid|decision|will\b|won't|agree|let's|must\b|should|plan(?:s|ned|ning)?\b|going to|"
    r"need to|todo|"
    r"action item|deadline|chose|choose|approve|commit to|next step)"
)
_ERROR = re.compile(
    r"error|exception|fail|traceback|exit (?:code|status)|panic|crash|segfault|denied|"
    r"not found|broken|\bbug"
)
_NUMBER = re.compile(r"\d")
_DIGITS = re.compile(r"\d+")
_DATE = re.compile(r"\d(?:\d{3}-\d\d-\d\d|\d?:\d\d|\d?/\d\d?/\d\d)")
_URL = re.compile(r"https?://[^\s<>\"')\]]+")
# Absolute or ~/ ./ ../ paths, relative paths ending in a file name with an
# extension, and bare file names with a common extension ("and/or" is not a path).
_PATH = re.compile(
    r"(?<![\w/.:-])(?:(?:~|\.{1,2})?/(?:[\w.-]+/)*[\w.-]+|(?:[\w.-]+/)+[\w-]*\.[A-Za-z]\w{0,4}\b)"
    r"|\b[\w-]+\.(?:py|js|ts|tsx|jsx|md|json|toml|ya?ml|txt|sh|rs|go|c|h|cpp|java|rb|sql|db|log|"
    r"cfg|ini|lock|html|css)\b"
)
_PATHISH = re.compile(
    r"/[\w.~-]|\.(?:py|js|ts|md|json|toml|ya?ml|txt|sh|rs|go|sql|db|log|ini|cfg)\b"
)
# Command-line tools that are not also everyday English words ("make", "tar").
_CLI_VERBS: Final = _words(
    "git pip pip3 uv npm pnpm yarn npx docker podman kubectl cargo pytest python python3 curl "
    "wget ssh scp sudo apt apt-get brew systemctl journalctl grep rg sed awk chmod chown mkdir "
    "rsync psql sqlite3 ls cd rm mv cp cat tail ps kill ruff mypy gcc go node deno"
)
_BACKTICKED = re.compile(r"`([^`\n]{1,80})`")
_ERROR_NAME = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")
# A capitalised word after whitespace is not at the sentence start (sentences
# are stripped), so it is likely a name; a few sentence-internal capitals are not.
_NAME = re.compile(r"(?<=[ \t])(?:[A-Z][a-z]+(?:[A-Z]\w*)?|[A-Z]{2,}[a-z]*)\b")
# Capitalised words that follow a comma or a quote more often than they name anything.
_NOT_NAMES: Final = _words(
    "The This That These Those It We You He She They OK Ok My Our Your His Her Their And But So "
    "Or If In On At For As To Of By With From Not No Yes Yeah Yep Oh Wow Hey Hi Hello Also Just "
    "Even What How Why When Where Which Who Do Did Does Is Are Was Were Can Could Would Should "
    "Will Let Let's Here There Then Now Well Sure Okay Great Good Nice Cool Thanks Thank Please "
    "Maybe Really Actually Anyway Absolutely Definitely Totally Awesome Amazing Congrats"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z-]{4,}")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{2,6}")
_FILLER = re.compile(
    r"(?:(?:ok(?:ay)?|thanks?(?: you)?|thx|sure|great|cool|nice|got it|sounds good|yes|yep|no|"
    r"nope|perfect|awesome|done|hi|hello|hey|right|alright|wow|haha|lol)\W*)+$"
)
_STOPWORDS: Final = _words(
    "about above after again against because before being below between could doing during "
    "every first found further having here itself might never other ought their theirs them "
    "themselves there these thing things think those through under until using where which "
    "while whose would should shall still since something maybe really actually going want "
    "wants know just like make made also even into than then them they what when with your "
    "yours does done back well sure right okay thanks please hello great looks"
)
# Lines of child summaries that are structure, not content.
_CHILD_PREFIX = re.compile(r"^(?:\[[^\]]{0,40}\]\s*(?:\w+:\s*)?|[-*\u2022]\s+|#+\s+)+")
_CHILD_HEADER = re.compile(r"^\[[^\]]{0,40}\]$")


@dataclass(slots=True)
class _Sentence:
    item: int
    pos: int  # position in the whole source, for chronological output
    text: str
    size: int  # in units
    score: float
    category: int  # 0 decision, 1 error, 2 entity, 3 other: condensed output order
    entities: list[str]


class _Extraction:
    """One summary in the making: sentences scored, then picked under a budget (see units)."""

    def __init__(self, request: SummaryRequest) -> None:
        self.request = request
        depth = max(0, request.depth)
        self.condensed = request.kind == "condensed" or depth >= 1
        if not self.condensed:
            clip, per_item = _LEAF_CLIP, _LEAF_PER_ITEM
        else:
            clip = _CONDENSED_CLIP.get(depth, _DEEP_CLIP)
            per_item = _CONDENSED_PER_ITEM.get(depth, _DEEP_PER_ITEM)
        self.per_item = max(1, per_item // 2) if request.aggressive else per_item
        self.prefixes = [self._prefix(item) for item in request.items]
        self.prefix_units = [units(p) for p in self.prefixes]
        self.inherited: list[str] = []  # children's "Expand for details about" terms
        self.sentences = self._score(clip)

    def _prefix(self, item: SourceItem) -> str:
        if not self.condensed:
            return f"[{short_time(item.at)}] {who(item)}: "
        end = short_time(item.at)
        if item.earliest_at is None:
            return f"[{end}]\n"
        start = short_time(item.earliest_at)
        if start[:10] == end[:10]:
            end = end[11:]
        return f"[{start} to {end}]\n"

    def _score(self, clip: int) -> list[_Sentence]:
        previous = self.request.previous or ""
        seen: set[str] = set()
        out: list[_Sentence] = []
        pos = 0
        for index, item in enumerate(self.request.items):
            first = len(out)
            for raw in _SENTENCE_SPLIT.split(item.text):
                text = " ".join(raw.split())
                if not text:
                    continue
                if self.condensed:
                    expand = EXPAND_LINE.match(text)
                    if expand:
                        self.inherited.extend(_split_terms(expand.group(1)))
                        continue
                    if _CHILD_HEADER.match(text):
                        continue
                    text = _CHILD_PREFIX.sub("", text)
                    if not text:
                        continue
                score, category, entities = _features(text, item.role)
                # A repeat carries nothing new; the same sentence with other
                # numbers (a retried command, a recurring error) carries little.
                shape = _DIGITS.sub("0", text.lower())
                if text in seen:
                    score -= 6.0
                elif shape in seen:
                    score -= 2.0
                seen.add(text)
                seen.add(shape)
                if len(text) >= 24 and text in previous:
                    score -= 4.0  # already said by the previous summary
                text = clip_text(text, clip)
                size = units(text)
                out.append(_Sentence(index, pos, text, size, score, category, entities))
                pos += 1
            if len(out) > first:
                # The opening sentence states the topic, and the best one of each
                # item gets a bonus so the summary keeps many voices, not one.
                out[first].score += 1.0
                max(out[first:], key=lambda s: (s.score, -s.pos)).score += 2.0
        return out

    def render(self, budget: int) -> str:
        """The summary within ``budget`` units (at least the footer minimum)."""
        # The footer's share; the 4 extra cover rounding of a non-ASCII body.
        reserve = min(_FOOTER_MAX_UNITS, max(FOOTER_MIN_TOKENS * 4 + 4, budget // 6))
        room = budget - reserve
        chosen: dict[int, list[_Sentence]] = {}
        spent = 0
        # Filler and repeats (score <= 0) never make it; aggressive summaries
        # keep only sentences that carry something or lead their message.
        floor = 1.5 if self.request.aggressive else 0.0
        ranked = [
            s for s in sorted(self.sentences, key=lambda s: (-s.score, s.pos)) if s.score > floor
        ]
        # Leaves take a second pass without the per-message cap, so one long
        # message (a pasted document, a log) can use budget the others left;
        # condensed levels keep their cap, as fewer lines is what makes them abstract.
        caps = (self.per_item,) if self.condensed else (self.per_item, len(ranked))
        taken: set[int] = set()
        for cap in caps:
            for sentence in ranked:
                picked = chosen.get(sentence.item)
                if sentence.pos in taken or (picked is not None and len(picked) >= cap):
                    continue
                # Upper bound of what the sentence adds: itself, a separator, and the
                # item's prefix the first time (newline before the line included).
                cost = sentence.size + 3 if self.condensed else sentence.size + 1
                if picked is None:
                    cost += self.prefix_units[sentence.item] + 1
                if spent + cost > room:
                    continue
                spent += cost
                taken.add(sentence.pos)
                if picked is None:
                    chosen[sentence.item] = [sentence]
                else:
                    picked.append(sentence)

        lines: list[str] = []
        for index in sorted(chosen):
            picked = chosen[index]
            if self.condensed:
                picked.sort(key=lambda s: (s.category, s.pos))
                body = "\n".join(f"- {s.text}" for s in picked)
            else:
                picked.sort(key=lambda s: s.pos)
                body = " ".join(s.text for s in picked)
            lines.append(self.prefixes[index] + body)
        text = "\n".join(lines)
        used = units(text)
        footer = self._footer(chosen, text, budget - used - (1 if text else 0))
        return f"{text}\n{footer}" if text else footer

    def _footer(self, chosen: dict[int, list[_Sentence]], kept: str, room: int) -> str:
        kept_ids = {id(s) for picked in chosen.values() for s in picked}
        # Filler and repeats (score <= 0) were never candidates: they name nothing.
        dropped = [s for s in self.sentences if s.score > 0 and id(s) not in kept_ids]
        significant = bool(dropped) or bool(self.inherited)
        terms = _salient_terms(self.inherited, dropped, kept)
        room -= len(EXPAND_PREFIX)
        picked: list[str] = []
        used = 0
        for term in terms:
            cost = units(term) + (2 if picked else 0)
            low = term.lower()
            if any(low in other.lower() for other in picked):
                continue  # "brain/store.py" adds nothing after "/work/brain/store.py"
            if used + cost <= room:
                picked.append(term)
                used += cost
            if len(picked) >= _FOOTER_MAX_TERMS:
                break
        if picked:
            listing = ", ".join(picked)
        elif not significant and len(NOTHING_OMITTED) <= room:
            listing = NOTHING_OMITTED
        elif len(_EARLIER) <= room:
            listing = _EARLIER
        else:
            listing = _GENERIC_TERM
        return EXPAND_PREFIX + listing


def _features(text: str, role: str) -> tuple[float, int, list[str]]:
    """Score a sentence by what it carries, with its category and the entities it names.

    The category orders condensed bullets (0 decision, 1 error, 2 entity, 3
    other); the entities feed the "Expand for details about" list if the
    sentence is dropped.
    """
    low = text.lower()
    score = 0.0
    category = 3
    entities: list[str] = []
    named = False  # carries a URL, path, command or name, even one with nothing to list
    if _DECISION.search(low):
        score += 3.0
        category = 0
    if _ERROR.search(low):
        score += 3.0
        category = min(category, 1)
        entities += _ERROR_NAME.findall(text)
    if "://" in text:
        urls = _URL.findall(text)
        if urls:
            score += 2.0
            entities += urls
            named = True
    if _PATHISH.search(low):
        paths = _PATH.findall(text)
        if paths:
            score += 2.0
            entities += paths
            named = True
    if "`" in text or "$ " in text or not _CLI_VERBS.isdisjoint(low.split()):
        score += 2.0
        entities += _BACKTICKED.findall(text)
        named = True
    if _NUMBER.search(text):
        score += 1.0
        if _DATE.search(text):
            score += 1.0
    names = [n for n in _NAME.findall(text) if n not in _NOT_NAMES]
    if names:
        score += min(2.0, len(names) * 0.75)
        entities += names
        named = True
    if named:
        category = min(category, 2)
    if text.endswith("?"):
        score += 0.5  # an open question may be an open item
    if (len(text) < 12 and text.isascii()) or _FILLER.match(low):
        score -= 3.0
    if role == "tool" and category > 1:
        score -= 1.0  # tool output is long and re-derivable unless it failed
    return score, category, entities


def _salient_terms(inherited: list[str], dropped: list[_Sentence], kept: str) -> list[str]:
    """Things named in the dropped sentences and absent from the kept text, most salient first.

    Entities (paths, URLs, commands, error names, capitalised names) outrank
    topics (frequent long words, CJK runs); within a kind, more mentions first,
    then first mention. Children's own lists come before everything.
    Comparisons ignore case, so "Priya" kept means "priya" is not listed.
    """
    kept = kept.lower()
    scored: dict[str, tuple[int, int, int, str]] = {}  # lowered -> (kind, -count, order, term)

    def add(kind: int, found: Iterable[str]) -> None:
        for order, (raw, count) in enumerate(Counter(found).items()):
            term = raw.strip(" .,;:()[]{}'\"")
            key = term.lower()
            if len(term) < 2 or len(term) > 60 or key in kept:
                continue
            rank = (kind, -count, order, term)
            if key not in scored or rank < scored[key]:
                scored[key] = rank

    add(0, inherited)
    if dropped:
        # Names rank below paths, URLs, commands and error names: those are
        # rarer and name exactly what an agent would expand for.
        add(1, (e for s in dropped for e in s.entities if not (e[:1].isupper() and e.isalpha())))
        add(2, (e for s in dropped for e in s.entities if e[:1].isupper() and e.isalpha()))
        blob = "\n".join(s.text for s in dropped)
        add(3, (w for w in _WORD.findall(blob) if w.lower() not in _STOPWORDS))
        add(3, _CJK_RUN.findall(blob))
    # A word needs two mentions to count as a topic, unless nothing better was found.
    ranks = sorted(scored.values())
    entities = any(kind < 3 for kind, _, _, _ in ranks)
    return [term for kind, negcount, _, term in ranks if kind < 3 or negcount <= -2 or not entities]


def _split_terms(listing: str) -> list[str]:
    if listing.strip().lower() in (NOTHING_OMITTED, ""):
        return []
    return [t.strip() for t in listing.split(",") if t.strip()]
