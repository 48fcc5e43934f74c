"""Token estimates.

A cheap, deterministic estimate used for budgets and thresholds: one token per
four UTF-8 bytes, rounded up. Four bytes per token matches English prose for
the common BPE vocabularies; CJK text (three bytes a character) comes out at
about 0.75 tokens a character, close to what those tokenizers produce. It is an
estimate by design: the same text always costs the same, with no model files.
"""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """Return the estimated token count of ``text`` (0 for the empty string)."""
    if text.isascii():
        return (len(text) + 3) // 4
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


MESSAGE_OVERHEAD = 4
"""Tokens a chat API spends per message on role and framing, beyond its content."""


def message_cost(content_tokens: int) -> int:
    """What one message costs in an assembled context."""
    return content_tokens + MESSAGE_OVERHEAD
