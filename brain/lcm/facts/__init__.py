"""The fact summarizer, brain's offline default: see ``brain.lcm.facts.summarizer``."""

from brain.lcm.facts.summarizer import FactSummarizer

__all__ = ["FactSummarizer"]
