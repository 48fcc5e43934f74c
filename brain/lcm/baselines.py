"""Baseline summarizers for measuring the offline default against (scripts/eval_summaries.py).

Both aim at the budget every offline summarizer shares (``offline_budget``), so
their compression matches the one they are compared with:

- :class:`TruncationSummarizer`: the source's head, as timestamped lines, cut at
  the budget with the truncation marker (the deterministic fallback of
  lossless-claw, and this project's last resort);
- :class:`RandomSentenceSummarizer`: sentences drawn at random (seeded by the
  source, so the same request gives the same summary) until the budget is
  spent, shown in source order with their speaker.

Not meant for use: the daemon runs them only when ``offline_summarizer`` names
one. Tests: tests/brain/lcm/test_offline.py.
"""

from __future__ import annotations

import random
import zlib

from brain.lcm.facts.clauses import sentences
from brain.lcm.summary_contract import (
    EXPAND_PREFIX,
    TINY_INPUT_TOKENS,
    SummaryRequest,
    cut_tokens,
    input_tokens,
    offline_budget,
    short_time,
    truncate_source,
    units,
    verbatim,
)


class TruncationSummarizer:
    """The source's head within the offline budget (see the module doc)."""

    name = "truncation"

    def summarize(self, request: SummaryRequest) -> str:
        """The timestamped source lines, cut to the budget with a marker."""
        source = input_tokens(request)
        if source <= TINY_INPUT_TOKENS:
            return verbatim(request, min(source, request.target_tokens))
        return truncate_source(request, offline_budget(request))


class RandomSentenceSummarizer:
    """Random sentences within the offline budget, seeded by the source (see the module doc)."""

    name = "random"

    def summarize(self, request: SummaryRequest) -> str:
        """Sentences drawn at random, in source order, then a generic footer."""
        source = input_tokens(request)
        if source <= TINY_INPUT_TOKENS:
            return verbatim(request, min(source, request.target_tokens))
        budget = offline_budget(request)
        footer = EXPAND_PREFIX + "earlier details"
        room = budget * 4 - units(footer) - 1
        pool: list[tuple[int, str]] = []
        for index, item in enumerate(request.items):
            who = item.name or item.role
            prefix = "" if item.role == "summary" else f"[{short_time(item.at)}] {who}: "
            for sentence in sentences(item.text):
                if not sentence.lower().startswith(EXPAND_PREFIX.lower().strip()):
                    pool.append((index, prefix + sentence))
        seed = zlib.crc32("\x00".join(i.text for i in request.items).encode())
        order = list(range(len(pool)))
        random.Random(seed).shuffle(order)  # noqa: S311 (a baseline, not a secret)
        chosen: list[int] = []
        spent = 0
        for pick in order:
            cost = units(pool[pick][1]) + 1
            if spent + cost <= room:
                chosen.append(pick)
                spent += cost
        body = "\n".join(pool[i][1] for i in sorted(chosen))
        text = f"{body}\n{footer}" if body else footer
        return cut_tokens(text, budget)
