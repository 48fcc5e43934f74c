"""The terms FTS5 indexes a word as, for looking words up in an ``fts5vocab`` table.

The full-text tables tokenize with ``porter unicode61 remove_diacritics 2``, so
their vocabularies hold stems ("deploys" is there as "deploi"), and a word looked
up as written is often not found. ``index_terms`` asks SQLite's own tokenizer: a
small FTS5 table in a private in-memory database per thread (the read connections
are ``query_only`` and cannot hold one), one insert and one read of its
``instance`` vocabulary, the words' terms in order. Results are cached per word.

Tested in tests/brain/store/test_stems.py.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Final

import apsw

TOKENIZE: Final = "porter unicode61 remove_diacritics 2"
"""The tokenizer of ``nodes_fts``, ``messages_fts`` and ``summaries_fts``."""

_local = threading.local()


def _connection() -> apsw.Connection:
    conn: apsw.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = apsw.Connection(":memory:")
        conn.execute(
            f"CREATE VIRTUAL TABLE words USING fts5(w, tokenize='{TOKENIZE}');"
            "CREATE VIRTUAL TABLE terms USING fts5vocab(words, instance);"
        )
        _local.conn = conn
    return conn


@functools.lru_cache(maxsize=65_536)
def index_term(word: str) -> str | None:
    """The term FTS5 indexes ``word`` as (its first token's), None if it has none."""
    conn = _connection()
    with conn:
        conn.execute("INSERT INTO words (rowid, w) VALUES (1, ?)", (word,))
        row = conn.execute("SELECT term FROM terms ORDER BY offset LIMIT 1").fetchone()
        conn.execute("DELETE FROM words")
    return None if row is None else str(row[0])


def index_terms(words: Sequence[str]) -> list[str | None]:
    """``index_term`` of each word, in order."""
    return [index_term(w) for w in words]
