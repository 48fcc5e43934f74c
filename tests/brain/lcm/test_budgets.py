"""brain.lcm.budgets: a session follows the budget it is assembled with, and compaction
sizes itself from it (default settings: the threshold alone would be 20,000 tokens)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain import Brain, BrainConfig
from brain.config import CompactionConfig
from brain.lcm.assemble import AssembleOptions
from brain.lcm.budgets import FORGET_AFTER, sizes
from brain.lcm.context import conversation
from tests.brain.lcm.helpers import assert_invariants, chat


def followed(brain: Brain, session: str) -> int | None:
    return conversation(brain.store, session).budget


def summary_tokens(brain: Brain, session: str) -> int:
    conv = conversation(brain.store, session)
    return int(
        brain.store.scalar(
            "SELECT coalesce(sum(token_count), 0) FROM context_items "
            "WHERE conversation_id = ? AND summary_id IS NOT NULL",
            (conv.id,),
        )
    )


def test_a_session_remembers_its_budget_in_the_database(brain: Brain, db_path: Path) -> None:
    brain.ingest("s", chat(10))
    assert followed(brain, "s") is None
    brain.assemble("s", AssembleOptions(budget=4_000))
    other = Brain(db_path, BrainConfig())  # another process, or the daemon restarted
    try:
        assert followed(other, "s") == 4_000
    finally:
        other.close()


def test_assembling_again_with_the_remembered_budget_writes_nothing(brain: Brain) -> None:
    brain.ingest("s", chat(10))
    first = brain.assemble("s", AssembleOptions(budget=4_000))
    changes = brain.store.conn.total_changes()
    again = brain.assemble("s", AssembleOptions(budget=4_000))
    assert first.budget_changed
    assert not again.budget_changed
    assert brain.store.conn.total_changes() == changes


def test_a_smaller_budget_takes_over_at_once_a_larger_one_only_once_the_smaller_is_old(
    brain: Brain,
) -> None:
    brain.ingest("s", chat(10))
    brain.assemble("s", AssembleOptions(budget=16_000))
    brain.assemble("s", AssembleOptions(budget=4_000))
    assert followed(brain, "s") == 4_000
    brain.assemble("s", AssembleOptions(budget=16_000))
    assert followed(brain, "s") == 4_000  # the smaller one is recent: it still counts
    brain.ingest("s", chat(FORGET_AFTER, start=10))
    brain.assemble("s", AssembleOptions(budget=16_000))
    assert followed(brain, "s") == 16_000


def test_sizes_scale_with_the_budget_and_never_pass_the_configured_ones() -> None:
    config = CompactionConfig()
    assert sizes(config, None).threshold == config.threshold_tokens
    small = sizes(config, 4_000)
    assert small.threshold == small.summary_room == 1_000  # a quarter each
    assert small.tail_tokens == 2_000
    assert small.leaf_chunk < small.threshold
    assert small.leaf_target < small.leaf_chunk
    assert small.condensed_target < small.summary_room
    huge = sizes(config, 1_000_000)
    assert huge.threshold == config.threshold_tokens
    assert huge.leaf_chunk == config.leaf_chunk_tokens
    assert huge.leaf_target == config.leaf_target_tokens
    assert huge.condensed_target == config.condensed_target_tokens
    with pytest.raises(ValueError, match="budget_share"):
        CompactionConfig(budget_share=0.75)


def test_compaction_starts_at_a_share_of_the_followed_budget_not_at_the_threshold(
    brain: Brain,
) -> None:
    brain.ingest("s", chat(120))  # ~6,000 tokens: far under the 20,000 threshold
    assert brain.compact_incremental("s").summaries == []
    before = brain.assemble("s", AssembleOptions(budget=4_000))
    assert before.gaps["messages"] > 0  # history the context cannot hold yet
    assert brain.compaction_due("s")
    report = brain.compact_incremental("s")
    assert report.leaf_passes > 0
    after = brain.assemble("s", AssembleOptions(budget=4_000))
    assert after.dropped == {"summaries": 0, "messages": 0}
    assert after.tokens <= 4_000
    assert not brain.compaction_due("s")
    assert_invariants(brain, "s")


def test_the_tail_compaction_keeps_is_no_bigger_than_the_budget_leaves_it(brain: Brain) -> None:
    # 32 messages of ~230 tokens: a 7,000-token tail, which a 4,000 budget would cut
    # (and with it everything older).
    brain.ingest("s", chat(64, words=150))
    brain.assemble("s", AssembleOptions(budget=4_000))
    brain.compact_incremental("s")
    out = brain.assemble("s", AssembleOptions(budget=4_000))
    assert out.dropped == {"summaries": 0, "messages": 0}
    assert out.fresh_tail["count"] < 32
    assert out.included["summaries"] >= 1


def test_summaries_are_condensed_to_fit_their_share_of_the_budget_however_long_history_gets(
    brain: Brain,
) -> None:
    # ~200,000 tokens of history, assembled at 4,000 every 20 messages: same-depth runs
    # alone would leave one summary per depth, more than their share can hold.
    brain.assemble("s", AssembleOptions(budget=4_000))  # nothing yet: nothing remembered
    for start in range(0, 4_000, 20):
        brain.ingest("s", chat(20, start=start))
        brain.assemble("s", AssembleOptions(budget=4_000))
        brain.compact_incremental("s")
        assert summary_tokens(brain, "s") <= sizes(brain.config.compaction, 4_000).summary_room
        out = brain.assemble("s", AssembleOptions(budget=4_000))
        assert out.dropped == {"summaries": 0, "messages": 0}, start
    mixed = brain.store.scalar(
        "SELECT count(*) FROM summaries s WHERE s.kind = 'condensed' AND (SELECT "
        "count(DISTINCT k.depth) FROM summary_sources ss JOIN summaries k ON k.id = ss.child_id "
        "WHERE ss.summary_id = s.id) > 1"
    )
    assert mixed > 0  # the oldest summaries were folded across depths
    assert_invariants(brain, "s")
