"""grep: finding what was said, in messages and summaries, or inside payload files.

Four modes:

* ``full_text``: FTS5 with bm25 ranking. The user's text is reduced to its
  words, each quoted, so punctuation, quotes and operator words (AND, NOT,
  NEAR) are searched for rather than interpreted and never raise. The FTS
  index drives the query even when it is scoped to one conversation (a
  CROSS JOIN fixes the loop order).
* ``regex``: the ``regex`` module's engine with a time budget for the whole
  search; rows are scanned newest first in pages, so a pathological pattern
  ends with an error within the budget and memory stays flat.
* ``semantic``: nearest vectors (``brain.vectors.index``) of the query's embedding;
  only what is embedded so far is found.
* ``hybrid``: the full_text and semantic rankings fused, by reciprocal rank
  (``rrf``, k=60) or by min-max normalised scores averaged (``weighted``).

Hybrid and full_text (not scope ``files``) then go through the learned ranking
stage (``ranking``), unless ``rank`` is False.

Scope ``files`` searches the text of large payload files (``brain.payloads.filetext``)
instead: full_text is bm25 over ``files_fts`` (the first ``INDEX_BYTES`` of each
payload), regex reads the files themselves in bounded pieces under the same
budget, and semantic ranks a file by its message's vector (the message's stub
names the file and carries its exploration summary; the payload itself is not
embedded). A file is as visible as its message: same conversation, the
message's ``created_at`` for ``since``/``before``, hidden when it is suppressed.

Hits carry the ids ``describe`` and ``expand`` take: a message's client id
(or ``msg_<n>``), a summary's ``sum_`` id, a payload's ``file_`` id.

This module dispatches; each mode is a module of this package (``fulltext``
with ``terms``, ``pattern``, ``semantic``, ``files``), ``model`` holds the
options, hits and limits, ``snippets`` what a hit shows.
"""

from __future__ import annotations

from dataclasses import replace

import orjson

from brain.errors import InvalidInput
from brain.recall.search.fulltext import full_text_search
from brain.recall.search.model import (
    LEXICAL_WEIGHT,
    NEIGHBOUR_SHARE,
    REGEX_BUDGET_S,
    RRF_K,
    Fusion,
    GrepOptions,
    GrepScope,
    Hit,
    Mode,
    Nearest,
)
from brain.recall.search.pattern import regex_search
from brain.recall.search.ranking import ranked_search
from brain.recall.search.semantic import hybrid_search, semantic_search
from brain.recall.search.terms import STOP_WORDS, CjkTerms, cjk_terms, fts_query
from brain.store.connection import Store

__all__ = [
    "LEXICAL_WEIGHT",
    "NEIGHBOUR_SHARE",
    "REGEX_BUDGET_S",
    "RRF_K",
    "STOP_WORDS",
    "CjkTerms",
    "Fusion",
    "GrepOptions",
    "GrepScope",
    "Hit",
    "Mode",
    "Nearest",
    "cjk_terms",
    "fts_query",
    "grep",
]


def grep(store: Store, options: GrepOptions, nearest: Nearest | None = None) -> list[Hit]:
    """Matches, best first (newest first for regex), at most ``options.limit``.

    ``nearest`` answers the vector side of semantic and hybrid searches.
    """
    if options.rank and options.mode in ("full_text", "hybrid") and options.scope != "files":
        if options.mode == "hybrid" and nearest is None:
            raise InvalidInput("mode", "hybrid search needs a vector index")
        if options.mode == "full_text" and fts_query(options.query) is None:
            # CJK runs only (or no words: it raises): nothing for the model to weigh.
            return _with_names(store, full_text_search(store, options))
        return _with_names(store, ranked_search(store, options, nearest))
    if options.mode == "regex":
        hits = regex_search(store, options)
    elif options.mode in ("semantic", "hybrid"):
        if nearest is None:
            raise InvalidInput("mode", f"{options.mode} search needs a vector index")
        if options.mode == "semantic":
            hits = semantic_search(store, options, nearest)
        else:
            hits = hybrid_search(store, options, nearest)
    else:
        hits = full_text_search(store, options)
    return _with_names(store, hits)


def _with_names(store: Store, hits: list[Hit]) -> list[Hit]:
    """Message hits with their speakers' names, looked up in one statement.

    Done once here rather than in each search's query: the hits are few, the
    queries many.
    """
    wanted = [[h.session, h.seq] for h in hits if h.kind == "message" and h.seq is not None]
    if not wanted:
        return hits
    names = {
        (str(r[0]), int(r[1])): str(r[2])
        for r in store.execute(
            "SELECT c.session_id, m.seq, m.name FROM json_each(?) j "
            "CROSS JOIN conversations c ON c.session_id = j.value ->> 0 "
            "CROSS JOIN messages m ON m.conversation_id = c.id AND m.seq = j.value ->> 1 "
            "WHERE m.name IS NOT NULL",
            (orjson.dumps(wanted).decode(),),
        )
    }
    return [
        replace(h, name=names[(h.session, h.seq)])
        if h.kind == "message" and h.seq is not None and (h.session, h.seq) in names
        else h
        for h in hits
    ]
