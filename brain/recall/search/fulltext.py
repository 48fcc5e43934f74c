"""``full_text``: bm25 over the FTS5 indexes of messages, summaries and rollups, and CJK
lookups.

The FTS index drives the query even when it is scoped to one conversation (a
CROSS JOIN fixes the loop order). Tested through ``grep``
(tests/brain/recall/search/test_fulltext.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, Literal

import orjson

from brain.errors import InvalidInput
from brain.lcm.ids import public_message_id
from brain.lcm.rollups.read import VISIBLE as ROLLUP_VISIBLE
from brain.recall.search.files import ranked_files
from brain.recall.search.model import (
    GrepOptions,
    Hit,
)
from brain.recall.search.snippets import make_snippet
from brain.recall.search.terms import cjk_terms, fts_phrases, fts_query
from brain.store.connection import Store


def full_text_search(store: Store, options: GrepOptions) -> list[Hit]:
    """``full_text`` grep: bm25 over messages and summaries (or payload files), best first."""
    words = fts_query(options.query)
    cjk = cjk_terms(options.query)
    if words is None and not cjk.match and not cjk.short:
        raise InvalidInput("query", "has no words to search for")
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    bounds = (convs, convs, options.since or "", options.before or "\uffff")
    if options.scope == "files":
        # fts_query keeps CJK runs as words, so a query is never only CJK terms here.
        # Inside files a CJK run is one token (no trigram index): whole runs match.
        return ranked_files(store, options, words, bounds) if words is not None else []
    best: dict[tuple[str, str], Hit] = {}

    def keep(hits: list[Hit]) -> None:
        for hit in hits:
            key = (hit.kind, hit.id)
            if key not in best or best[key].score < hit.score:
                best[key] = hit

    if options.scope in ("messages", "both"):
        low, high = _message_span(store, convs)
        if words is not None:
            span = (low, high, *bounds)
            pruned = _pruned_messages(store, fts_phrases(options.query), span, options.limit)
            if pruned is None:
                pruned = list(
                    store.execute(
                        _RANKED_MESSAGES.format(fts="messages_fts"), (words, *span, options.limit)
                    )
                )
            keep([_message_hit(r, -float(r[6]), r[7]) for r in pruned])
        if cjk.match is not None:
            rows = store.execute(
                _RANKED_MESSAGES.format(fts="messages_cjk"),
                (cjk.match, low, high, *bounds, options.limit),
            )
            keep([_message_hit(r, -float(r[6]), r[7]) for r in rows])
        if cjk.short:
            keep(_containing(store, "message", cjk.short, (low, high, *bounds), options.limit))
    if options.scope in ("summaries", "both"):
        for table, match in (("summaries_fts", words), ("summaries_cjk", cjk.match)):
            if match is not None:
                rows = store.execute(
                    _RANKED_SUMMARIES.format(fts=table), (match, *bounds, options.limit)
                )
                keep([Hit("summary", r[0], r[2], -float(r[3]), r[4], r[1]) for r in rows])
        if cjk.short:
            keep(_containing(store, "summary", cjk.short, bounds, options.limit))
        if words is not None:
            rows = store.execute(_RANKED_ROLLUPS, (words, convs, convs, *bounds[2:], options.limit))
            keep([Hit("rollup", r[0], r[2], -float(r[3]), r[4], r[1]) for r in rows])
    hits = sorted(best.values(), key=lambda h: h.score, reverse=True)
    return hits[: options.limit]


_RANKED_MESSAGES: Final = (
    "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, "
    "bm25({fts}), snippet({fts}, 0, '[', ']', '…', 16) "
    "FROM {fts} CROSS JOIN messages m ON m.id = {fts}.rowid "
    "CROSS JOIN conversations c ON c.id = m.conversation_id "
    "WHERE {fts} MATCH ? AND {fts}.rowid BETWEEN ? AND ? "
    "AND (? IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY bm25({fts}) LIMIT ?"
)
_RANKED_SUMMARIES: Final = (
    "SELECT s.summary_id, s.latest_at, c.session_id, bm25({fts}), "
    "snippet({fts}, 0, '[', ']', '…', 16) "
    "FROM {fts} CROSS JOIN summaries s ON s.id = {fts}.rowid "
    "CROSS JOIN conversations c ON c.id = s.conversation_id "
    "WHERE {fts} MATCH ? AND (? IS NULL OR s.conversation_id IN "
    "(SELECT value FROM json_each(?))) AND s.latest_at >= ? AND s.earliest_at < ? "
    "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL "
    "ORDER BY bm25({fts}) LIMIT ?"
)

# bm25 as FTS5 computes it (fts5_aux.c): each phrase adds
# idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl)), f its hits in the row, with
# idf = ln((N - n + 0.5) / (n + 0.5)) (1e-6 when not positive) over the whole table, so a
# phrase's share of a row's score is the same whatever else the query holds, and is
# below idf * (k1 + 1).
_K1: Final = 1.2
_PRUNE_FROM: Final = 20_000
"""Rows matching any phrase above which ranking every one is worth avoiding (~15 ms)."""
_PRUNE_RATIO: Final = 8
"""The rows with a rare phrase must be this many times fewer than all matching rows."""


def _pruned_messages(
    store: Store, phrases: list[str], span: tuple[Any, ...], limit: int
) -> list[tuple[Any, ...]] | None:
    """The ``limit`` best message rows for the OR of ``phrases``, ranking only the rows
    that hold a rare phrase; None when that cannot be shown exact (rank them all).

    A query of a rare word and common ones matches most rows through the common
    words, and ranking each costs ~1 us (233 ms at 1M messages). But a row with none
    of the rare phrases scores at most the common phrases' bound (``_K1 + 1`` times
    their idf). The rows holding a rare phrase are ranked twice: by ``(rare) AND
    (common)``, which scores a row with both kinds as the full query does, and by
    ``(rare)``, which scores the rows with only rare phrases as the full query does
    (and the others lower: those among its best are in the first ranking's best, or
    below all of them). If the ``limit``-th best of both scores above the bound, no
    other row can enter the best ``limit``: the answer (rows, scores and snippets) is
    exactly the full query's. More phrases count as rare until it holds or their rows
    are more than an eighth of all matching rows (then ranking them twice costs
    about as much as ranking every row once).
    """
    if len(phrases) < 2:
        return None
    counts = {
        p: int(store.scalar("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (p,)))
        for p in phrases
    }
    everything = sum(counts.values())
    if everything < _PRUNE_FROM:
        return None
    rows = max(int(store.scalar("SELECT n FROM counts WHERE name = 'messages'") or 0), everything)
    idf = {p: max(math.log((rows - n + 0.5) / (n + 0.5)), 1e-6) for p, n in counts.items()}
    order = sorted(phrases, key=lambda p: counts[p])
    ranked_sql = _RANKED_MESSAGES.format(fts="messages_fts")
    for split in range(1, len(order)):
        rare, common = order[:split], order[split:]
        # Both rankings rank the rows with a rare phrase, each row at ~3x the cost
        # of a row of the full ranking (measured): worth it while they are few.
        if sum(counts[p] for p in rare) * _PRUNE_RATIO > everything:
            return None
        # A hair above the bound: N comes from the row counter, FTS5 counts its own.
        bound = (_K1 + 1) * sum(idf[p] for p in common) * 1.001 + 1e-9
        either = f"({' OR '.join(rare)})"
        both = f"{either} AND ({' OR '.join(common)})"
        best = {r[0]: tuple(r) for r in store.execute(ranked_sql, (either, *span, limit))}
        best.update((r[0], tuple(r)) for r in store.execute(ranked_sql, (both, *span, limit)))
        ranked = sorted(best.values(), key=lambda r: float(r[6]))[:limit]
        if len(ranked) == limit and -float(ranked[-1][6]) > bound:
            return ranked
    return None


# Day and week rollups (``brain.lcm.rollups``) are summaries too: found with them,
# shown while every session they draw on is in scope and none of their leaves is hidden.
_RANKED_ROLLUPS: Final = " ".join(
    (
        "SELECT r.rollup_id, r.latest_at, r.session_id, bm25(rollups_fts),",
        "snippet(rollups_fts, 0, '[', ']', '…', 16)",
        "FROM rollups_fts CROSS JOIN rollups r ON r.id = rollups_fts.rowid",
        "WHERE rollups_fts MATCH ? AND",
        ROLLUP_VISIBLE,
        "AND r.latest_at >= ? AND r.earliest_at < ? ORDER BY bm25(rollups_fts) LIMIT ?",
    )
)


def _message_hit(r: Sequence[Any], score: float, snippet: str) -> Hit:
    """A message hit from a row starting (id, client_id, seq, role, created_at, session)."""
    return Hit("message", public_message_id(r[0], r[1]), r[5], score, snippet, r[4], r[2], r[3])


def _containing(
    store: Store,
    kind: Literal["message", "summary"],
    runs: tuple[str, ...],
    params: tuple[Any, ...],
    limit: int,
) -> list[Hit]:
    """Rows with CJK text containing any of ``runs``, those with more runs and newer first."""
    patterns = orjson.dumps([f"%{run}%" for run in runs])
    if kind == "message":
        rows = store.execute(
            "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, m.content "
            "FROM messages_cjk x CROSS JOIN messages m ON m.id = x.rowid "
            "CROSS JOIN conversations c ON c.id = m.conversation_id "
            "WHERE EXISTS (SELECT 1 FROM json_each(?) p WHERE x.content LIKE p.value) "
            "AND x.rowid BETWEEN ? AND ? "
            "AND (? IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?))) "
            "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
            "ORDER BY m.id DESC",
            (patterns, *params),
        )
    else:
        rows = store.execute(
            "SELECT s.summary_id, NULL, NULL, NULL, s.latest_at, c.session_id, s.content "
            "FROM summaries_cjk x CROSS JOIN summaries s ON s.id = x.rowid "
            "CROSS JOIN conversations c ON c.id = s.conversation_id "
            "WHERE EXISTS (SELECT 1 FROM json_each(?) p WHERE x.content LIKE p.value) "
            "AND (? IS NULL OR s.conversation_id IN (SELECT value FROM json_each(?))) "
            "AND s.latest_at >= ? AND s.earliest_at < ? "
            "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL "
            "ORDER BY s.id DESC",
            (patterns, *params),
        )
    hits: list[Hit] = []
    for r in rows:
        text: str = r[6]
        present = [run for run in runs if run in text]
        at = text.find(present[0]) if present else 0
        snippet = make_snippet(text, at, at + len(present[0]) if present else 0)
        score = float(len(present))
        if kind == "message":
            hits.append(_message_hit(r, score, snippet))
        else:
            hits.append(Hit("summary", r[0], r[5], score, snippet, r[4]))
    hits.sort(key=lambda h: h.score, reverse=True)  # stable: newest first among equals
    return hits[:limit]


def _message_span(store: Store, convs: bytes | None) -> tuple[int, int]:
    """The message row ids the conversations' messages lie between (all rows for None).

    FTS5 seeks to a rowid range in its posting lists instead of reading them whole,
    so a search scoped to one conversation costs what that conversation's share of
    the index costs (measured at 100k messages, 20 conversations: 6.0 -> 0.7 ms p50).
    A conversation's row ids grow with its seq, so the ends come from the
    (conversation_id, seq) index.
    """
    if convs is None:
        return 0, _MAX_ROWID
    row = store.one(
        "SELECT min(low), max(high) FROM (SELECT "
        "(SELECT id FROM messages WHERE conversation_id = j.value ORDER BY seq LIMIT 1) low, "
        "(SELECT id FROM messages WHERE conversation_id = j.value ORDER BY seq DESC LIMIT 1) "
        "high FROM json_each(?) j)",
        (convs,),
    )
    if row is None or row[0] is None:
        return 1, 0  # no messages: an empty range
    return int(row[0]), int(row[1])


_MAX_ROWID: Final = (1 << 63) - 1
