"""The recall block in an assembled context: what it costs and where it goes.

The block is a graph query's context for the newest question (``Brain.assemble``
runs the query); here it is only priced and placed. Tested through
``Brain.assemble`` in tests/brain/graph/test_nodes.py (the block shown only when
recall is on, its cost counted, left out when it does not fit).
"""

from __future__ import annotations

from brain.lcm.render import Block, Turn
from brain.tokens import estimate_tokens, message_cost


def recall_cost(block: str | None, room: int) -> int:
    """What the recall block takes from the room (0: none, or it does not fit).

    It is placed before summaries and raw history: it is what the graph found
    relevant to the newest question, and small by construction (its max_chars).
    """
    if not block:
        return 0
    cost = message_cost(estimate_tokens(block))
    return cost if cost <= room else 0


def with_recall(turns: list[Turn], block: str) -> list[Turn]:
    """``turns`` with a user turn holding ``block`` right after the last summary turn
    (or the leading system messages)."""
    at = 0
    while at < len(turns) and turns[at].role == "system":
        at += 1
    for i, turn in enumerate(turns):
        if turn.source.startswith("sum_"):
            at = i + 1
    seq = turns[at - 1].seq if at else 0
    recall = Turn("user", (Block("text", block),), "recall", seq, synthetic=True)
    return [*turns[:at], recall, *turns[at:]]
