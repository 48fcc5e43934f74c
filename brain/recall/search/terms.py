"""A query's words as FTS5 terms: quoted words without stop words, and CJK trigrams.

Tests: tests/brain/recall/search/test_terms.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from brain.recall.search.model import (
    WORD,
)
from brain.tokens import cjk_run


def fts_query(text: str) -> str | None:
    """The FTS5 query for free text: its words, quoted, OR-ed (None if it has none).

    Stop words are dropped when anything else is left: they match most rows,
    so they cost the most (a query with "the" ranked every row: 15 ms instead
    of 0.5 at 100k messages) and add least to the ranking.
    """
    phrases = fts_phrases(text)
    return " OR ".join(phrases) if phrases else None


def fts_phrases(text: str) -> list[str]:
    """The quoted words ``fts_query`` OR-s together, in query order (at most 64)."""
    words = list(dict.fromkeys(w.lower() for w in WORD.findall(text)))
    content = [w for w in words if w not in STOP_WORDS]
    words = content or words
    return [f'"{w}"' for w in words[:64]]


STOP_WORDS: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "too",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


@dataclass(frozen=True, slots=True)
class CjkTerms:
    """A query's CJK part: a trigram MATCH for runs of 3+ characters, and shorter runs."""

    match: str | None
    short: tuple[str, ...]


def cjk_terms(text: str) -> CjkTerms:
    """The CJK lookups for free text (nothing when it has no CJK characters).

    Chinese and Japanese put no spaces between words, so a run of CJK characters in
    a query is not one word to find whole. Its overlapping trigrams are OR-ed, and
    bm25 ranks the rows sharing most of them first. Runs of one or two characters
    have no trigram; they are found as substrings (a scan of the rows with CJK).
    """
    if text.isascii():
        return CjkTerms(None, ())
    grams: list[str] = []
    short: list[str] = []
    for run in dict.fromkeys(cjk_run().findall(text)):
        if len(run) < 3:
            short.append(run)
        else:
            grams += [run[i : i + 3] for i in range(len(run) - 2)]
    grams = list(dict.fromkeys(grams))[:64]
    match = " OR ".join(f'"{g}"' for g in grams) if grams else None
    return CjkTerms(match, tuple(short[:8]))
