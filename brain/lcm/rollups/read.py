"""Reading rollups: ``recent`` (a time window's rollups and leaf summaries in order),
and what ``describe`` and ``expand`` show of a ``rol_`` id.

A rollup is visible to a read when every conversation its leaves came from is in
the read's scope (a session filed under a key sees its key's rollups only while
they hold no other session's leaves) and none of its leaves is hidden: a leaf
suppressed or withheld hides the rollup at once, until the refresh that the same
change queued rebuilds it from the leaves left. Tested in
tests/brain/lcm/rollups/test_rollups.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from brain.errors import NotFound
from brain.lcm.dag import load_summaries
from brain.store.connection import Store

ROLLUP_ID_RE: Final = re.compile(r"rol_[0-9a-f]{16}")

_COLUMNS: Final = (
    "r.id, r.rollup_id, r.scope_kind, r.scope, r.period, r.start_at, r.end_at, r.content, "
    "r.token_count, r.earliest_at, r.latest_at, r.leaf_count, r.conversations, r.session_id, "
    "r.summarizer, r.updated_at"
)
_SHOWN: Final = (
    "NOT EXISTS (SELECT 1 FROM rollup_sources rs JOIN summaries s ON s.id = rs.summary_id "
    "WHERE rs.rollup_id = r.id AND (s.suppressed_at IS NOT NULL OR s.hidden_by IS NOT NULL))"
)
"""SQL: none of the rollup ``r``'s leaves is hidden."""
IN_SCOPE: Final = (
    "(? IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(r.conversations) rc "
    "WHERE rc.value NOT IN (SELECT value FROM json_each(?))))"
)
"""SQL: every conversation of the rollup ``r`` is in the JSON list bound twice (NULL: all)."""
VISIBLE: Final = f"{_SHOWN} AND {IN_SCOPE}"
"""SQL for searches: the rollup ``r`` may be shown in the scope bound twice."""


@dataclass(frozen=True, slots=True)
class Rollup:
    """A stored rollup: a period's leaf summaries of one scope, condensed."""

    row_id: int
    id: str
    scope_kind: str
    scope: str
    period: str
    start_at: str
    end_at: str
    content: str
    token_count: int
    earliest_at: str
    latest_at: str
    leaf_count: int
    conversations: tuple[int, ...]
    session: str
    summarizer: str
    updated_at: str

    def entry(self) -> dict[str, Any]:
        """What ``recent`` lists for it."""
        return {
            "kind": "rollup",
            "id": self.id,
            "period": self.period,
            "start": self.start_at,
            "end": self.end_at,
            self.scope_kind: self.scope,
            "session": self.session,
            "earliest_at": self.earliest_at,
            "latest_at": self.latest_at,
            "summaries": self.leaf_count,
            "tokens": self.token_count,
            "content": self.content,
        }


def _rollup(r: Any) -> Rollup:
    return Rollup(
        int(r[0]),
        str(r[1]),
        str(r[2]),
        str(r[3]),
        str(r[4]),
        str(r[5]),
        str(r[6]),
        str(r[7]),
        int(r[8]),
        str(r[9]),
        str(r[10]),
        int(r[11]),
        tuple(int(c) for c in orjson.loads(str(r[12]))),
        str(r[13]),
        str(r[14]),
        str(r[15]),
    )


def scoped_rollup(store: Store, rollup_id: str, scope: Callable[[int], bool]) -> Rollup:
    """The rollup with this id if the read may see it; ``NotFound`` otherwise (as for an
    id that does not exist)."""
    row = store.one(
        f"SELECT {_COLUMNS} FROM rollups r WHERE r.rollup_id = ? AND {_SHOWN}",  # noqa: S608
        (rollup_id,),
    )
    if row is None:
        raise NotFound(f"no rollup {rollup_id!r}", id=rollup_id)
    rollup = _rollup(row)
    if not all(scope(c) for c in rollup.conversations):
        raise NotFound(f"no rollup {rollup_id!r}", id=rollup_id)
    return rollup


def leaf_ids(store: Store, rollup: Rollup) -> list[int]:
    """The rollup's leaf summaries' row ids, in time order."""
    return [
        int(r[0])
        for r in store.execute(
            "SELECT summary_id FROM rollup_sources WHERE rollup_id = ? ORDER BY ordinal",
            (rollup.row_id,),
        )
    ]


def describe_rollup(store: Store, rollup_id: str, scope: Callable[[int], bool]) -> dict[str, Any]:
    """A rollup's text, period, scope, span and the leaf summaries it was built from."""
    rollup = scoped_rollup(store, rollup_id, scope)
    ids = leaf_ids(store, rollup)
    found = load_summaries(store, ids)
    leaves = [found[i] for i in ids if i in found]
    return {
        "kind": "rollup",
        "id": rollup.id,
        "period": rollup.period,
        "start": rollup.start_at,
        "end": rollup.end_at,
        rollup.scope_kind: rollup.scope,
        "session": rollup.session,
        "content": rollup.content,
        "token_count": rollup.token_count,
        "earliest_at": rollup.earliest_at,
        "latest_at": rollup.latest_at,
        "summarizer": rollup.summarizer,
        "updated_at": rollup.updated_at,
        "derived": True,
        "children": [
            {
                "id": s.id,
                "depth": s.depth,
                "tokens": s.token_count,
                "earliest_at": s.earliest_at,
                "latest_at": s.latest_at,
            }
            for s in leaves
        ],
    }


def expand_rollup(
    store: Store, rollup_id: str, scope: Callable[[int], bool], *, max_tokens: int
) -> dict[str, Any]:
    """A rollup's leaf summaries in time order, whole, under ``max_tokens`` (expand a
    leaf's ``sum_`` id in turn for its messages)."""
    rollup = scoped_rollup(store, rollup_id, scope)
    ids = leaf_ids(store, rollup)
    found = load_summaries(store, ids)
    out: list[dict[str, Any]] = []
    spent = 0
    truncated = False
    for leaf in (found[i] for i in ids if i in found):
        if spent + leaf.token_count > max_tokens:
            truncated = True
            break
        out.append(
            {
                "kind": "summary",
                "id": leaf.id,
                "depth": leaf.depth,
                "earliest_at": leaf.earliest_at,
                "latest_at": leaf.latest_at,
                "content": leaf.content,
                "tokens": leaf.token_count,
                "parent": rollup.id,
            }
        )
        spent += leaf.token_count
    return {
        "id": rollup.id,
        "items": out,
        "reached": [str(e["id"]) for e in out],
        "tokens": spent,
        "truncated": truncated,
    }


def recent(
    store: Store,
    conversations: tuple[int, ...] | None,
    since: str,
    before: str,
    *,
    max_tokens: int,
) -> dict[str, Any]:
    """The rollups and leaf summaries of ``[since, before)`` in ``conversations`` (None:
    every one), in time order (a period's rollups before its leaves, weeks before days).

    Under ``max_tokens`` the rollups come first (they are the overview), then the
    newest leaves; ``truncated`` says some were left out (``omitted`` how many).
    """
    scope = None if conversations is None else orjson.dumps(list(conversations)).decode()
    rollups = [
        _rollup(r)
        for r in store.execute(
            f"SELECT {_COLUMNS} FROM rollups r WHERE r.start_at < ? AND r.end_at > ? "  # noqa: S608
            f"AND {VISIBLE} ORDER BY r.start_at, r.period = 'day', r.id",
            (before, since, scope, scope),
        )
    ]
    # Scoped, the leaves come from each conversation's range of the leaf index.
    source = (
        "summaries s"
        if scope is None
        else "json_each(?) j CROSS JOIN summaries s ON s.conversation_id = j.value"
    )
    sql = " ".join(
        (
            "SELECT s.summary_id, c.session_id, s.earliest_at, s.latest_at, s.token_count,",
            "s.content FROM",
            source,
            "JOIN conversations c ON c.id = s.conversation_id",
            "WHERE s.kind = 'leaf' AND s.latest_at >= ? AND s.earliest_at < ?",
            "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL",
            "ORDER BY s.latest_at DESC, s.id DESC",
        )
    )
    bound = (since, before) if scope is None else (scope, since, before)
    leaves = list(store.execute(sql, bound))
    chosen: list[tuple[str, int, dict[str, Any]]] = []
    spent = 0
    omitted = 0
    for rollup in rollups:
        if spent + rollup.token_count > max_tokens:
            omitted += 1
            continue
        spent += rollup.token_count
        rank = 0 if rollup.period == "week" else 1
        chosen.append((rollup.start_at, rank, rollup.entry()))
    for sid, session, earliest, latest, tokens, content in leaves:
        if spent + int(tokens) > max_tokens:
            omitted += 1
            continue
        spent += int(tokens)
        entry = {
            "kind": "summary",
            "id": str(sid),
            "session": str(session),
            "earliest_at": str(earliest),
            "latest_at": str(latest),
            "tokens": int(tokens),
            "content": str(content),
        }
        chosen.append((str(earliest), 2, entry))
    chosen.sort(key=lambda c: (c[0], c[1]))
    items = [c[2] for c in chosen]
    return {
        "since": since,
        "before": before,
        "items": items,
        "tokens": spent,
        "truncated": omitted > 0,
        "omitted": omitted,
    }
