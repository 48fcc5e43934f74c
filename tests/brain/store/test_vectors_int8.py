"""Schema v19: float32 vectors rewritten as int8 with a scale, and the deletion counters."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from brain import MessageIn
from brain.lcm.ingest import ingest
from brain.store.connection import open_store
from brain.store.migrations import vectors_int8
from brain.store.schema import MIGRATIONS
from brain.vectors.embedders import HashEmbedder
from brain.vectors.index import VectorIndex
from brain.vectors.matrix import gone
from brain.vectors.quantise import decode
from brain.vectors.writes import drop_vectors

DIM = 16
TEXTS = ("deploy failed again", "the cat sleeps", "budget meeting at noon", "pasta recipe")


def test_a_database_with_float32_vectors_is_migrated_to_int8_and_searches_alike(
    db_path: Path,
) -> None:
    store = open_store(db_path)
    try:
        ingest(store, "s", [MessageIn("user", t, client_id=str(i)) for i, t in enumerate(TEXTS)])
        index = VectorIndex(DIM, file=False)
        index.check_identity(store, HashEmbedder(DIM))
        index.drain(store, HashEmbedder(DIM))
        floats = HashEmbedder(DIM).embed(list(TEXTS))
        with store.transaction():  # back to v18: float32 blobs, no counters
            for i, vector in enumerate(floats):
                store.execute(
                    "UPDATE vectors SET vector = ? WHERE row_id = "
                    "(SELECT id FROM messages WHERE client_id = ?)",
                    (vector.tobytes(), str(i)),
                )
            store.execute("DROP TRIGGER vectors_gone_delete")
            store.execute("DROP TRIGGER vectors_gone_update")
            store.execute("DELETE FROM meta WHERE key LIKE 'vectors_gone:%'")
        # v18: the int8 migration and every later one run again at the next open.
        store.execute(f"PRAGMA user_version = {MIGRATIONS.index(vectors_int8.SCRIPTS[0])}")
    finally:
        store.close()
    store = open_store(db_path)
    try:
        blobs = [bytes(r[0]) for r in store.execute("SELECT vector FROM vectors ORDER BY row_id")]
        assert [len(b) for b in blobs] == [DIM + 4] * len(TEXTS)
        for blob, vector in zip(blobs, floats, strict=True):
            np.testing.assert_allclose(decode(blob, DIM), vector, atol=0.01)
        index = VectorIndex(DIM, file=False)
        index.check_identity(store, HashEmbedder(DIM))
        for i, text in enumerate(TEXTS):
            hit = index.search(store, HashEmbedder(DIM).embed([text])[0], 1)[0]
            assert hit[1] == store.scalar("SELECT id FROM messages WHERE client_id = ?", (str(i),))
        assert gone(store, ("message",)) == (0,)
        with store.transaction():
            drop_vectors(store, "message", [int(store.scalar("SELECT min(id) FROM messages"))])
        assert gone(store, ("message", "summary", "node")) == (1, 0, 0)
    finally:
        store.close()
