"""The fact summarizer: the offline default, keeping what later questions ask about.

Who, what, when, how many, which file, which decision: a summary is worth its
tokens when it keeps those. :class:`FactSummarizer` reads the source as
clauses (``brain.lcm.facts.reading``: a leaf's messages, a condensed summary's
children's lines), weighs each by the facts it carries
(``brain.lcm.facts.scoring``), picks clauses greedily by new facts per token
until the room is spent (``brain.lcm.facts.selection``), and writes them as
day lines or speaker turns (``brain.lcm.facts.layout``) between a header and
the ``Expand for details about:`` footer (``brain.lcm.facts.framing``).

The budget is the one every offline summarizer shares (``offline_budget``).
Deterministic: ties go to the earlier clause. Tests: tests/brain/lcm/facts/.
"""

from __future__ import annotations

from brain.lcm.facts.framing import FOOTER_MAX_UNITS, footer, header, span
from brain.lcm.facts.layout import Layout
from brain.lcm.facts.reading import read_children, read_messages
from brain.lcm.facts.scoring import Scorer, favour_rare
from brain.lcm.facts.selection import AGGRESSIVE_MIN_GAIN, MIN_GAIN, pick
from brain.lcm.summary_contract import (
    FOOTER_MIN_TOKENS,
    TINY_INPUT_TOKENS,
    SummaryRequest,
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
        text = _render(request, budget * 4)
        if estimate_tokens(text) > budget:  # units bound the estimate; kept as a guard
            return truncate_source(request, budget)
        return text


def _render(request: SummaryRequest, budget: int) -> str:
    """The summary of ``request`` within ``budget`` units (at least the footer minimum)."""
    condensed = request.kind == "condensed" or request.depth >= 1
    min_gain = AGGRESSIVE_MIN_GAIN if request.aggressive else MIN_GAIN
    scorer = Scorer(condensed=condensed)
    inherited: list[str] = []
    if condensed:
        clauses, inherited = read_children(request.items, scorer)
        favour_rare(clauses)
    else:
        clauses = read_messages(request.items, scorer)
    layout = Layout(clauses)
    start, end = span(request.items)
    reserve = min(FOOTER_MAX_UNITS, max(FOOTER_MIN_TOKENS * 4 + 4, budget // 6))
    top = header(start, end, scorer.people, clauses, max(0, (budget - reserve) // 4))
    room = budget - reserve - (units(top) + 1 if top else 0)
    picked = pick(clauses, layout, room, (request.previous or "").lower(), min_gain)
    text = "\n".join(t for t in (top, layout.body(picked)) if t)
    end_line = footer(clauses, inherited, text, budget - units(text) - (1 if text else 0), min_gain)
    return f"{text}\n{end_line}" if text else end_line
