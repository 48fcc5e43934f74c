"""What a search takes and gives: ``GrepOptions`` in, ``Hit``s out, and shared limits.

Plain types and constants; tested through ``grep`` in every test of tests/brain/recall/search/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

import regex

Mode = Literal["regex", "full_text", "semantic", "hybrid"]
GrepScope = Literal["messages", "summaries", "both", "files"]
Fusion = Literal["rrf", "weighted"]
Nearest = Callable[[int], "list[tuple[str, int, float]]"]
"""``nearest(k)``: up to k (kind, row id, similarity) for the query, best first, in scope."""

WORD: Final = regex.compile(r"[\p{L}\p{N}_]+")
PAGE: Final = 500
SNIPPET_CHARS: Final = 160
REGEX_BUDGET_S: Final = 1.0
RRF_K: Final = 60
NEIGHBOUR_SHARE: Final = 0.5
"""Hybrid: a message also scores this share of its better neighbour's fused score.

LoCoMo dev recall@10/@50 (weighted fusion): without 65.2/79.8; share 0.2 69.1/85.7,
0.35 71.5/87.0, 0.5 73.2/87.3, 0.65 73.9/87.4, 0.8 73.4/87.5, 1.0 72.5/87.1; adding
both neighbours' scores instead of the better one: 0.2 71.8/86.2, 0.5 70.0/86.7 (and
MRR falls to 0.35). Tuned on the dev set itself; 0.5 sits on the flat part."""
LEXICAL_WEIGHT: Final = 0.7
"""Weighted fusion: the full_text share of a hit's score (the semantic share is the rest).

LoCoMo dev recall@10 by full_text share: 0.5 62.3, 0.6 64.4, 0.7 65.2, 0.8 65.1
(full_text alone 63.9, rrf 61.2), tuned on the dev set itself."""


@dataclass(frozen=True, slots=True)
class GrepOptions:
    """What to search for and where. ``conversations`` None means every conversation."""

    query: str
    mode: Mode = "full_text"
    scope: GrepScope = "both"
    conversations: tuple[int, ...] | None = None
    since: str | None = None
    before: str | None = None
    limit: int = 20
    fusion: Fusion = "weighted"
    rank: bool = True
    """Hybrid and full_text: order by the learned ranking stage (``ranking``); False
    keeps the fused (or bm25) order."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One match: a message, a summary, a day or week rollup (``rol_`` id) or a payload
    file, with a snippet around the match."""

    kind: Literal["message", "summary", "rollup", "file"]
    id: str
    session: str
    score: float
    snippet: str
    created_at: str
    seq: int | None = None
    role: str | None = None
    name: str | None = None
    """Who said a message hit (its ingested ``name``), if it was given."""
