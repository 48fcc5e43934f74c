"""Looking entities up: by name (prefix, word prefix or fuzzy) and one entity's mentions.

Both read only mentions of messages that are not suppressed, within the
conversations given (``None``: every conversation), so a suppressed message's
entities are neither returned nor counted, and an entity named only there is
not found. Tested in tests/brain/lcm/entities/test_lookup.py and, through the
daemon, tests/e2e/test_entities_daemon.py.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from brain.errors import InvalidInput, NotFound
from brain.lcm.entities.extract import KINDS, entity_key
from brain.lcm.ids import public_message_id
from brain.store.connection import Store

SNIPPET_CHARS: Final = 80
"""Characters of context on each side of a mention in ``entity``'s snippets."""
FUZZY_POOL: Final = 5_000
"""Keys (sharing the query's first character) compared for a fuzzy match."""
FUZZY_CUTOFF: Final = 0.75

# Every kind when :kind is NULL.
_EXACT: Final = "SELECT id FROM entities WHERE key = :key AND (:kind IS NULL OR kind = :kind)"
_PREFIX: Final = (
    "SELECT id FROM entities WHERE key >= :key AND key < :key || char(1114111) "
    "AND (:kind IS NULL OR kind = :kind) LIMIT :pool"
)
_WORD: Final = (
    "SELECT id FROM entities WHERE key LIKE :like ESCAPE '\\' "
    "AND (:kind IS NULL OR kind = :kind) LIMIT :pool"
)
_FIRST_CHAR: Final = (
    "SELECT id, key FROM entities WHERE key >= :first AND key < :first || char(1114111) "
    "AND (:kind IS NULL OR kind = :kind) LIMIT :pool"
)
_BY_KEY: Final = (
    "SELECT id, kind, name FROM entities WHERE key = :key "
    "AND (:kind IS NULL OR kind = :kind) ORDER BY id"
)
# The statements below read mentions of the entities :ids in scope, skipping
# suppressed messages (:scoped = 0: every conversation).
_COUNTED: Final = (
    "SELECT em.entity_id, (SELECT name FROM entities WHERE id = em.entity_id), "
    "(SELECT kind FROM entities WHERE id = em.entity_id), "
    "(SELECT key FROM entities WHERE id = em.entity_id), count(*), sum(em.count), "
    "count(DISTINCT em.conversation_id), min(em.created_at), max(em.created_at) "
    "FROM entity_mentions em "
    "JOIN messages m ON m.id = em.message_id AND m.suppressed_at IS NULL "
    "WHERE em.entity_id IN (SELECT value FROM json_each(:ids)) "
    "AND (:scoped = 0 OR em.conversation_id IN (SELECT value FROM json_each(:scope))) "
    "GROUP BY em.entity_id"
)
_TOTAL: Final = (
    "SELECT count(DISTINCT em.message_id) FROM entity_mentions em "
    "JOIN messages m ON m.id = em.message_id AND m.suppressed_at IS NULL "
    "WHERE em.entity_id IN (SELECT value FROM json_each(:ids)) "
    "AND (:scoped = 0 OR em.conversation_id IN (SELECT value FROM json_each(:scope)))"
)
_MENTIONS: Final = (
    "SELECT (SELECT session_id FROM conversations WHERE id = m.conversation_id), m.id, "
    "m.client_id, m.seq, m.role, m.created_at, sum(em.count), min(em.start), min(em.end), "
    "m.content FROM entity_mentions em "
    "JOIN messages m ON m.id = em.message_id AND m.suppressed_at IS NULL "
    "WHERE em.entity_id IN (SELECT value FROM json_each(:ids)) "
    "AND (:scoped = 0 OR em.conversation_id IN (SELECT value FROM json_each(:scope))) "
    "GROUP BY m.id ORDER BY m.created_at, m.id LIMIT :limit"
)


@dataclass(frozen=True, slots=True)
class EntityFound:
    """One entity, with what its visible mentions in scope add up to."""

    name: str
    kind: str
    key: str
    messages: int
    """Messages that mention it."""
    mentions: int
    """Times it is named, over those messages."""
    sessions: int
    first_seen: str
    last_seen: str
    match: str
    """How the name matched: exact, prefix, word (a later word's prefix) or fuzzy."""


@dataclass(frozen=True, slots=True)
class EntityMention:
    """One message that mentions an entity."""

    session: str
    id: str
    seq: int
    role: str
    created_at: str
    count: int
    snippet: str
    """The message text around the first mention (``…`` where it was cut)."""


@dataclass(frozen=True, slots=True)
class EntityMentions:
    """``entity``: the entity and its mentions in time order."""

    name: str
    kind: str
    key: str
    total: int
    """Visible mentions in scope (``mentions`` holds at most ``limit`` of them)."""
    mentions: tuple[EntityMention, ...]


def find_entities(
    store: Store,
    name: str,
    conversations: Sequence[int] | None,
    *,
    kind: str | None = None,
    limit: int = 20,
    fuzzy: bool = True,
) -> list[EntityFound]:
    """Entities whose key starts with ``name`` (or a later word does), else close to it.

    Exact matches come first, then prefixes, then word prefixes, then (only when
    ``fuzzy`` and fewer than ``limit`` were found) keys ``difflib`` finds close;
    within a group the most mentioned first.
    """
    key = _key(name, kind)
    matched: dict[int, str] = {}
    for how, sql in (("exact", _EXACT), ("prefix", _PREFIX), ("word", _WORD)):
        rows = store.execute(
            sql, {"key": key, "like": f"% {_like(key)}%", "kind": kind, "pool": FUZZY_POOL}
        )
        for (entity_id,) in rows:
            matched.setdefault(int(entity_id), how)
    found = _counted(store, matched, conversations)
    if fuzzy and len(found) < limit:
        rows = store.execute(_FIRST_CHAR, {"first": key[0], "kind": kind, "pool": FUZZY_POOL})
        pool = {str(r[1]): int(r[0]) for r in rows}
        close = difflib.get_close_matches(key, list(pool), n=limit * 2, cutoff=FUZZY_CUTOFF)
        extra = {pool[k]: "fuzzy" for k in close if pool[k] not in matched}
        found += _counted(store, extra, conversations)
    order = {"exact": 0, "prefix": 1, "word": 2, "fuzzy": 3}
    found.sort(key=lambda e: (order[e.match], -e.messages, e.key))
    return found[:limit]


def entity_mentions(
    store: Store,
    name: str,
    conversations: Sequence[int] | None,
    *,
    kind: str | None = None,
    limit: int = 50,
) -> EntityMentions:
    """The visible mentions of the entity named ``name`` (its key), oldest first.

    ``NotFound`` when no message in scope mentions it. With no ``kind`` every
    kind sharing the key counts (a name and a code span of the same word).
    """
    key = _key(name, kind)
    entities = list(store.execute(_BY_KEY, {"key": key, "kind": kind}))
    binds = {
        "ids": orjson.dumps([int(r[0]) for r in entities]).decode(),
        "scoped": 0 if conversations is None else 1,
        "scope": _scope(conversations),
    }
    total = int(store.scalar(_TOTAL, binds))
    if not total:
        raise NotFound(f"no entity {name!r} in scope", name=name)
    rows = store.execute(_MENTIONS, {**binds, "limit": limit})
    mentions = tuple(
        EntityMention(
            str(session),
            public_message_id(int(row_id), client_id),
            int(seq),
            str(role),
            str(created_at),
            int(count),
            _snippet(str(content), int(start), int(end)),
        )
        for session, row_id, client_id, seq, role, created_at, count, start, end, content in rows
    )
    first = entities[0]
    return EntityMentions(str(first[2]), str(first[1]), key, total, mentions)


def _key(name: str, kind: str | None) -> str:
    key = entity_key(name)
    if not key:
        raise InvalidInput("name", "must name an entity (not only whitespace)")
    if kind is not None and kind not in KINDS:
        raise InvalidInput("kind", f"must be one of {', '.join(KINDS)}")
    return key


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _scope(conversations: Sequence[int] | None) -> str:
    return orjson.dumps(sorted(set(conversations or ()))).decode()


def _counted(
    store: Store, matched: dict[int, str], conversations: Sequence[int] | None
) -> list[EntityFound]:
    if not matched:
        return []
    rows = store.execute(
        _COUNTED,
        {
            "ids": orjson.dumps(list(matched)).decode(),
            "scoped": 0 if conversations is None else 1,
            "scope": _scope(conversations),
        },
    )
    return [
        EntityFound(
            str(name),
            str(kind),
            str(key),
            int(n),
            int(total),
            int(sessions),
            str(first),
            str(last),
            matched[int(entity_id)],
        )
        for entity_id, name, kind, key, n, total, sessions, first, last in rows
    ]


def _snippet(content: str, start: int, end: int) -> str:
    lo, hi = max(0, start - SNIPPET_CHARS), min(len(content), end + SNIPPET_CHARS)
    text = " ".join(content[lo:hi].split())
    return ("…" if lo else "") + text + ("…" if hi < len(content) else "")
