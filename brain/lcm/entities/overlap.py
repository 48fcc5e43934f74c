"""Entities shared between a query and messages: a ranking feature and a second hop.

``entity_overlap`` counts, for each candidate message of a ranked search, the
distinct entities of the query it mentions: one SQL statement over the
candidates, no per-candidate Python. ``second_hop`` answers multi-hop questions
whose evidence shares no word with the query but names what the first hits
name ("where did the person Caroline met at the support group move?"): the
messages that share the most (and the rarest) entities with the top hits.
Suppressed messages count for nothing and are never returned.

Tested in tests/brain/lcm/entities/test_overlap.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import orjson

from brain.lcm.entities.extract import extract
from brain.store.connection import Store

HOP_SOURCES: Final = 200
"""At most this many entities of the top hits drive a second hop (the rarest)."""
HOP_COMMON: Final = 50
"""An entity mentioned in more messages than this is too common to link two turns."""


def query_entities(store: Store, query: str, *, common: int | None = None) -> list[int]:
    """Ids of the stored entities ``query`` mentions (kind and key agree); with
    ``common``, only those mentioned in at most that many messages (counting stops
    there, so an entity in every message costs no more than a rare one)."""
    pairs = {(m.kind, m.key) for m in extract(query)}
    if not pairs:
        return []
    rows = store.execute(
        "SELECT e.id FROM json_each(?) j JOIN entities e "
        "ON e.kind = j.value ->> 0 AND e.key = j.value ->> 1 "
        "WHERE ?2 IS NULL OR (SELECT count(*) FROM (SELECT 1 FROM entity_mentions em "
        "WHERE em.entity_id = e.id LIMIT ?2 + 1)) <= ?2",
        (orjson.dumps(sorted(pairs)).decode(), common),
    )
    return [int(r[0]) for r in rows]


def entity_overlap(
    store: Store, query: str, row_ids: npt.NDArray[np.int64], *, common: int | None = None
) -> npt.NDArray[np.float64]:
    """For each message row id, how many distinct entities of ``query`` it mentions
    (with ``common``: only entities in at most that many messages, see ``query_entities``).

    0 for ids that are not messages (-1 for summaries), suppressed messages and
    queries that name no stored entity.
    """
    out = np.zeros(len(row_ids), dtype=np.float64)
    entity_ids = query_entities(store, query, common=common) if len(row_ids) else []
    if not entity_ids:
        return out
    wanted = sorted({int(r) for r in row_ids if r >= 0})
    rows = store.execute(
        "SELECT em.message_id, count(*) FROM entity_mentions em "
        "JOIN messages m ON m.id = em.message_id AND m.suppressed_at IS NULL "
        "WHERE em.entity_id IN (SELECT value FROM json_each(?)) "
        "AND em.message_id IN (SELECT value FROM json_each(?)) GROUP BY em.message_id",
        (orjson.dumps(entity_ids).decode(), orjson.dumps(wanted).decode()),
    )
    counts = {int(r[0]): float(r[1]) for r in rows}
    if counts:
        out[:] = [counts.get(int(r), 0.0) for r in row_ids]
    return out


def second_hop(
    store: Store,
    row_ids: Sequence[int],
    *,
    conversations: Sequence[int] = (),
    limit: int = 50,
) -> list[int]:
    """Message row ids that share entities with the messages ``row_ids``, best first.

    A message's score is the sum over shared entities of 1 / (messages mentioning
    the entity, in any conversation): a rare name links two turns more than a common
    one; entities in more than ``HOP_COMMON`` messages are ignored (a name common
    across the database, the user's own, links nothing even where it is rare). The
    given ids are never returned, nor suppressed messages, nor (when
    ``conversations`` is given) messages of other conversations.
    """
    sources = sorted({int(r) for r in row_ids if r >= 0})
    if not sources or limit <= 0:
        return []
    scope = orjson.dumps(sorted(set(conversations))).decode()
    rows = store.execute(
        """
        WITH src(entity_id) AS (
            SELECT DISTINCT entity_id FROM entity_mentions
            WHERE message_id IN (SELECT value FROM json_each(:sources))
        ),
        counted(entity_id, n) AS (
            -- Rarity is counted over every conversation, and the count stops past
            -- :common: a name in every message costs no more than a rare one, in
            -- or out of scope (counting inside the scope walked all its mentions).
            SELECT entity_id, (SELECT count(*) FROM (
                SELECT 1 FROM entity_mentions em WHERE em.entity_id = src.entity_id
                LIMIT :common + 1)) FROM src
        ),
        weighted(entity_id, weight) AS (
            SELECT entity_id, 1.0 / n FROM counted WHERE n BETWEEN 1 AND :common
            ORDER BY n LIMIT :hop
        )
        SELECT em.message_id, sum(w.weight) AS score FROM weighted w
        JOIN entity_mentions em USING (entity_id)
        JOIN messages m ON m.id = em.message_id AND m.suppressed_at IS NULL
        WHERE em.message_id NOT IN (SELECT value FROM json_each(:sources))
          AND (:scoped = 0 OR em.conversation_id IN (SELECT value FROM json_each(:scope)))
        GROUP BY em.message_id ORDER BY score DESC, em.message_id LIMIT :limit
        """,
        {
            "sources": orjson.dumps(sources).decode(),
            "scoped": 1 if conversations else 0,
            "scope": scope,
            "common": HOP_COMMON,
            "hop": HOP_SOURCES,
            "limit": limit,
        },
    )
    return [int(r[0]) for r in rows]
