"""Building rollups: the backlog of leaves drained into refreshed day and week rollups.

A rollup is derived data. Its scope is the session key a leaf's session is filed
under, or the session itself when it has none; its period a UTC day or an ISO week;
its sources the visible leaf summaries that cover a message written in that period.
Triggers on ``summaries`` queue every leaf stored, suppressed, withheld or shown
again (``rollup_backlog``, migration ``brain.store.migrations.rollups``); a refresh
takes the queued leaves, finds the periods they touch (the days their messages were
written, the weeks of those days, and the periods of rollups that held them), and
rebuilds only those periods from their leaves. So a refresh costs what the new
leaves' periods hold, not the history. A period left with no visible leaf loses its
rollup; a rollup keeps its id across refreshes.

The text is the offline summarizer's condensing of the period's leaves (through
:func:`rollup_summarizer`, the one place that names it), under a header with the
period and its time span, followed by the questions raised and the entities named.
Tested in tests/brain/lcm/rollups/test_rollups.py.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Final

import orjson

from brain.lcm.entities.extract import extract
from brain.lcm.rollups.periods import PERIODS, Period, bounds, day_of, period_start
from brain.lcm.summarize import (
    EXPAND_PREFIX,
    FactSummarizer,
    SourceItem,
    Summarizer,
    SummaryRequest,
    short_time,
    summarize_with_escalation,
)
from brain.lcm.summary_contract import EXPAND_LINE, clip_text
from brain.store.connection import Store
from brain.tokens import estimate_tokens

BACKLOG_BATCH: Final = 64
"""Leaves taken from the backlog per transaction."""
TARGET_TOKENS: Final[dict[Period, int]] = {"day": 600, "week": 900}
"""The condensed body's size limit (the header, questions and entities come on top)."""
MAX_QUESTIONS: Final = 5
MAX_ENTITIES: Final = 12
_SENTENCE_END: Final = (".", "!", "?", "\n")


def rollup_summarizer() -> Summarizer:
    """The offline summarizer rollups condense with: the daemon's offline default.

    The one place that names it, so a new default changes the rollups' text and
    nothing else here.
    """
    return FactSummarizer()


Scope = tuple[str, str]
"""``("session_key", key)`` or ``("session", session id)``."""
PeriodKey = tuple[str, str, Period, date]
"""A rollup's identity: scope kind, scope, period, first day."""


@dataclass(slots=True)
class RefreshReport:
    """What a refresh did: the leaves it read from the queue, the rollups it rebuilt
    (``rol_`` ids) and removed (periods left without a visible leaf)."""

    leaves: int = 0
    rebuilt: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Leaf:
    row_id: int
    summary_id: str
    content: str
    earliest_at: str
    latest_at: str
    conversation_id: int
    session: str


def backlog(store: Store) -> bool:
    """Whether leaves wait for their rollups' refresh."""
    return store.one("SELECT 1 FROM rollup_backlog LIMIT 1") is not None


def requeue_all(store: Store) -> int:
    """Queue every leaf (a rebuild of every rollup on the next refresh); how many."""
    before = store.total_changes()
    store.execute(
        "INSERT OR IGNORE INTO rollup_backlog (summary_id) "
        "SELECT id FROM summaries WHERE kind = 'leaf'"
    )
    return store.total_changes() - before


def refresh(
    store: Store, now: str, *, batch: int = BACKLOG_BATCH, batches: int | None = None
) -> RefreshReport:
    """Drain the backlog, at most ``batches`` transactions of ``batch`` leaves (None:
    all), rebuilding the periods the leaves touch. ``now`` stamps ``updated_at``.

    Each batch reads the queue under the write lock, in one transaction with its
    rebuilds, so two processes refreshing at once rebuild each period from one state.
    """
    report = RefreshReport()
    rounds = 0
    while (batches is None or rounds < batches) and backlog(store):
        rounds += 1
        with store.transaction():
            ids = [
                int(r[0])
                for r in store.execute(
                    "SELECT summary_id FROM rollup_backlog ORDER BY summary_id LIMIT ?", (batch,)
                )
            ]
            dirty: dict[PeriodKey, None] = {}
            for leaf_id in ids:
                for key in _touched(store, leaf_id):
                    dirty[key] = None
            for key in sorted(dirty, key=lambda k: (k[0], k[1], k[3], k[2])):
                _rebuild(store, key, now, report)
            store.execute(
                "DELETE FROM rollup_backlog WHERE summary_id IN (SELECT value FROM json_each(?))",
                (orjson.dumps(ids).decode(),),
            )
            report.leaves += len(ids)
    return report


def _touched(store: Store, leaf_id: int) -> list[PeriodKey]:
    """The periods a queued leaf touches: those of its scope on the days its messages
    were written, and those of every rollup that holds it (it may have moved away),
    and, once its session is filed under a key, its session's own rollups."""
    out: list[PeriodKey] = [
        (str(r[0]), str(r[1]), _period(r[2]), date.fromisoformat(str(r[3])[:10]))
        for r in store.execute(
            "SELECT r.scope_kind, r.scope, r.period, r.start_at FROM rollup_sources rs "
            "JOIN rollups r ON r.id = rs.rollup_id WHERE rs.summary_id = ?",
            (leaf_id,),
        )
    ]
    row = store.one(
        "SELECT c.session_id, c.session_key, s.latest_at FROM summaries s "
        "JOIN conversations c ON c.id = s.conversation_id WHERE s.id = ?",
        (leaf_id,),
    )
    if row is None:
        return out
    session, key, latest = str(row[0]), row[1], str(row[2])
    scope: Scope = ("session", session) if key is None else ("session_key", str(key))
    if key is not None:
        out += [
            (str(r[0]), str(r[1]), _period(r[2]), date.fromisoformat(str(r[3])[:10]))
            for r in store.execute(
                "SELECT scope_kind, scope, period, start_at FROM rollups "
                "WHERE scope_kind = 'session' AND scope = ?",
                (session,),
            )
        ]
    days = {
        date.fromisoformat(str(r[0]))
        for r in store.execute(
            "SELECT DISTINCT substr(m.created_at, 1, 10) FROM summary_sources ss "
            "JOIN messages m ON m.id = ss.message_id WHERE ss.summary_id = ?",
            (leaf_id,),
        )
    } or {day_of(latest)}
    for day in sorted(days):
        for period in PERIODS:
            out.append((*scope, period, period_start(day, period)))
    return out


def _period(value: object) -> Period:
    return "week" if value == "week" else "day"


def _scope_conversations(store: Store, scope_kind: str, scope: str) -> list[int]:
    if scope_kind == "session_key":
        sql = "SELECT id FROM conversations WHERE session_key = ? ORDER BY id"
    else:
        sql = "SELECT id FROM conversations WHERE session_id = ? AND session_key IS NULL"
    return [int(r[0]) for r in store.execute(sql, (scope,))]


def period_leaves(
    store: Store, conversations: Sequence[int], start_at: str, end_at: str
) -> list[_Leaf]:
    """The visible leaves of ``conversations`` covering a visible message written in
    ``[start_at, end_at)``, in time order."""
    return [
        _Leaf(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), int(r[5]), str(r[6]))
        for r in store.execute(
            "SELECT s.id, s.summary_id, s.content, s.earliest_at, s.latest_at, "
            "s.conversation_id, c.session_id FROM json_each(?) j "
            "CROSS JOIN summaries s ON s.conversation_id = j.value "
            "JOIN conversations c ON c.id = s.conversation_id "
            "WHERE s.kind = 'leaf' AND s.latest_at >= ? AND s.earliest_at < ? "
            "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL "
            "AND EXISTS (SELECT 1 FROM summary_sources ss JOIN messages m "
            "ON m.id = ss.message_id WHERE ss.summary_id = s.id AND NOT ss.omitted "
            "AND m.suppressed_at IS NULL AND m.created_at >= ? AND m.created_at < ?) "
            "ORDER BY s.earliest_at, s.id",
            (orjson.dumps(list(conversations)).decode(), start_at, end_at, start_at, end_at),
        )
    ]


def _rebuild(store: Store, key: PeriodKey, now: str, report: RefreshReport) -> None:
    scope_kind, scope, period, start = key
    start_at, end_at = bounds(start, period)
    existing = store.one(
        "SELECT id, rollup_id FROM rollups WHERE scope_kind = ? AND scope = ? AND period = ? "
        "AND start_at = ?",
        (scope_kind, scope, period, start_at),
    )
    leaves = period_leaves(store, _scope_conversations(store, scope_kind, scope), start_at, end_at)
    if not leaves:
        if existing is not None:
            store.execute("DELETE FROM rollup_sources WHERE rollup_id = ?", (existing[0],))
            store.execute("DELETE FROM rollups WHERE id = ?", (existing[0],))
            report.removed.append(str(existing[1]))
        return
    content, summarizer = render(period, start, leaves)
    values = (
        content,
        estimate_tokens(content),
        min(leaf.earliest_at for leaf in leaves),
        max(leaf.latest_at for leaf in leaves),
        len(leaves),
        orjson.dumps(sorted({leaf.conversation_id for leaf in leaves})).decode(),
        max(leaves, key=lambda leaf: (leaf.latest_at, leaf.row_id)).session,
        summarizer,
        now,
    )
    if existing is None:
        rollup_id = "rol_" + secrets.token_hex(8)
        store.execute(
            "INSERT INTO rollups (rollup_id, scope_kind, scope, period, start_at, end_at, "
            "content, token_count, earliest_at, latest_at, leaf_count, conversations, "
            "session_id, summarizer, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?)",
            (rollup_id, scope_kind, scope, period, start_at, end_at, *values),
        )
        row_id = int(store.last_rowid())
    else:
        row_id, rollup_id = int(existing[0]), str(existing[1])
        store.execute(
            "UPDATE rollups SET content = ?, token_count = ?, earliest_at = ?, latest_at = ?, "
            "leaf_count = ?, conversations = ?, session_id = ?, summarizer = ?, updated_at = ? "
            "WHERE id = ?",
            (*values, row_id),
        )
        store.execute("DELETE FROM rollup_sources WHERE rollup_id = ?", (row_id,))
    store.executemany(
        "INSERT INTO rollup_sources (rollup_id, ordinal, summary_id) VALUES (?, ?, ?)",
        [(row_id, i, leaf.row_id) for i, leaf in enumerate(leaves)],
    )
    report.rebuilt.append(rollup_id)


def render(period: Period, start: date, leaves: Sequence[_Leaf]) -> tuple[str, str]:
    """A rollup's text and the summarizer that made its body.

    A header (the period, how many summaries, their time span), the offline
    summarizer's condensing of the leaves (facts and decisions first, as it orders
    them), the questions raised, the entities named most, and the body's
    "Expand for details about:" line last.
    """
    first, last = min(x.earliest_at for x in leaves), max(x.latest_at for x in leaves)
    label = f"day {start.isoformat()}" if period == "day" else f"week of {start.isoformat()}"
    header = (
        f"[{label}] {len(leaves)} summar{'y' if len(leaves) == 1 else 'ies'}, "
        f"{short_time(first)} to {short_time(last)}"
    )
    request = SummaryRequest(
        kind="condensed",
        depth=1 if period == "day" else 2,
        items=tuple(
            SourceItem(x.summary_id, "summary", x.content, x.latest_at, x.earliest_at)
            for x in leaves
        ),
        target_tokens=TARGET_TOKENS[period],
    )
    outcome = summarize_with_escalation(rollup_summarizer(), request)
    lines = outcome.text.split("\n")
    footer = lines.pop() if lines and EXPAND_LINE.match(lines[-1].strip()) else None
    parts = [header, *lines]
    questions = _questions(leaves)
    if questions:
        parts.append("Questions raised:")
        parts += [f"- {q}" for q in questions]
    entities = _entities(leaves)
    if entities:
        parts.append("Entities: " + ", ".join(entities))
    parts.append(footer or EXPAND_PREFIX + "the leaf summaries listed by describe")
    return "\n".join(parts), outcome.summarizer


def _questions(leaves: Sequence[_Leaf]) -> list[str]:
    """Sentences ending in a question mark, first seen first, without repeats."""
    seen: dict[str, None] = {}
    for leaf in leaves:
        for line in leaf.content.split("\n"):
            if EXPAND_LINE.match(line.strip()):
                continue
            text = line
            while "?" in text:
                cut = text.index("?") + 1
                head = text[:cut]
                begin = max(head.rfind(c, 0, cut - 1) for c in _SENTENCE_END)
                sentence = head[begin + 1 :].strip().lstrip("-*] ").strip()
                text = text[cut:]
                if ": " in sentence[:60]:
                    sentence = sentence.split(": ", 1)[1]  # "user: ..." / "Name (role): ..."
                if len(sentence) >= 8:
                    seen.setdefault(clip_text(sentence, 160), None)
                if len(seen) >= MAX_QUESTIONS:
                    return list(seen)
    return list(seen)


def _entities(leaves: Sequence[_Leaf]) -> list[str]:
    """The entities the leaves name (``brain.lcm.entities``), most mentioned first,
    then first named; dates, times and amounts left out (the header has the span)."""
    counts: Counter[str] = Counter()
    names: dict[str, str] = {}
    for leaf in leaves:
        body = "\n".join(
            line for line in leaf.content.split("\n") if not EXPAND_LINE.match(line.strip())
        )
        for mention in extract(body):
            if mention.kind in ("date", "quantity"):
                continue
            counts[mention.key] += 1
            names.setdefault(mention.key, mention.text)
    order = {key: i for i, key in enumerate(names)}
    ranked = sorted(counts, key=lambda k: (-counts[k], order[k]))
    return [names[k] for k in ranked[:MAX_ENTITIES]]
