"""The budget a session follows, and the compaction sizes that budget implies.

A host assembles a session with a token budget. Compaction that waited for a
fixed 20,000 raw tokens left a host assembling at 4,000 with hundreds of
messages dropped and no summary covering them; so each session remembers the
budget it is assembled with (``conversations.assemble_budget``, persistent, so
a restarted daemon and every process on the database follow it) and
compaction sizes itself from it.

Which budget counts: the smallest one used recently. A smaller budget takes
over at once; a larger one only once the remembered one was set
``FORGET_AFTER`` messages ago or more (a host that alternates is served at its
smaller budget, which its next smaller assemble sets again; one that moved to
a bigger model stops being folded for the old one). The row is written only
when the remembered budget changes, so ``assemble`` stays a read.

Sizes for a budget ``B`` and share ``s`` (``CompactionConfig.budget_share``):
raw history outside the tail starts compaction above ``min(threshold_tokens,
s*B)``; the summaries in the context list are condensed above ``s*B``; what
is left, ``B - 2*s*B``, caps the tail compaction keeps (fewer than
``fresh_tail_count`` messages when they are long). So once background work
settles, tail + raw + summaries fit ``B`` and assemble drops nothing. Leaf
chunks are half of ``s*B``, leaf summaries aim at a quarter of a chunk,
condensed ones at a quarter of the summaries' share (each never above its
configured size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from brain.config import CompactionConfig
from brain.lcm.context import Conversation
from brain.store.connection import Store

FORGET_AFTER: Final = 200
"""Messages after which a larger budget replaces the remembered smaller one."""

_MIN_CHUNK: Final = 200  # a leaf chunk smaller than this summarises nothing useful
_MIN_TARGET: Final = 64  # nor a summary aimed below this


@dataclass(frozen=True, slots=True)
class Sizes:
    """How compaction sizes its work for one session."""

    threshold: int
    """Raw tokens outside the tail above which leaf passes run."""
    leaf_chunk: int
    """Most raw tokens one leaf summary covers."""
    leaf_target: int
    condensed_target: int
    summary_room: int | None
    """Summary tokens in the context list above which summaries are condensed
    (None: no budget remembered, condensation by fanout only)."""
    tail_tokens: int | None
    """Most tokens of the tail compaction keeps (None: ``fresh_tail_count`` whatever
    it costs)."""
    flush_soft: int
    """How close to ``threshold`` assemble starts recommending a memory flush."""


def sizes(config: CompactionConfig, budget: int | None) -> Sizes:
    """The sizes compaction uses for a session that follows ``budget`` (None: the
    configured ones)."""
    if budget is None:
        return Sizes(
            threshold=config.threshold_tokens,
            leaf_chunk=config.leaf_chunk_tokens,
            leaf_target=config.leaf_target_tokens,
            condensed_target=config.condensed_target_tokens,
            summary_room=None,
            tail_tokens=None,
            flush_soft=config.flush_soft_tokens,
        )
    room = max(1, int(budget * config.budget_share))
    threshold = min(config.threshold_tokens, room)
    chunk = min(config.leaf_chunk_tokens, max(_MIN_CHUNK, room // 2))
    return Sizes(
        threshold=threshold,
        leaf_chunk=chunk,
        leaf_target=min(config.leaf_target_tokens, max(_MIN_TARGET, chunk // 4)),
        condensed_target=min(config.condensed_target_tokens, max(_MIN_TARGET, room // 4)),
        summary_room=room,
        tail_tokens=max(0, budget - threshold - room),
        # The configured soft margin is a share of the configured threshold: keep it.
        flush_soft=config.flush_soft_tokens * threshold // max(1, config.threshold_tokens),
    )


def follow_due(conv: Conversation, budget: int) -> bool:
    """Whether assembling ``conv`` with ``budget`` changes the budget it follows (no write)."""
    current = conv.budget
    if current == budget:
        return False
    if current is not None and budget > current:
        since = conv.max_seq - (conv.budget_seq or 0)
        if since < FORGET_AFTER:
            return False  # the smaller one is recent: it still counts
    return True


def follow(store: Store, conv: Conversation, budget: int) -> bool:
    """Remember that ``conv`` was assembled with ``budget``; True if the remembered
    budget changed (and was written)."""
    if not follow_due(conv, budget):
        return False
    with store.transaction():
        store.execute(
            "UPDATE conversations SET assemble_budget = ?, assemble_budget_seq = ? WHERE id = ?",
            (budget, conv.max_seq, conv.id),
        )
    return True
