"""Summaries for the compaction DAG: escalation over any summarizer, and the contract's names.

A :class:`Summarizer` turns a :class:`SummaryRequest` (raw messages for a leaf,
child summaries for a condensed summary) into text. Models misbehave, so no
summarizer output is trusted: :func:`summarize_with_escalation` checks every
candidate and walks down a ladder until one passes::

    1. primary, normal request
    2. primary, same request with aggressive=True
    3. fallback: FactSummarizer with a tighter budget (deterministic)
    4. hard truncation of the source with a "[Truncated for context management]" marker

A candidate is rejected (next step) when it is empty or whitespace, looks like
reasoning or a refusal rather than a summary (see :func:`looks_like_reasoning`),
is not strictly smaller than the input, or is more than 50% over
``target_tokens``. A candidate over the target by 50% or less is kept but
trimmed to fit (whole lines first, keeping its "Expand for details about:"
line), because the result always obeys the size rule: when the input is over
8 tokens the result is strictly smaller than the input and at most
``target_tokens``. A :class:`~brain.errors.ProviderError` from the primary
moves on to the next step like a rejection.

The contract (requests, the protocol, the size rules) is
``brain.lcm.summary_contract``, the offline default ``brain.lcm.facts`` and the
earlier ``brain.lcm.extractive``; they are re-exported here, where callers import them.
"""

from __future__ import annotations

from dataclasses import replace

from brain.errors import ProviderError
from brain.lcm.extractive import ExtractiveSummarizer
from brain.lcm.facts import FactSummarizer
from brain.lcm.summary_contract import (
    EXPAND_LINE,
    EXPAND_PREFIX,
    FOOTER_MIN_TOKENS,
    NOTHING_OMITTED,
    OVERSHOOT_TOLERANCE,
    TINY_INPUT_TOKENS,
    TRUNCATION_MARKER,
    SourceItem,
    Summarizer,
    SummaryOutcome,
    SummaryRequest,
    cut_tokens,
    cut_words,
    input_tokens,
    looks_like_reasoning,
    short_time,
    truncate_source,
    units,
    verbatim,
)
from brain.tokens import estimate_tokens

__all__ = [
    "EXPAND_PREFIX",
    "NOTHING_OMITTED",
    "OVERSHOOT_TOLERANCE",
    "TINY_INPUT_TOKENS",
    "TRUNCATION_MARKER",
    "ExtractiveSummarizer",
    "FactSummarizer",
    "SourceItem",
    "Summarizer",
    "SummaryOutcome",
    "SummaryRequest",
    "input_tokens",
    "looks_like_reasoning",
    "short_time",
    "summarize_with_escalation",
    "truncate_source",
]


def summarize_with_escalation(
    primary: Summarizer, request: SummaryRequest, fallback: Summarizer | None = None
) -> SummaryOutcome:
    """Summarise with ``primary``, escalating until a candidate passes (see the module doc).

    ``fallback`` defaults to a :class:`FactSummarizer` (``primary`` itself when
    it is one, or an :class:`ExtractiveSummarizer`). The result always obeys the
    size rule, whatever the summarizers return.
    """
    source = input_tokens(request)
    if source <= TINY_INPUT_TOKENS:
        return SummaryOutcome(verbatim(request, min(source, request.target_tokens)), "verbatim", 0)
    limit = min(request.target_tokens, source - 1)
    attempts = 0
    ladder = (
        (request, primary.name),
        (replace(request, aggressive=True), f"{primary.name}:aggressive"),
    )
    for step, label in ladder:
        attempts += 1
        try:
            candidate = primary.summarize(step)
        except ProviderError:
            continue
        accepted = _accept(candidate, source, request.target_tokens, limit)
        if accepted is not None:
            return SummaryOutcome(accepted, label, attempts)

    if fallback is None:
        offline = isinstance(primary, (FactSummarizer, ExtractiveSummarizer))
        fallback = primary if offline else FactSummarizer()
    # Tighter than the target: the model already failed twice, so the fallback
    # aims well inside the budget (aggressive halves it again).
    tight = min(limit, max(FOOTER_MIN_TOKENS, limit * 3 // 4))
    attempts += 1
    try:
        candidate = fallback.summarize(replace(request, aggressive=True, target_tokens=tight))
    except ProviderError:
        candidate = ""
    accepted = _accept(candidate, source, request.target_tokens, limit)
    if accepted is not None:
        return SummaryOutcome(accepted, "fallback", attempts)
    return SummaryOutcome(truncate_source(request, limit), "fallback:truncated", attempts + 1)


def _accept(candidate: str, source: int, target: int, limit: int) -> str | None:
    """The candidate made to fit ``limit`` tokens, or None when it is to be rejected."""
    text = candidate.strip()
    if not text or looks_like_reasoning(text):
        return None
    size = estimate_tokens(text)
    if size >= source or size > target * OVERSHOOT_TOLERANCE:
        return None
    if size <= limit:
        return text
    trimmed = _trim_lines(text, limit).strip()
    return trimmed or None


def _trim_lines(text: str, max_tokens: int) -> str:
    """Keep whole lines from the start (and the final "Expand" line) within ``max_tokens``."""
    budget = max_tokens * 4
    lines = text.split("\n")  # not splitlines(): it also splits on \x1c-\x1e and \u2028
    footer = lines.pop() if lines and EXPAND_LINE.match(lines[-1].strip()) else None
    if footer is not None and units(footer) + 1 > budget // 3:
        footer = None  # the body matters more than a long list of omissions
    room = budget - (units(footer) + 1 if footer is not None else 0)
    kept: list[str] = []
    used = 0
    for line in lines:
        size = units(line) + (1 if kept else 0)
        if used + size > room:
            rest = (room - used - (1 if kept else 0)) // 4
            if rest >= 10:
                kept.append(cut_words(line, rest))
            break
        kept.append(line)
        used += size
    body = "\n".join(kept)
    if footer is not None:
        body = f"{body}\n{footer}" if body else footer
    return cut_tokens(body, max_tokens)
