"""The offline summarizer by name: what compaction summarises with when no LLM is set.

``default`` is :class:`~brain.lcm.facts.FactSummarizer`; ``extractive_v1`` the
earlier extractive summarizer, kept for comparison; ``truncation`` and
``random`` are the baselines of scripts/eval_summaries.py. The setting is
``offline_summarizer`` (``BRAIN_OFFLINE_SUMMARIZER``). Tested in
tests/brain/lcm/test_offline.py.
"""

from __future__ import annotations

from typing import Final, Literal

from brain.lcm.summary_contract import Summarizer

OfflineName = Literal["default", "extractive_v1", "truncation", "random"]
OFFLINE_NAMES: Final[tuple[OfflineName, ...]] = ("default", "extractive_v1", "truncation", "random")


def offline_summarizer(name: str = "default") -> Summarizer:
    """The offline summarizer called ``name`` (one of ``OFFLINE_NAMES``); ValueError otherwise."""
    if name == "default":
        from brain.lcm.facts import FactSummarizer

        return FactSummarizer()
    if name == "extractive_v1":
        from brain.lcm.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if name == "truncation":
        from brain.lcm.baselines import TruncationSummarizer

        return TruncationSummarizer()
    if name == "random":
        from brain.lcm.baselines import RandomSentenceSummarizer

        return RandomSentenceSummarizer()
    raise ValueError(f"offline_summarizer must be one of {', '.join(OFFLINE_NAMES)}, got {name!r}")
