"""The summarizer contract: requests, the ``Summarizer`` protocol, outcomes, and the size rules.

A :class:`Summarizer` turns a :class:`SummaryRequest` (raw messages for a leaf,
child summaries for a condensed summary) into text. Here too: what a summary
must not look like (:func:`looks_like_reasoning`), the deterministic last
resort (:func:`truncate_source`), and the token-exact cutting helpers every
summarizer shares. ``brain.lcm.summarize`` re-exports the public names.
Tests: tests/brain/lcm/test_summary_contract.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from brain.tokens import estimate_tokens

EXPAND_PREFIX: Final = "Expand for details about: "
"""Every summary ends with a line starting with this, naming what it left out."""

NOTHING_OMITTED: Final = "nothing significant omitted"
TRUNCATION_MARKER: Final = "[Truncated for context management]"
TINY_INPUT_TOKENS: Final = 8
"""Inputs this small are returned (truncated) verbatim: no summary can beat them."""

OVERSHOOT_TOLERANCE: Final = 1.5
"""A candidate over ``target_tokens`` by more than this factor is rejected, not trimmed."""


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One thing being summarised: a raw message (leaf) or a child summary (condensed).

    ``ref`` is the message's public id or the summary id; ``at`` the message's
    ``created_at`` or the child summary's ``latest_at``; ``earliest_at`` is set
    for child summaries only.
    """

    ref: str
    role: str
    text: str
    at: str
    earliest_at: str | None = None
    name: str | None = None
    """The speaker's name (user, assistant, system messages), said instead of the role."""


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What to summarise and how big the summary may be.

    ``depth`` is the depth of the summary being made (0 for a leaf);
    ``previous`` is the most recent earlier summary, given for continuity so
    the summarizer does not repeat it; ``aggressive`` asks for only durable
    facts, decisions and open items.
    """

    kind: Literal["leaf", "condensed"]
    depth: int
    items: tuple[SourceItem, ...]
    target_tokens: int
    previous: str | None = None
    aggressive: bool = False


class Summarizer(Protocol):
    """Anything that can summarise; ``name`` is recorded as the summary's provenance."""

    name: str

    def summarize(self, request: SummaryRequest) -> str:
        """Return the summary text; may raise :class:`~brain.errors.ProviderError`."""
        ...


@dataclass(frozen=True, slots=True)
class SummaryOutcome:
    """The accepted summary, which step produced it, and how many candidates were tried.

    ``summarizer`` is the primary's name (``"llm:gpt-4o-mini"``), the name with
    ``":aggressive"``, ``"fallback"`` (the fallback summarizer, extractive by default),
    ``"fallback:truncated"`` (hard truncation) or ``"verbatim"`` (input of 8
    tokens or fewer, returned as is). ``attempts`` counts candidates produced,
    including rejected ones and provider failures (0 for ``"verbatim"``).
    """

    text: str
    summarizer: str
    attempts: int


def input_tokens(request: SummaryRequest) -> int:
    """The size of the request's source: the sum of each item's estimated tokens."""
    return sum(estimate_tokens(item.text) for item in request.items)


_SHORT_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})")


def short_time(at: str) -> str:
    """``2026-11-22T14:03:05.000Z`` as ``2026-11-22 14:03``; other strings unchanged."""
    match = _SHORT_TIME.match(at)
    return f"{match.group(1)} {match.group(2)}" if match else at


# Reasoning leaks and refusals, judged on the start of the text only: a summary
# may well quote "let me" later on, but a model that opens with it is thinking
# aloud or declining, and that is not a summary.
_REASONING_START = re.compile(
    r"\s*(?:<\s*/?\s*(?:think|thinking|thought|reasoning|scratchpad)\b"
    r"|(?:thinking|reasoning|thoughts?|analysis)\s*:"
    r"|let me\b|let[\u2019']s think\b|i need to\b|i(?: will|[\u2019']ll) (?:start|begin|first)\b"
    r"|(?:okay|ok|alright|all right|so|hmm+|well)\s*,?\s+(?:so|let|i|the user|first)\b"
    r"|hmm+\b|first,? i\b|we need to\b|the user (?:wants|is asking|asked|has asked)\b"
    r"|i(?:[\u2019']m| am) sorry\b|i can(?:not|[\u2019']t)\b|as an ai\b)",
    re.IGNORECASE,
)


def looks_like_reasoning(text: str) -> bool:
    """True when ``text`` opens like a model thinking aloud or refusing, not summarising.

    The rule: after leading whitespace, the text starts (case-insensitively)
    with a reasoning tag (``<think>``, ``<thinking>``, ``<reasoning>``, also
    closing ones), a label (``Thinking:``, ``Reasoning:``, ``Analysis:``), a
    planning opener (``Let me``, ``I need to``, ``We need to``, ``I'll start``,
    ``First, I``, ``Okay, so``, ``Alright, let``, ``Hmm``, ``The user wants``) or
    a refusal (``I'm sorry``, ``I can't``, ``As an AI``).
    """
    return _REASONING_START.match(text) is not None


def truncate_source(request: SummaryRequest, max_tokens: int) -> str:
    """The source, rendered as timestamped lines, cut to ``max_tokens`` with a marker.

    The deterministic last resort: it cannot fail and cannot exceed the limit.
    """
    text = "\n".join(_source_line(item) for item in request.items)
    if estimate_tokens(text) <= max_tokens:
        return text
    marker = "\n" + TRUNCATION_MARKER
    room = max_tokens - estimate_tokens(marker)
    if room < 4:  # no space for a useful head plus the marker: keep what fits
        return cut_tokens(text, max_tokens)
    return cut_words(text, room) + marker


FOOTER_MIN_TOKENS: Final = 8
EXPAND_LINE = re.compile(r"^expand for details about:\s*(.*)$", re.IGNORECASE)


def verbatim(request: SummaryRequest, max_tokens: int) -> str:
    """The sources' text as they are, cut to ``max_tokens``."""
    return cut_tokens("\n".join(item.text for item in request.items), max_tokens)


def _source_line(item: SourceItem) -> str:
    if item.role == "summary":
        return item.text
    return f"[{short_time(item.at)}] {who(item)}: {item.text}"


def who(item: SourceItem) -> str:
    """Who said a source message: ``Name (role)`` when a name was given, else the role."""
    return f"{item.name} ({item.role})" if item.name else item.role


def clip_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary when one is near, with "…"."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ", limit // 2)
    return (cut[:space] if space > 0 else cut) + "\u2026"


def units(text: str) -> int:
    """The cost of a piece of text in quarter tokens, for budgets built piece by piece.

    Whole tokens per sentence would round every sentence up. In quarter
    tokens ASCII costs exactly one a character, and a non-ASCII piece its
    estimate rounded up, so the units of the pieces add up to at least the
    cost of the joined text (``estimate_tokens`` is never more than the sum
    over its parts). Finished summaries are checked with estimate_tokens anyway.
    """
    return len(text) if text.isascii() else 4 * estimate_tokens(text)


def cut_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` that costs at most ``max_tokens``."""
    if max_tokens <= 0:
        return ""
    if estimate_tokens(text) <= max_tokens:
        return text
    if text.isascii():
        return text[: max_tokens * 4]
    low, high = 0, len(text)  # a prefix never costs less than a shorter one: bisect
    while low < high:
        mid = (low + high + 1) // 2
        if estimate_tokens(text[:mid]) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def cut_words(text: str, max_tokens: int) -> str:
    """``text`` cut to ``max_tokens`` including a trailing ellipsis, at a space if one is near."""
    cut = cut_tokens(text, max_tokens - 1)  # the ellipsis is three bytes: one token
    space = cut.rfind(" ", len(cut) // 2)
    return (cut[:space] if space > 0 else cut).rstrip() + "\u2026"


OFFLINE_SMALL_INPUT_TOKENS: Final = 64


def offline_budget(request: SummaryRequest) -> int:
    """The size an offline summarizer aims at: a real reduction of the source.

    At most ``target_tokens``, below the input, and at most 60% of it beyond
    small inputs (where line prefixes and the footer need the room); halved
    when ``aggressive`` (never below the footer's minimum). Every offline
    summarizer and baseline shares it, so their compression is comparable.
    """
    source = input_tokens(request)
    budget = min(
        request.target_tokens, source - 1, max(OFFLINE_SMALL_INPUT_TOKENS, source * 3 // 5)
    )
    if request.aggressive:
        budget = min(budget, max(FOOTER_MIN_TOKENS, budget // 2))
    return budget
