"""The one rule that pairs tool results with tool calls, in Python and in SQL.

Conversation order is message ``seq``, then block (part) order inside a message.
For a result of call id ``X``:

* it answers the **latest** call of ``X`` before it — some model servers number
  calls afresh in every response (``call_0``), so an older call of the same id
  is an earlier response's and its results came before this one's call;
* with no call of ``X`` before it, it answers the **earliest** call of ``X``
  after it (a host that stored the result first);
* with no call of ``X`` at all it answers nothing (its call was never stored).

That fixes the *message* a result answers. When that message holds several
calls of ``X`` (a server that gave parallel calls one id), its results are
handed out in call order: those after the message first, in order, then
those before it; results left over are second results for an answered call.
An earlier message's call of ``X`` left without a result stays unanswered:
when two calls share an id with no result between them, the results after
both belong to the later call.

``answered_messages``/``match`` are the Python form, over turns of blocks
(``brain.lcm.render``, ``brain.lcm.assemble``); ``answered_seqs``,
``earliest_call_of_results``, ``calls_answered_after`` and ``results_of_calls``
are the SQL form, over the stored ``message_parts`` (``brain.lcm.context``,
``brain.lcm.compaction``, ``brain.lcm.assemble``).
Both are built on the ordering above; ``tests/brain/lcm/test_pairing.py`` checks
that they agree on arbitrary conversations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol

import orjson

if TYPE_CHECKING:
    from brain.store.connection import Store

Ref = tuple[int, int]
"""A block's place: (message or turn index, block index inside it)."""


class ToolBlock(Protocol):
    """What pairing reads of a block: its type and call id (``brain.lcm.render.Block``)."""

    @property
    def type(self) -> str:
        """``tool_call``, ``tool_result`` or another block type (ignored)."""
        ...

    @property
    def call_id(self) -> str | None:
        """The call id; blocks without one are never paired."""
        ...


def answered_messages(messages: Sequence[Sequence[ToolBlock]]) -> dict[Ref, int]:
    """For each result that answers a call: the index of the message holding the call.

    Linear in the blocks. Results that answer nothing are left out.
    """
    return _scan(messages)[0]


def _scan(
    messages: Sequence[Sequence[ToolBlock]],
) -> tuple[dict[Ref, int], dict[tuple[int, str], list[Ref]]]:
    """``answered_messages``, and the calls of each (message, call id) in block order."""
    latest: dict[str, int] = {}  # call id -> latest message holding a call of it so far
    waiting: dict[str, list[Ref]] = {}  # results met before any call of their id
    found: dict[Ref, int] = {}
    calls: dict[tuple[int, str], list[Ref]] = {}
    for m, blocks in enumerate(messages):
        for b, block in enumerate(blocks):
            call_id = block.call_id
            if call_id is None:
                continue
            if block.type == "tool_call":
                if call_id not in latest:
                    for result in waiting.pop(call_id, ()):
                        found[result] = m
                latest[call_id] = m
                calls.setdefault((m, call_id), []).append((m, b))
            elif block.type == "tool_result":
                at = latest.get(call_id)
                if at is None:
                    waiting.setdefault(call_id, []).append((m, b))
                else:
                    found[(m, b)] = at
    return found, calls


def match(messages: Sequence[Sequence[ToolBlock]]) -> dict[Ref, Ref]:
    """Call -> the one result that answers it, by the rule above (unanswered calls left out)."""
    found, calls_of = _scan(messages)
    by_message: dict[tuple[int, str], list[Ref]] = {}
    for result, m in found.items():
        call_id = messages[result[0]][result[1]].call_id
        assert call_id is not None  # only results with an id are answered
        by_message.setdefault((m, call_id), []).append(result)
    pairs: dict[Ref, Ref] = {}
    for message_id, results in by_message.items():
        calls = calls_of[message_id]
        if len(results) == 1:
            pairs[calls[0]] = results[0]  # the common case: one call, one result
            continue
        # Results after the call's message come first (in order), then earlier ones:
        # a result the host stored before its call is the fallback, not the answer.
        results.sort(key=lambda r: (r < calls[0], r))
        pairs.update(zip(calls, results, strict=False))
    return pairs


# -- SQL ------------------------------------------------------------------------------------

# The seq of the message holding the call that the result part ``rp`` (of the
# message ``rm``) answers: the latest call of its id before it, else the
# earliest after it. CROSS JOIN fixes the loop order (SQLite plans it left to
# right): from the call id index to the few parts of that id, not every message.
_BEFORE: Final = "(cm.seq < rm.seq OR (cm.seq = rm.seq AND cp.ordinal < rp.ordinal))"
_AFTER: Final = "(cm.seq > rm.seq OR (cm.seq = rm.seq AND cp.ordinal > rp.ordinal))"
_CALLS_OF_RP: Final = (
    "FROM message_parts cp CROSS JOIN messages cm ON cm.id = cp.message_id "
    "WHERE cp.tool_call_id = rp.tool_call_id AND cp.kind = 'tool_call' "
    "AND cm.conversation_id = rm.conversation_id AND "
)
ANSWERED_SEQ: Final = (
    "coalesce((SELECT max(cm.seq) " + _CALLS_OF_RP + _BEFORE + "), "
    "(SELECT min(cm.seq) " + _CALLS_OF_RP + _AFTER + "))"
)
"""SQL expression: the seq of the message whose call the result part ``rp`` in message
``rm`` answers (NULL: none). ``rp``/``rm`` must be in scope."""

_RESULTS_FROM: Final = (
    "FROM messages rm CROSS JOIN message_parts rp ON rp.message_id = rm.id "
    "WHERE rm.conversation_id = ? AND rm.seq >= ? AND rp.kind = 'tool_result' "
    "AND rp.tool_call_id IS NOT NULL"
)
_ANSWERED: Final = "SELECT rm.seq, rp.ordinal, " + ANSWERED_SEQ + " " + _RESULTS_FROM
_EARLIEST: Final = "SELECT min(" + ANSWERED_SEQ + ") " + _RESULTS_FROM
# Calls in a range answered after it, by id (the call id index leads from the
# few calls to the parts of their ids): a result after the range answers the
# range's latest call of its id exactly when no call of its id comes between
# the range and the result. Linear in the parts sharing those ids; checking
# each result's own latest call instead is quadratic when a server numbers
# every call ``call_0``.
_ANSWERED_AFTER: Final = (
    "SELECT call_seq, (SELECT max(rm.seq) FROM message_parts rp "
    "CROSS JOIN messages rm ON rm.id = rp.message_id "
    "WHERE rp.tool_call_id = call_id AND rp.kind = 'tool_result' "
    "AND rm.conversation_id = ?1 AND rm.seq > ?3 AND (next_seq IS NULL OR rm.seq < next_seq "
    "OR (rm.seq = next_seq AND rp.ordinal < (SELECT min(np.ordinal) FROM messages nm "
    "CROSS JOIN message_parts np ON np.message_id = nm.id WHERE nm.conversation_id = ?1 "
    "AND nm.seq = next_seq AND np.tool_call_id = call_id AND np.kind = 'tool_call')))) "
    "FROM (SELECT cp.tool_call_id AS call_id, max(cm.seq) AS call_seq, "
    "(SELECT min(nm.seq) FROM message_parts np CROSS JOIN messages nm ON nm.id = np.message_id "
    "WHERE np.tool_call_id = cp.tool_call_id AND np.kind = 'tool_call' "
    "AND nm.conversation_id = ?1 AND nm.seq > ?3) AS next_seq "
    "FROM messages cm CROSS JOIN message_parts cp ON cp.message_id = cm.id "
    "WHERE cm.conversation_id = ?1 AND cm.seq BETWEEN ?2 AND ?3 AND cp.kind = 'tool_call' "
    "AND cp.tool_call_id IS NOT NULL GROUP BY cp.tool_call_id)"
)


def answered_seqs(store: Store, conversation_id: int, from_seq: int = 1) -> dict[Ref, int]:
    """(seq, part ordinal) of each result at ``seq >= from_seq`` -> seq of the call it answers.

    Results that answer nothing are left out.
    """
    rows = store.execute(_ANSWERED, (conversation_id, from_seq))
    return {(int(s), int(o)): int(a) for s, o, a in rows if a is not None}


_OF_IDS: Final = (
    "FROM message_parts rp CROSS JOIN messages rm ON rm.id = rp.message_id "
    "WHERE rp.tool_call_id IN (SELECT value FROM json_each(?2)) AND rp.kind = 'tool_result' "
    "AND rm.conversation_id = ?1"
)
_RESULTS_OF_IDS: Final = "SELECT rm.seq, rp.tool_call_id, " + ANSWERED_SEQ + " " + _OF_IDS


def results_of_calls(
    store: Store, conversation_id: int, call_ids: Sequence[str]
) -> set[tuple[int, int, str]]:
    """(result seq, seq of the call it answers, call id) of each stored result of one
    of ``call_ids`` that answers a call. Uses the call id index: linear in the parts
    sharing those ids."""
    rows = store.execute(_RESULTS_OF_IDS, (conversation_id, orjson.dumps(list(call_ids)).decode()))
    return {(int(r), int(a), str(c)) for r, c, a in rows if a is not None}


def earliest_call_of_results(store: Store, conversation_id: int, from_seq: int) -> int | None:
    """Seq of the earliest message holding a call answered by a result at ``seq >= from_seq``.

    May be ``from_seq`` or later (results answered by calls after them).
    """
    value = store.scalar(_EARLIEST, (conversation_id, from_seq))
    return None if value is None else int(value)


def calls_answered_after(
    store: Store, conversation_id: int, first_seq: int, last_seq: int
) -> dict[int, int]:
    """Seq of each message in ``[first_seq, last_seq]`` holding a call answered after
    ``last_seq`` -> the seq of its latest such result."""
    found: dict[int, int] = {}
    for call_seq, result_seq in store.execute(
        _ANSWERED_AFTER, (conversation_id, first_seq, last_seq)
    ):
        if result_seq is not None:
            found[int(call_seq)] = max(found.get(int(call_seq), 0), int(result_seq))
    return found
