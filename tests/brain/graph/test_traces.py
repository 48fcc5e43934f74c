"""Stored query traces stay bounded: by count as they are written, by age in maintenance."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brain import Brain, BrainConfig, MessageIn
from brain.graph.nodes import NewNode
from brain.lcm.assemble import AssembleOptions
from brain.vectors.embedders import HashEmbedder


def _brain(db_path: Path, **config: object) -> Brain:
    brain = Brain(db_path, BrainConfig(**config))  # type: ignore[arg-type]
    brain.embedder = HashEmbedder(64)
    return brain


@pytest.fixture
def taught(db_path: Path) -> Iterator[Path]:
    """A database with one taught node and a session whose newest user turn recalls it."""
    brain = _brain(db_path)
    try:
        brain.teach(NewNode("teaching", "deploys go to the kestrel staging cluster"))
        brain.ingest("s", [MessageIn("user", "which staging cluster do deploys go to?")])
    finally:
        brain.close()
    return db_path


def _traces(brain: Brain) -> list[str]:
    return [str(r[0]) for r in brain.store.execute("SELECT trace_id FROM traces ORDER BY id")]


def test_assemble_with_recall_shadow_keeps_only_the_newest_trace_max_count_traces(
    taught: Path,
) -> None:
    brain = _brain(taught, recall_mode="shadow", trace_max_count=3)
    try:
        made = []
        for _ in range(7):
            assembled = brain.assemble("s", AssembleOptions(budget=4_000))
            assert assembled.recall is not None
            made.append(assembled.recall.trace_id)
        assert _traces(brain) == made[-3:]
        assert brain.trace(chat_id="s")["trace_id"] == made[-1]  # learn still finds the latest
    finally:
        brain.close()


def test_maintenance_deletes_traces_past_the_age_limit_and_beyond_a_lowered_count(
    taught: Path,
) -> None:
    brain = _brain(taught, trace_max_age_days=30)
    try:
        made = [brain.query("which staging cluster", chat_id="c").trace_id for _ in range(6)]
        brain.store.execute(
            "UPDATE traces SET created_at = '2020-01-01T00:00:00.000Z' WHERE trace_id IN (?, ?)",
            (made[0], made[3]),
        )
        dry = brain.maintain(["prune"], dry_run=True)
        assert dry.tasks["prune"]["traces"] == 2
        assert dry.health_after.traces == 4
        assert _traces(brain) == made  # a dry run deletes nothing
        done = brain.maintain(["prune"])
        assert done.tasks["prune"]["traces"] == 2
        assert done.health_after.traces == 4
        assert _traces(brain) == [made[1], made[2], made[4], made[5]]
    finally:
        brain.close()
    lowered = _brain(taught, trace_max_count=2)
    try:
        assert lowered.maintain(["prune"]).tasks["prune"]["traces"] == 2
        assert _traces(lowered) == [made[4], made[5]]
    finally:
        lowered.close()


@pytest.mark.parametrize(
    "config", [{"trace_max_count": 0}, {"trace_max_age_days": 0}, {"trace_max_age_days": -1.0}]
)
def test_a_trace_retention_that_keeps_nothing_is_refused(config: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(config))):
        BrainConfig(**config)  # type: ignore[arg-type]


def test_a_query_under_group_commit_records_its_trace_without_waiting_for_an_fsync(
    taught: Path,
) -> None:
    brain = _brain(taught, group_commit=True)
    try:
        group = brain._access.group
        assert group is not None
        before = group.syncs
        made = brain.query("which staging cluster", chat_id="c").trace_id
        assert group.syncs == before
        assert brain.trace(chat_id="c")["trace_id"] == made
        brain.learn(1.0, chat_id="c")  # a learn is a durable write: it waits for one
        assert group.syncs == before + 1
    finally:
        brain.close()


def test_a_stream_of_recorded_queries_keeps_the_wal_within_its_checkpoint_bound(
    db_path: Path,
) -> None:
    # A trace committed while its query's read transaction was still open could never
    # be checkpointed whole: the WAL never restarted from its start and grew by every
    # query's frames, each commit past the bound running a checkpoint of its own.
    brain = _brain(db_path)
    try:
        for i in range(20):
            brain.teach(NewNode("teaching", f"note {i}: deploys go to the kestrel cluster"))
        brain.store.execute("PRAGMA wal_autocheckpoint = 10")
        brain.store.checkpoint(truncate=True)  # the WAL file stays at its high-water mark
        wal = db_path.with_name(db_path.name + "-wal")
        page = int(brain.store.scalar("PRAGMA page_size"))
        for i in range(80):
            assert brain.query("where do deploys go", chat_id=f"c{i}").trace_id
        # The bound plus a few queries' frames: one checkpoint runs per ~bound pages.
        assert wal.stat().st_size <= 40 * (page + 24) + 32
        assert brain.trace(chat_id="c79")["query"] == "where do deploys go"
    finally:
        brain.close()
