"""``brain_bm25``: FTS5's bm25, with each phrase's document frequency given by the caller.

FTS5's own ``bm25()`` starts every query by counting, for each phrase, the rows
that hold it anywhere in the table (its idf). For a word in most rows that count
reads the word's whole posting list: ~40 ns a row, 20-60 ms a query at 1M
messages, even when the query is scoped to one small conversation and ranks a
handful of rows. ``brain_bm25(fts, df0, df1, ...)`` computes the same score (same
k1, b, idf floor, row length over every column, average from the table's totals:
equal to ``bm25()`` to the last bit when the counts are exact) from counts the
caller has (``brain.recall.search.fulltext`` counts rare phrases exactly and
estimates common ones), so ranking costs only the rows it ranks (~2 us each in
Python). A negative count leaves its phrase out of the score: the conversation
token of a scoped query, or a phrase repeated in the expression.

Registered on every connection by ``brain.store.connection`` (a setup step).
Tested in tests/brain/store/test_bm25.py.
"""

from __future__ import annotations

import math
from typing import Any, Final

import apsw

NAME: Final = "brain_bm25"
K1: Final = 1.2
"""FTS5's bm25 constants (fts5_aux.c)."""
B: Final = 0.75
IDF_FLOOR: Final = 1e-6
"""FTS5 gives a phrase in more than half the rows this idf instead of a negative one."""


def idf(rows: int, df: int) -> float:
    """A phrase's idf as FTS5 computes it, over ``rows`` rows of which ``df`` hold it."""
    value = math.log((rows - df + 0.5) / (df + 0.5))
    return value if value > 0 else IDF_FLOOR


def _brain_bm25(api: apsw.FTS5ExtensionApi, *counts: Any) -> float:
    """The row's bm25 (negated, as ``bm25()``: lower is better) with the given counts."""
    cached = api.aux_data
    if cached is None:
        rows = api.row_count
        average = api.column_total_size(-1) / rows if rows else 1.0
        weights = [idf(rows, int(c)) if int(c) >= 0 else 0.0 for c in counts]
        del weights[api.phrase_count :]  # counts past the last phrase name nothing
        cached = (average, weights)
        api.aux_data = cached
    average, weights = cached
    norm = K1 * (1 - B + B * api.column_size(-1) / average)
    score = 0.0
    locations = api.phrase_locations
    for phrase, weight in enumerate(weights):
        if weight:
            # map, not a generator: this runs for every row ranked (~550 a query).
            hits = sum(map(len, locations(phrase)))
            if hits:
                score += weight * hits * (K1 + 1) / (hits + norm)
    return -score


def register(conn: apsw.Connection) -> None:
    """Make ``brain_bm25`` callable in ``conn``'s statements."""
    conn.register_fts5_function(NAME, _brain_bm25)
