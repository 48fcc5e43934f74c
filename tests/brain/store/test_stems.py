"""brain.store.stems: words become the terms the full-text vocabularies hold."""

from __future__ import annotations

import threading

from brain.store.stems import index_term, index_terms


def test_a_word_becomes_the_porter_stem_fts5_indexes() -> None:
    assert index_terms(["deploys", "Running", "kestrel"]) == ["deploi", "run", "kestrel"]


def test_a_word_with_no_token_has_no_term() -> None:
    assert index_term("--") is None


def test_each_thread_stems_on_its_own_connection() -> None:
    out: list[str | None] = []
    thread = threading.Thread(target=lambda: out.append(index_term("clusters")))
    thread.start()
    thread.join()
    assert out == ["cluster"]
