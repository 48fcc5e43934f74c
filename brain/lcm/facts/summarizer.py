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

from typing import Final

from brain.lcm.facts.framing import FOOTER_MAX_UNITS, footer, header, span
from brain.lcm.facts.layout import Layout
from brain.lcm.facts.reading import read_children, read_messages
from brain.lcm.facts.scoring import Scorer, discount_repeats, favour_rare, favour_topics
from brain.lcm.facts.selection import AGGRESSIVE_MIN_GAIN, MIN_GAIN, pick
from brain.lcm.summary_contract import (
    FOOTER_MIN_TOKENS,
    OFFLINE_SMALL_INPUT_TOKENS,
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

SPARSE_SHARE: Final = 4
"""A budget over 1/SPARSE_SHARE of the source is held to that share (see ``_render``)."""


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
    # A leaf is a real reduction: one with room for more than a quarter of its source
    # (the share the daemon sizes leaf targets by) is held to a quarter, and need not
    # fill even that with clauses of plain words saying little (``sparse``): a long
    # copy is no summary. One that must shrink its source keeps every clause that fits
    # and adds a fact. (A condensed summary's children are dense already: it is never
    # held, and always sparse.)
    units_of_source = 4 * input_tokens(request)
    sparse = condensed or budget * SPARSE_SHARE > units_of_source
    if sparse and not condensed:
        held = max(4 * OFFLINE_SMALL_INPUT_TOKENS, units_of_source // SPARSE_SHARE)
        budget = min(budget, held // 2 if request.aggressive else held)
    scorer = Scorer(condensed=condensed)
    inherited: list[str] = []
    if condensed:
        clauses, inherited = read_children(request.items, scorer)
        favour_rare(clauses)
    else:
        clauses = read_messages(request.items, scorer)
        discount_repeats(clauses)
        favour_topics(clauses)
    layout = Layout(clauses)
    start, end = span(request.items)
    least_reserve = FOOTER_MIN_TOKENS * 4 + 4  # the shortest footer always fits
    reserve = min(FOOTER_MAX_UNITS, max(least_reserve, budget // 6))
    top = header(start, end, scorer.people, clauses, max(0, (budget - reserve) // 4))
    room = budget - reserve - (units(top) + 1 if top else 0)
    previous = (request.previous or "").lower()
    picked = pick(clauses, layout, room, previous, min_gain, sparse=sparse)
    text = "\n".join(t for t in (top, layout.body(picked)) if t)
    end_line = footer(clauses, inherited, text, budget - units(text) - (1 if text else 0), min_gain)
    slack = reserve - 1 - max(units(end_line), least_reserve)
    if picked and slack > 0:
        # The footer took less than its reserve: pick again with what it left (the
        # greedy order is the same, so the first picks are too), then list again
        # what is left out in the room that remains.
        for clause in clauses:
            clause.picked = False
        layout = Layout(clauses)
        picked = pick(clauses, layout, room + slack, previous, min_gain, sparse=sparse)
        text = "\n".join(t for t in (top, layout.body(picked)) if t)
        end_line = footer(
            clauses, inherited, text, budget - units(text) - (1 if text else 0), min_gain
        )
    return f"{text}\n{end_line}" if text else end_line
