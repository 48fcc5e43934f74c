"""The context list: which messages and summaries a conversation's model sees, in order.

Rows of ``context_items`` are keyed by the first message seq they cover. Every
message is covered by exactly one item: itself while raw, or the summary
whose range contains it. Compaction replaces a contiguous run of items by one
summary item at the run's first position; no other row moves.

The *fresh tail* is the protected end of the list: the newest
``fresh_tail_count`` messages, stretched back to the newest user message and
to the call of any tool result inside it, and never into a summary.

Tested through what keeps the list: ``tests/brain/lcm/compaction/test_compactor.py``, and
``test_budgets.py``, ``assemble/test_assembler.py`` and the list's invariants in ``helpers.py`` of
``tests/brain/lcm/``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Final, NamedTuple

from brain.errors import NotFound
from brain.lcm.pairing import earliest_call_of_results
from brain.store.connection import Store

_TAIL_PAIRING_ROUNDS: Final = 8

Scope = Callable[[int], bool] | Collection[int]
"""Which conversations a read may see: a predicate on conversation row ids, or the ids."""


def visible(scope: Scope) -> Callable[[int], bool]:
    """``scope`` as a predicate on conversation row ids."""
    if callable(scope):
        return scope
    allowed = frozenset(scope)
    return lambda conversation_id: conversation_id in allowed


class Filed(NamedTuple):
    """A session's conversation row id and the session key it is filed under."""

    id: int
    session_key: str | None


def find_session(store: Store, session: str) -> Filed | None:
    """The conversation a session names, or None when the session does not exist."""
    row = store.one("SELECT id, session_key FROM conversations WHERE session_id = ?", (session,))
    return None if row is None else Filed(int(row[0]), row[1])


@dataclass(frozen=True, slots=True)
class Conversation:
    """The counters a conversation carries (read in one query)."""

    id: int
    session: str
    session_key: str | None
    context_tokens: int
    raw_tokens: int
    context_version: int
    compaction_epoch: int
    flush_epoch: int
    suppress_epoch: int
    max_seq: int
    budget: int | None = None
    """The budget the session follows (``brain.lcm.budgets``; None: never assembled)."""
    budget_seq: int | None = None
    """``max_seq`` when ``budget`` was set."""


@dataclass(frozen=True, slots=True)
class Item:
    """One context item: a raw message (``message_id``) or a summary (``summary_id``)."""

    pos: int
    message_id: int | None
    summary_id: int | None
    depth: int | None
    token_count: int

    @property
    def is_message(self) -> bool:
        """True for a raw message item."""
        return self.message_id is not None


_CONVERSATION: Final = (
    "SELECT c.id, c.session_id, c.session_key, c.context_tokens, c.raw_tokens, "
    "c.context_version, c.compaction_epoch, c.flush_epoch, c.suppress_epoch, "
    "(SELECT coalesce(max(seq), 0) FROM messages m WHERE m.conversation_id = c.id), "
    "c.assemble_budget, c.assemble_budget_seq "
    "FROM conversations c "
)


def no_session(session: str) -> NotFound:
    """The error for a session that does not exist: a read naming one is a mistake
    (a mistyped name) to be told of, never an empty answer."""
    return NotFound(
        f"no session {session!r}: nothing has been stored under that name", session=session
    )


def conversation_id(store: Store, session: str) -> int:
    """The row id of a session's conversation; ``NotFound`` if it has none."""
    filed = find_session(store, session)
    if filed is None:
        raise no_session(session)
    return filed.id


def session_scope(store: Store, session: str | None) -> Callable[[int], bool]:
    """What a read scoped to ``session`` may see: its conversation (None: every one).
    ``NotFound`` naming the session when it does not exist."""
    if session is None:
        return lambda _conversation_id: True
    wanted = conversation_id(store, session)
    return lambda conversation_id: conversation_id == wanted


def session_key_conversations(store: Store, session_key: str) -> tuple[int, ...]:
    """The conversations filed under ``session_key`` (empty when none is)."""
    rows = store.execute("SELECT id FROM conversations WHERE session_key = ?", (session_key,))
    return tuple(int(r[0]) for r in rows)


def conversation(store: Store, session: str) -> Conversation:
    """The conversation of a session; ``NotFound`` if it has none."""
    row = store.one(_CONVERSATION + "WHERE c.session_id = ?", (session,))
    if row is None:
        raise no_session(session)
    return Conversation(*row)


def conversation_by_id(store: Store, conversation_id: int) -> Conversation:
    """The conversation with this row id (one query: compaction asks on every pass)."""
    row = store.one(_CONVERSATION + "WHERE c.id = ?", (conversation_id,))
    if row is None:
        raise NotFound(f"no conversation {conversation_id}")
    return Conversation(*row)


def items(store: Store, conversation_id: int, after_pos: int = 0) -> list[Item]:
    """The visible context items with ``pos > after_pos``, in order (suppressed ones left out)."""
    return [
        Item(*row)
        for row in store.execute(
            "SELECT c.pos, c.message_id, c.summary_id, c.depth, c.token_count "
            "FROM context_items c LEFT JOIN messages m ON m.id = c.message_id "
            "LEFT JOIN summaries s ON s.id = c.summary_id "
            "WHERE c.conversation_id = ? AND c.pos > ? "
            "AND m.suppressed_at IS NULL AND s.suppressed_at IS NULL ORDER BY c.pos",
            (conversation_id, after_pos),
        )
    ]


def tail_start(store: Store, conv: Conversation, fresh_tail_count: int) -> int:
    """The first message seq of the protected fresh tail (``max_seq + 1`` when empty).

    The newest ``fresh_tail_count`` messages (counted as OpenAI sends them:
    ``MESSAGE_UNITS``), stretched back so that the newest
    user message (one that is not only tool results) and the calls of every
    tool result in the tail are in it, then moved forward past any summary
    (the tail holds raw messages only).
    """
    if conv.max_seq == 0:
        return 1
    start = _newest_units(store, conv.id, max(fresh_tail_count, 1))
    # The newest message from the user, not an Anthropic-shaped tool result
    # (a user message holding only tool_result blocks): in a long tool loop
    # those would keep the user's actual request out of the tail.
    newest_user = store.scalar(
        "SELECT seq FROM messages m WHERE conversation_id = ? AND role = 'user' "
        "AND (NOT EXISTS (SELECT 1 FROM message_parts p WHERE p.message_id = m.id) "
        "OR EXISTS (SELECT 1 FROM message_parts p WHERE p.message_id = m.id "
        "AND p.kind <> 'tool_result')) "
        "ORDER BY seq DESC LIMIT 1",
        (conv.id,),
    )
    if newest_user is not None:
        start = min(start, int(newest_user))
    for _ in range(_TAIL_PAIRING_ROUNDS):
        earliest_call = earliest_call_of_results(store, conv.id, start)
        if earliest_call is None or earliest_call >= start:
            break
        start = earliest_call
    # The tail holds raw messages only: it begins after every summary reaching
    # into it (not just the one holding ``start``: a late tool result can pull
    # ``start`` back over several summaries).
    # Only summaries in the context list matter (a folded one lies inside one
    # of them), and only items from the one holding ``start`` on: primary-key
    # searches, not a scan of every summary the conversation ever had.
    covered = store.scalar(
        "SELECT max(s.last_seq) FROM context_items c JOIN summaries s ON s.id = c.summary_id "
        "WHERE c.conversation_id = ? AND c.pos >= coalesce((SELECT max(pos) FROM context_items "
        "WHERE conversation_id = ? AND pos <= ?), 0) AND s.last_seq >= ?",
        (conv.id, conv.id, start, start),
    )
    if covered is not None:
        start = int(covered) + 1
    return start


MESSAGE_UNITS: Final = (
    "max(1, (SELECT count(*) FROM message_parts p WHERE p.message_id = m.id "
    "AND p.kind = 'tool_result' AND p.origin = 'content') "
    "+ EXISTS (SELECT 1 FROM message_parts p WHERE p.message_id = m.id "
    "AND (p.kind <> 'tool_result' OR p.origin <> 'content')))"
)
"""How many messages a stored message ``m`` is in OpenAI shape: one per tool_result
block it holds (each is its own ``tool`` message there) and one for the rest, at
least one. The fresh tail is counted in these, so one conversation keeps the
same tail whichever shape it was ingested in: an Anthropic user turn holding
two results is the two tool messages the OpenAI shape stores for it."""


def _newest_units(store: Store, conversation_id: int, count: int) -> int:
    """The seq from which the newest messages make ``count`` ``MESSAGE_UNITS`` (or all)."""
    start = 1
    total = 0
    # Every message is at least one unit: the newest ``count`` messages are enough.
    for seq, units in store.execute(
        f"SELECT m.seq, {MESSAGE_UNITS} FROM messages m WHERE m.conversation_id = ? "  # noqa: S608
        "ORDER BY m.seq DESC LIMIT ?",
        (conversation_id, count),
    ):
        start = int(seq)
        total += int(units)
        if total >= count:
            break
    return start


def replace_run(
    store: Store,
    conv_id: int,
    first_pos: int,
    last_pos: int,
    expected: list[Item],
    summary_row_id: int,
    depth: int,
    token_count: int,
) -> bool:
    """Replace the items in ``[first_pos, last_pos]`` by one summary item, if unchanged.

    Must run inside a transaction. Returns False (and changes nothing) when
    the items there are no longer exactly ``expected`` (someone else compacted).
    Keeps the conversation's running totals and versions in step.
    """
    current = [
        Item(*row)
        for row in store.execute(
            "SELECT pos, message_id, summary_id, depth, token_count FROM context_items "
            "WHERE conversation_id = ? AND pos BETWEEN ? AND ? ORDER BY pos",
            (conv_id, first_pos, last_pos),
        )
    ]
    if current != expected:
        return False
    old_tokens = sum(i.token_count for i in current)
    old_raw = sum(i.token_count for i in current if i.is_message)
    store.execute(
        "DELETE FROM context_items WHERE conversation_id = ? AND pos BETWEEN ? AND ?",
        (conv_id, first_pos, last_pos),
    )
    store.execute(
        "INSERT INTO context_items (conversation_id, pos, summary_id, depth, token_count) "
        "VALUES (?, ?, ?, ?, ?)",
        (conv_id, first_pos, summary_row_id, depth, token_count),
    )
    store.execute(
        "UPDATE conversations SET context_tokens = context_tokens + ?, "
        "raw_tokens = raw_tokens - ?, context_version = context_version + 1, "
        "compaction_epoch = compaction_epoch + 1 WHERE id = ?",
        (token_count - old_tokens, old_raw, conv_id),
    )
    return True


def mark_flushed(store: Store, conv_id: int, epoch: int) -> None:
    """Record that a memory flush was recommended in this compaction epoch."""
    store.execute("UPDATE conversations SET flush_epoch = ? WHERE id = ?", (epoch, conv_id))
