"""Sizing a pass towards a compaction target: its chunk and its summary's size limit.

Tested through the compactor's targeted sweeps in tests/brain/lcm/compaction/test_compactor.py.
"""

from __future__ import annotations

from typing import Final

from brain.lcm.context import Item
from brain.lcm.dag import NewSummary, SourceRef, Summary, new_summary_id, summary_cost

__all__ = [
    "LEAF_SHELL_TOKENS",
    "SIZED_MIN_TOKENS",
    "new_condensed",
    "shell_cost",
    "sized_run",
    "sized_target",
]


SIZED_MIN_TOKENS: Final = 48
"""Smallest summary size limit a pass towards a target asks for: below it a summary
says too little, so the pass is made at the normal limit (and one more follows)."""
LEAF_SHELL_TOKENS: Final = 64
"""About what a leaf summary costs beyond its text (its XML and the message overhead):
sizes a leaf chunk towards a target; the size limit itself uses the exact cost."""


def new_condensed(conversation_id: int, depth: int, ordered: list[Summary]) -> NewSummary:
    """A condensed summary of ``ordered`` (in order), its text still to be written."""
    return NewSummary(
        conversation_id=conversation_id,
        kind="condensed",
        depth=depth,
        content="",
        first_seq=ordered[0].first_seq,
        last_seq=ordered[-1].last_seq,
        earliest_at=min(s.earliest_at for s in ordered),
        latest_at=max(s.latest_at for s in ordered),
        descendant_count=sum(s.descendant_count + 1 for s in ordered),
        descendant_tokens=sum(s.descendant_tokens for s in ordered),
        message_count=sum(s.message_count for s in ordered),
        file_ids=tuple(dict.fromkeys(f for s in ordered for f in s.file_ids)),
        summarizer="",
        sources=tuple(SourceRef(child_id=s.row_id, omitted=s.hidden) for s in ordered),
    )


def shell_cost(new: NewSummary, child_ids: tuple[str, ...]) -> int:
    """What a summary of ``new``'s span costs in a context with no text at all.

    Its real cost is at most this plus its text's estimate (the estimate of a
    concatenation is at most the sum of the parts'), and a summarizer's text
    never exceeds the size limit it was given, so a limit of ``allowed - shell``
    keeps the summary's cost within ``allowed``.
    """
    shell = Summary(
        row_id=0,
        id=new_summary_id(),  # the real id has the same length
        conversation_id=new.conversation_id,
        kind=new.kind,
        depth=new.depth,
        content="",
        token_count=0,
        first_seq=new.first_seq,
        last_seq=new.last_seq,
        earliest_at=new.earliest_at,
        latest_at=new.latest_at,
        descendant_count=new.descendant_count,
        descendant_tokens=new.descendant_tokens,
        message_count=new.message_count,
        file_ids=new.file_ids,
        summarizer="",
        created_at="",
    )
    return summary_cost(shell, child_ids)


def sized_target(normal: int, room: int) -> int:
    """The size limit of a summary towards a target, given the ``room`` for its text
    within which the pass lands at the target: ``normal``, lowered to ``room`` when
    that is smaller but still a useful size. A smaller room keeps ``normal``: this
    pass cannot reach the target alone, and a later one will go on."""
    if room >= normal or room < min(normal, SIZED_MIN_TOKENS):
        return normal
    return room


def sized_run(
    chunk: list[Item], ordered: list[Summary], need: int, missing: int, normal: int
) -> tuple[list[Item], list[Summary], int]:
    """The shortest prefix (at least ``need`` long) of a condensed chunk whose summary
    can bring the context to the target, ``missing`` tokens away, with the size limit
    that does it; the whole chunk at the ``normal`` limit when no prefix can.

    A prefix that would leave fewer than ``need`` summaries of the chunk behind takes
    them too: next to the new, deeper summary they could only fold with newer ones of
    their depth, and a later, tighter target might find none.
    """
    for size in range(min(need, len(chunk)), len(chunk) + 1):
        take = len(chunk) if 0 < len(chunk) - size < need else size
        kids = ordered[:take]
        shell = shell_cost(
            new_condensed(kids[0].conversation_id, kids[0].depth + 1, kids),
            tuple(k.id for k in kids),
        )
        room = sum(i.token_count for i in chunk[:take]) - missing - shell
        if room >= min(normal, SIZED_MIN_TOKENS):
            return chunk[:take], kids, min(normal, room)
    return chunk, ordered, normal
