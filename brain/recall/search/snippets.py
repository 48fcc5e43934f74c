"""What a hit shows of its text: the match with context around it, or the text's start.

Tested through ``grep``: tests/brain/recall/search/test_pattern.py (marked
snippets) and test_files.py.
"""

from __future__ import annotations

from brain.recall.search.model import (
    SNIPPET_CHARS,
)


def snippet_lead(text: str) -> str:
    """A semantic hit's snippet: the start of its text (no single span matched)."""
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…"


def make_snippet(text: str, start: int, end: int) -> str:
    """The match with context around it, marked like FTS snippets: ``…before [match] after…``."""
    pad = max(0, (SNIPPET_CHARS - (end - start)) // 2)
    left = max(0, start - pad)
    right = min(len(text), end + pad)
    return (
        ("…" if left > 0 else "")
        + text[left:start]
        + "["
        + text[start:end]
        + "]"
        + text[end:right]
        + ("…" if right < len(text) else "")
    )
