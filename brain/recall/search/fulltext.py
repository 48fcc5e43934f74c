"""``full_text``: bm25 over the FTS5 indexes of messages, summaries and rollups, and CJK
lookups.

The FTS index drives the query even when it is scoped to one conversation (a
CROSS JOIN fixes the loop order). Tested through ``grep``
(tests/brain/recall/search/test_fulltext.py).
"""

from __future__ import annotations

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
            keep(_ranked_messages(store, options, (low, high, *bounds)))
        if cjk.match is not None:
            rows = store.execute(
                _RANKED_MESSAGES.format(fts="messages_cjk", rank="bm25(messages_cjk)"),
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
    "{rank}, snippet({fts}, 0, '[', ']', '…', 16) "
    "FROM {fts} CROSS JOIN messages m ON m.id = {fts}.rowid "
    "CROSS JOIN conversations c ON c.id = m.conversation_id "
    "WHERE {fts} MATCH ? AND {fts}.rowid BETWEEN ? AND ? "
    "AND (? IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY {rank} LIMIT ?"
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

_MESSAGE_RANK: Final = "bm25(messages_fts, 1.0, 1.0, 0.0)"
"""bm25 over a message's text and speaker; its ``conv`` token (the scope) weighs nothing."""
_TEXT: Final = "{content name}"
"""The columns the query's words are looked for in (never ``conv``: a word "c12" is text)."""
_SCOPE_TOKENS: Final = 64
"""Conversations a scope names at most for ``conv`` tokens in the MATCH; more are
filtered in the join, as before schema v21."""

# The bounded ranking (``_bounded_messages``).
_LARGE: Final = 20_000
"""Sum of the phrases' document counts from which a query is ranked by the bounded rule."""
_NEWEST: Final = 500
"""The newest matching rows in scope the bounded rule ranks..."""
_RARE_ROWS: Final = 1_000
"""...besides every row in scope holding the rarest phrases, while their counts sum to
at most this."""
_SELECTIVE: Final = 16
"""The rarest phrase past the rare ones also has its newest rows ranked when it holds
at most this fraction of the matches (fewer, and the newest matches mostly hold it)."""
_WINDOW: Final = 10_000
"""Newest message ids a phrase is counted in first: a phrase whose count there
extrapolates to more than ``_COUNT_EXACTLY`` rows keeps that estimate..."""
_COUNT_EXACTLY: Final = 20_000
"""...the others are counted over the whole table (~40 ns a row)."""


def _ranked_messages(store: Store, options: GrepOptions, span: tuple[Any, ...]) -> list[Hit]:
    """The best message hits for the query's words, in scope (exact or bounded)."""
    phrases = fts_phrases(options.query)
    conversations = options.conversations
    scope = (
        [f"c{c}" for c in conversations]
        if conversations and len(conversations) <= _SCOPE_TOKENS
        else []
    )
    prefix = f"conv : ({' OR '.join(scope)}) AND " if scope else ""
    words = f"{_TEXT} : ({' OR '.join(phrases)})"
    bounded = _bounded_messages(store, phrases, prefix, len(scope), span, options.limit)
    if bounded is not None:
        return bounded
    rows = store.execute(
        _RANKED_MESSAGES.format(fts="messages_fts", rank=_MESSAGE_RANK),
        (prefix + words, *span, options.limit),
    )
    return [_message_hit(r, -float(r[6]), r[7]) for r in rows]


def _bounded_messages(
    store: Store,
    phrases: list[str],
    prefix: str,
    scope_phrases: int,
    span: tuple[Any, ...],
    limit: int,
) -> list[Hit] | None:
    """The best hits of a query whose phrases hold many rows, ranking a bounded set
    of rows; None when the phrases' counts sum to less than ``_LARGE`` (rank every
    match: cheap enough, and exact).

    FTS5 ranks every row a query matches (~1 us each with the join), and its bm25
    counts each phrase's rows over the whole table first (~40 ns a row). Three
    words each in half of 1M messages cost ~1 s. So such a query ranks, with
    ``brain_bm25`` and the counts taken here, only (1) every row in scope holding
    the rarest phrases (phrases taken rarest first while their counts sum to at
    most ``_RARE_ROWS``), (2) the newest ``_NEWEST`` rows in scope holding the
    rarest of the other phrases (when two or more are left and it holds at most a
    ``_SELECTIVE``-th of the matches: it weighs most among them) and (3) the
    newest ``_NEWEST`` rows in scope matching any phrase. A row in none holds no
    rare phrase and is older than the newest matches: without a rare phrase it
    scores at most ``(k1 + 1) x`` the other phrases' idf, low by definition, and
    among near-equal scores the newer turn is the fairer pick for a memory. When
    that bound is below the ``limit``-th score found, the answer is exactly
    ranking every match (rows and scores, given the counts); otherwise it is the
    best of those rows. Scores are bm25's, with the count of a phrase in more than
    ``_COUNT_EXACTLY`` rows estimated from the newest ``_WINDOW`` messages (its idf
    is small and changes slowly with its count).
    """
    counts = _document_counts(store, phrases)
    if sum(counts) < _LARGE:
        return None
    skip = [-1] * scope_phrases
    every = f"{_TEXT} : ({' OR '.join(phrases)})"
    found: dict[int, float] = {}
    queries = [(prefix + every, skip + counts, _NEWEST)]
    rare: list[str] = []
    held = 0
    by_count = sorted(zip(counts, phrases, strict=True))
    for count, phrase in by_count:
        if held + count > _RARE_ROWS:
            break
        rare.append(phrase)
        held += count
    if rare:
        either = f"{_TEXT} : ({' OR '.join(rare)})"
        queries.append(
            (f"{prefix}{either} AND {every}", skip + [-1] * len(rare) + counts, _RARE_ROWS)
        )
    rest = by_count[len(rare) :]
    if len(rest) > 1 and rest[0][0] * _SELECTIVE <= sum(counts):
        # The rarest of the other phrases weighs most among them, and its rows are
        # few among the matches: its newest rows too.
        nearly = f"{_TEXT} : {rest[0][1]}"
        queries.append((f"{prefix}{nearly} AND {every}", [*skip, -1, *counts], _NEWEST))
    source: dict[int, int] = {}
    for at, (match, args, most) in enumerate(queries):
        sql = _SCORED_MESSAGES.format(marks=", ".join("?" for _ in args))
        for r in store.execute(sql, (*args, match, *span, most)):
            found[int(r[0])] = float(r[1])
            source.setdefault(int(r[0]), at)
    best = sorted(found.items(), key=lambda item: (item[1], -item[0]))[:limit]
    # Snippets for the chosen rows only, each from a walk of the query that found it,
    # over the span of ids they lie in: FTS5 looks a single row up by id in ~0.5 ms
    # (it sets the whole query up again), and walks ~1 us a row.
    hits: dict[int, Hit] = {}
    for at, (match, _, _) in enumerate(queries):
        ids = [row_id for row_id, _ in best if source[row_id] == at]
        if ids:
            rows = store.execute(_SHOWN_MESSAGES, (match, min(ids), max(ids), orjson.dumps(ids)))
            hits.update((int(r[0]), _message_hit(r, -found[int(r[0])], r[6])) for r in rows)
    return [hits[row_id] for row_id, _ in best if row_id in hits]


_SCORED_MESSAGES: Final = (
    "SELECT m.id, brain_bm25(messages_fts, {marks}) "
    "FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid "
    "WHERE messages_fts MATCH ? AND messages_fts.rowid BETWEEN ? AND ? "
    "AND (? IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY messages_fts.rowid DESC LIMIT ?"
)
"""Rows in scope, newest first, with their bounded-rule score (no snippet: most are dropped)."""
_SHOWN_MESSAGES: Final = (
    "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, "
    "snippet(messages_fts, 0, '[', ']', '…', 16) "
    "FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid "
    "CROSS JOIN conversations c ON c.id = m.conversation_id "
    "WHERE messages_fts MATCH ? AND messages_fts.rowid BETWEEN ? AND ? "
    "AND +messages_fts.rowid IN (SELECT value FROM json_each(?))"
)
"""The chosen rows' hit fields and snippets (the same MATCH: the same highlights). The
``+`` keeps the id list a filter of the walk: offered to FTS5 as a constraint, each id
would be looked up alone (~0.5 ms each at 1M messages)."""


def _document_counts(store: Store, phrases: list[str]) -> list[int]:
    """How many messages hold each phrase in their text (exact, or estimated when many).

    Each phrase is counted among the newest ``_WINDOW`` message ids first (the
    posting lists are read from that id on): a phrase whose share there puts it
    in more than ``_COUNT_EXACTLY`` messages keeps the extrapolation, the others
    are counted over the whole table.
    """
    total = int(store.scalar("SELECT n FROM counts WHERE name = 'messages'") or 0)
    newest = int(store.scalar("SELECT max(id) FROM messages") or 0)
    low = newest - _WINDOW
    # The FTS row sizes are the smallest rows keyed by message id (counting 10,000
    # message rows reads their content pages: 1.3 ms instead of 0.07).
    window = int(
        store.scalar("SELECT count(*) FROM messages_fts_docsize WHERE id > ?", (low,)) or 0
    )
    counts: list[int] = []
    for phrase in phrases:
        match = f"{_TEXT} : {phrase}"
        if window < total:
            seen = int(store.scalar(_COUNT_FROM, (match, low)) or 0)
            estimate = round(seen * total / window)
            if estimate > _COUNT_EXACTLY:
                counts.append(estimate)
                continue
        counts.append(int(store.scalar(_COUNT_FROM, (match, 0)) or 0))
    return counts


_COUNT_FROM: Final = (
    "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ? AND messages_fts.rowid > ?"
)


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
