"""The background worker (daemon/embeddings.py) over a real engine and database file."""

from __future__ import annotations

import anyio

from brain import Brain, MessageIn
from daemon.embeddings import Embeddings


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
