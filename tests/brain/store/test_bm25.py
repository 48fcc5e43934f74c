"""brain.store.bm25: FTS5's bm25 with document frequencies the caller gives."""

from __future__ import annotations

import pytest

from brain import Brain, MessageIn


def test_brain_bm25_with_exact_counts_scores_every_row_as_fts5s_bm25(fresh_brain: Brain) -> None:
    words = ["deploy", "review", "budget", "release", "meeting"]
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", " ".join(words[(i * k) % 5] for k in range(1 + i % 9)), name="ann")
            for i in range(300)
        ],
    )
    store = fresh_brain.store
    phrases = ['"deploy"', '"budget"', '"ann"']
    counts = [
        int(store.scalar("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (p,)))
        for p in phrases
    ]
    match = f"conv : c1 AND {{content name}} : ({' OR '.join(phrases)})"
    rows = list(
        store.execute(
            "SELECT bm25(messages_fts, 1.0, 1.0, 0.0), brain_bm25(messages_fts, -1, ?, ?, ?) "
            "FROM messages_fts WHERE messages_fts MATCH ?",
            (*counts, match),
        )
    )
    assert len(rows) == 300
    for fts5, ours in rows:
        assert ours == pytest.approx(fts5, rel=1e-12, abs=1e-15)


def test_a_negative_count_leaves_its_phrase_out_of_the_score(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("user", "alpha beta"), MessageIn("user", "alpha")])
    store = fresh_brain.store
    both = dict(
        store.execute(
            "SELECT rowid, brain_bm25(messages_fts, 2, -1) FROM messages_fts "
            "WHERE messages_fts MATCH 'alpha OR beta'"
        )
    )
    alone = dict(
        store.execute(
            "SELECT rowid, brain_bm25(messages_fts, 2) FROM messages_fts "
            "WHERE messages_fts MATCH 'alpha'"
        )
    )
    assert both == alone
