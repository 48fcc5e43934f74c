"""The background worker (daemon/embeddings.py) over a real engine and database file."""

from __future__ import annotations

from pathlib import Path

import anyio

from brain import Brain, MessageIn
from brain.vectors.embed_child import ChildStaticEmbedder
from brain.vectors.embedders import StaticEmbedder
from daemon.embeddings import BATCH, CHILD_BATCH, Embeddings


def test_embedding_goes_on_while_the_entity_index_never_catches_up(fresh_brain: Brain) -> None:
    # While writes keep coming, the entity index's queue may never empty. Each entity
    # batch here stores one more message (queued for both), as a steady ingest would:
    # the worker must keep embedding between entity batches, not wait for that queue
    # to empty first (embedding then stopped for good at 1M messages).
    brain = fresh_brain
    brain.ingest("s", [MessageIn("user", f"first message number {i}") for i in range(40)])
    worker = Embeddings(brain, batch=16, settle_s=0, max_wait_s=0)
    index_entities = brain.index_entities
    rounds = 0

    def entities_while_writes_continue(batches: int | None = None) -> int:
        nonlocal rounds
        rounds += 1
        brain.ingest("other", [MessageIn("user", f"a later message {rounds}")])
        index_entities(batches)
        if rounds == 30:
            worker.stop()
        return 1  # the queue is never empty while writes come

    brain.index_entities = entities_while_writes_continue  # type: ignore[method-assign]
    anyio.run(worker.run)
    assert rounds == 30
    # Only the message stored by the last entity batch, after the last embedding one.
    assert brain.embeddings_pending() <= 1
    assert worker.embedded >= 40 + 29


def test_embedding_gets_three_batches_for_each_entity_batch_while_both_queues_wait(
    fresh_brain: Brain,
) -> None:
    # A row costs the entity index ~3x what it costs the static embedder: one batch
    # each let embedding fall behind a steady ingest at 1M messages. Once nothing
    # waits to be embedded, the entity index gets every round.
    brain = fresh_brain
    brain.ingest("s", [MessageIn("user", f"Alice met Bob number {i}") for i in range(200)])
    calls: list[str] = []
    embed_pending, index_entities = brain.embed_pending, brain.index_entities

    def embed(batch: int = 256) -> int:
        calls.append("embed")
        return embed_pending(batch)

    def entities(batches: int | None = None) -> int:
        calls.append("entities")
        return index_entities(batches)

    brain.embed_pending = embed  # type: ignore[method-assign]
    brain.index_entities = entities  # type: ignore[method-assign]
    worker = Embeddings(brain, batch=16, settle_s=0, max_wait_s=0)

    async def drain_once() -> None:
        await worker._drain()

    anyio.run(drain_once)
    assert brain.embeddings_pending() == 0
    # 200 rows in batches of 16: 13 batches, then a look that finds none. The entity
    # index (one batch holds all 200) waits three batches at a time until then.
    assert calls == ["embed", "embed", "embed", "entities"] * 4 + ["embed", "embed", "entities"]


def test_the_worker_takes_larger_batches_when_a_child_process_embeds_them(db_path: Path) -> None:
    # Each batch waits twice for the writer's lock; the child holds none of this
    # process's locks, so the worker asks it for fewer, larger batches.
    child = ChildStaticEmbedder()
    brain = Brain(db_path, embedder=child)
    try:
        brain.ingest("s", [MessageIn("user", f"message number {i}") for i in range(5)])
        taken: list[int] = []
        embed_ahead = brain.embed_ahead

        def recorded(batch: int = 4096) -> int:
            taken.append(batch)
            return embed_ahead(batch)

        brain.embed_ahead = recorded  # type: ignore[method-assign]
        worker = Embeddings(brain, settle_s=0, max_wait_s=0)
        assert worker.batch == CHILD_BATCH
        anyio.run(worker._drain)
        assert taken[0] == CHILD_BATCH
        assert brain.embeddings_pending() == 0
        brain.embedder = StaticEmbedder()  # the same vectors, embedded here
        assert worker.batch == BATCH
        assert Embeddings(brain, batch=16).batch == 16  # one given wins
    finally:
        brain.close()
        child.close()
