"""``semantic`` and ``hybrid``: nearest vectors of the query, alone or fused with full text.

Fusion is by reciprocal rank (``rrf``) or min-max normalised scores averaged
(``weighted``); a message also scores a share of its better neighbour's.
Tested through ``grep`` with real vectors, in tests/brain/vectors/test_index.py
(the semantic and hybrid tests).
"""

from __future__ import annotations

from dataclasses import replace

import orjson

from brain.lcm.ids import public_message_id
from brain.recall.search.files import semantic_files
from brain.recall.search.fulltext import full_text_search
from brain.recall.search.model import (
    LEXICAL_WEIGHT,
    NEIGHBOUR_SHARE,
    RRF_K,
    GrepOptions,
    Hit,
    Nearest,
)
from brain.recall.search.snippets import snippet_lead
from brain.recall.search.terms import fts_query
from brain.store.connection import Store


def semantic_search(store: Store, options: GrepOptions, nearest: Nearest) -> list[Hit]:
    """``semantic`` grep: the nearest vectors, filtered by scope, time and suppression."""
    # Over-fetch: the time bounds, scope and suppression are applied after ranking.
    ranked = nearest(options.limit * 4 + 32)
    if options.scope == "files":
        return semantic_files(store, options, ranked)
    wanted = [(k, r) for k, r, _ in ranked if options.scope in ("both", k + "s")]
    found: dict[tuple[str, int], Hit] = {}
    if not options.since and not options.before:
        # Without time bounds the nearest ``limit`` are nearly always the answer (the
        # index has applied the scope): read their rows (content for the snippet)
        # first, the over-fetch only if some are suppressed (a ranked grep asks for
        # 100 of 432: a third of the reads; 3.4 -> 1.2 ms scoped to a 50k session).
        found = _resolve(store, options, wanted[: options.limit])
        if len(found) < options.limit:
            found |= _resolve(store, options, wanted[options.limit :])
    else:
        found = _resolve(store, options, wanted)
    hits = []
    for kind, row_id, score in ranked:
        hit = found.get((kind, row_id))
        if hit is not None:
            hits.append(replace(hit, score=score))
            if len(hits) == options.limit:
                break
    return hits


def hybrid_search(store: Store, options: GrepOptions, nearest: Nearest) -> list[Hit]:
    """``hybrid`` grep: the full-text and semantic rankings fused (``rrf`` or weighted)."""
    pool = replace(options, limit=max(options.limit * 3, 50))
    lexical = full_text_search(store, pool) if fts_query(options.query) is not None else []
    semantic = semantic_search(store, pool, nearest)
    fused: dict[tuple[str, str], float] = {}
    by_key: dict[tuple[str, str], Hit] = {}
    for ranking, share in ((lexical, LEXICAL_WEIGHT), (semantic, 1.0 - LEXICAL_WEIGHT)):
        if options.fusion == "rrf":
            weights = [1.0 / (RRF_K + rank + 1) for rank in range(len(ranking))]
        else:
            weights = [share * w for w in min_max([h.score for h in ranking])]
        for hit, weight in zip(ranking, weights, strict=True):
            key = (hit.kind, hit.id)
            fused[key] = fused.get(key, 0.0) + weight
            by_key.setdefault(key, hit)  # lexical first: its snippet marks the match
    if options.fusion == "weighted":
        spread_to_neighbours(store, options, fused, by_key)
    order = sorted(fused, key=lambda key: fused[key], reverse=True)
    return [replace(by_key[key], score=fused[key]) for key in order[: options.limit]]


def spread_to_neighbours(
    store: Store,
    options: GrepOptions,
    fused: dict[tuple[str, str], float],
    by_key: dict[tuple[str, str], Hit],
    info: dict[tuple[str, int | None], MessageInfo] | None = None,
) -> None:
    """Add to each message a share of its neighbours' scores (the turns before and after).

    A question's words often match the turn that asks or introduces a thing while
    the fact sits in the reply next to it. ``info``, when given, gets each neighbour
    row's ``MessageInfo`` by (session, seq): the ranking stage reads them for every
    candidate, and these rows are read here anyway.
    """
    keys = [k for k in fused if k[0] == "message"]
    if not keys:
        return
    positions = {(by_key[k].session, by_key[k].seq): k for k in keys}
    wanted = orjson.dumps([[by_key[k].session, by_key[k].seq] for k in keys])
    rows = store.execute(
        "SELECT c.session_id, m.seq, m.id, m.client_id, m.role, m.created_at, m.content, "
        "m.name, length(m.content), instr(m.content, '?') > 0 "
        "FROM json_each(?) j CROSS JOIN conversations c ON c.session_id = j.value ->> 0 "
        "CROSS JOIN messages m ON m.conversation_id = c.id "
        "AND m.seq IN ((j.value ->> 1) - 1, (j.value ->> 1) + 1) "
        "WHERE m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL",
        (wanted, options.since or "", options.before or "\uffff"),
    )
    base = dict(fused)
    gains: dict[tuple[str, str], float] = {}
    for session, seq, row_id, client_id, role, created_at, content, name, chars, asks in rows:
        if info is not None:
            info[(session, seq)] = (int(row_id), name, int(chars), int(asks))
        key = ("message", public_message_id(row_id, client_id))
        if key not in by_key:
            by_key[key] = Hit(
                "message", key[1], session, 0.0, snippet_lead(content), created_at, seq, role
            )
        for other in (seq - 1, seq + 1):
            source = positions.get((session, other))
            if source is not None:
                gains[key] = max(gains.get(key, 0.0), base[source])
    for key, gain in gains.items():
        fused[key] = fused.get(key, 0.0) + NEIGHBOUR_SHARE * gain


MessageInfo = tuple[int, str | None, int, int]
"""A message's row id, speaker name, characters and whether it holds a "?" (0 or 1)."""


def min_max(scores: list[float]) -> list[float]:
    """Scores scaled to [0, 1] (all 1.0 when they are equal)."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def _resolve(
    store: Store, options: GrepOptions, keys: list[tuple[str, int]]
) -> dict[tuple[str, int], Hit]:
    """Hits for (kind, row id) keys that pass the time bounds, scope and suppression."""
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    since = options.since or ""
    before = options.before or "\uffff"
    out: dict[tuple[str, int], Hit] = {}
    messages = orjson.dumps([r for k, r in keys if k == "message"])
    for r in store.execute(
        "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, m.content "
        "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE m.id IN (SELECT value FROM json_each(?)) AND (? IS NULL OR m.conversation_id IN "
        "(SELECT value FROM json_each(?))) AND m.created_at >= ? AND m.created_at < ? "
        "AND m.suppressed_at IS NULL",
        (messages, convs, convs, since, before),
    ):
        out[("message", int(r[0]))] = Hit(
            "message",
            public_message_id(r[0], r[1]),
            r[5],
            0.0,
            snippet_lead(r[6]),
            r[4],
            r[2],
            r[3],
        )
    summaries = orjson.dumps([r for k, r in keys if k == "summary"])
    for r in store.execute(
        "SELECT s.id, s.summary_id, s.latest_at, c.session_id, s.content "
        "FROM summaries s JOIN conversations c ON c.id = s.conversation_id "
        "WHERE s.id IN (SELECT value FROM json_each(?)) AND (? IS NULL OR s.conversation_id IN "
        "(SELECT value FROM json_each(?))) AND s.latest_at >= ? AND s.earliest_at < ? "
        "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL",
        (summaries, convs, convs, since, before),
    ):
        out[("summary", int(r[0]))] = Hit("summary", r[1], r[3], 0.0, snippet_lead(r[4]), r[2])
    return out
