"""brain.recall.search.semantic: which rows a semantic search reads."""

from __future__ import annotations

from typing import Any

import orjson

from brain import Brain, MessageIn
from brain.recall.search import GrepOptions
from brain.recall.search.semantic import semantic_search


def test_a_scoped_search_reads_only_the_rows_it_returns_when_none_is_hidden(
    fresh_brain: Brain,
) -> None:
    # The index has applied the scope: the nearest ``limit`` are the answer unless some
    # are suppressed, so only they are read (not the whole over-fetch).
    fresh_brain.ingest("s", [MessageIn("user", f"note {i}") for i in range(60)])
    store = fresh_brain.store
    ids = [int(r[0]) for r in store.execute("SELECT id FROM messages ORDER BY id DESC")]

    def nearest(k: int) -> list[tuple[str, int, float]]:
        return [("message", row_id, 1.0 - i / 100) for i, row_id in enumerate(ids[:k])]

    read: list[int] = []

    def trace(sql: str, bindings: Any) -> None:
        if "FROM messages m JOIN conversations c" in sql:
            read.append(len(orjson.loads(bindings[0])))

    store.set_tracer(trace)
    try:
        hits = semantic_search(
            store, GrepOptions("note", mode="semantic", limit=5, conversations=(1,)), nearest
        )
    finally:
        store.set_tracer(None)
    assert [h.score for h in hits] == [1.0, 0.99, 0.98, 0.97, 0.96]
    assert read == [5]
