"""brain.recall.search.terms: any user text becomes a safe FTS5 query."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.recall.search import fts_query


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_any_user_text_is_a_safe_full_text_query(text: str) -> None:
    query = fts_query(text)
    if query is not None:
        assert query.count('"') % 2 == 0
        assert all(part.startswith('"') and part.endswith('"') for part in query.split(" OR "))
