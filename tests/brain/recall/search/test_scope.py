"""brain.recall.search.scope: sessions and session keys to conversations, times to stored form."""

from __future__ import annotations

import pytest

from brain import Brain, InvalidInput, NotFound
from brain.lcm.context import find_session
from brain.recall.search import GrepOptions
from brain.recall.search.scope import narrowed, scoped
from tests.brain.recall.search.helpers import fill


def _id(brain: Brain, session: str) -> int:
    filed = find_session(brain.store, session)
    assert filed is not None
    return filed.id


def test_a_session_narrows_the_search_to_its_conversation(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    got = narrowed(fresh_brain.store, GrepOptions("alpha"), session="s", session_key="k")
    assert got.conversations == (_id(fresh_brain, "s"),)


def test_an_unknown_session_is_not_found_by_name(fresh_brain: Brain) -> None:
    """A search naming a session that was never written is a mistake (a mistyped name),
    told as such rather than answered with no hits."""
    fill(fresh_brain)
    with pytest.raises(NotFound, match="no session 'nope'") as raised:
        narrowed(fresh_brain.store, GrepOptions("a"), session="nope", session_key=None)
    assert raised.value.data == {"session": "nope"}


def test_a_session_key_nothing_is_filed_under_leaves_nothing_to_search(
    fresh_brain: Brain,
) -> None:
    # A key groups sessions yet to come (a pinned MCP server's, a host's agent): empty is
    # an answer, not a mistake.
    fill(fresh_brain)
    store = fresh_brain.store
    assert narrowed(store, GrepOptions("a"), session=None, session_key="nope").conversations == ()


def test_a_session_key_narrows_the_search_to_its_sessions(fresh_brain: Brain) -> None:
    fill(fresh_brain)
    got = narrowed(fresh_brain.store, GrepOptions("alpha"), session=None, session_key="k")
    assert got.conversations == (_id(fresh_brain, "t"),)


def test_neither_leaves_the_options_as_they_were(fresh_brain: Brain) -> None:
    options = GrepOptions("alpha", since="2026-01-01T12:00:00+02:00")
    assert narrowed(fresh_brain.store, options, session=None, session_key=None) is options


def test_time_bounds_become_stored_utc_timestamps(fresh_brain: Brain) -> None:
    options = GrepOptions("a", since="2026-01-01T12:00:00+02:00", before="2026-01-02")
    got = scoped(fresh_brain.store, options, session=None, session_key=None)
    assert (got.since, got.before) == ("2026-01-01T10:00:00.000Z", "2026-01-02T00:00:00.000Z")


@pytest.mark.parametrize("field", ["since", "before"])
def test_a_time_bound_that_is_not_iso_8601_names_its_field(fresh_brain: Brain, field: str) -> None:
    options = GrepOptions("a", since="yesterday" if field == "since" else None)
    if field == "before":
        options = GrepOptions("a", before="yesterday")
    with pytest.raises(InvalidInput, match=field):
        scoped(fresh_brain.store, options, session=None, session_key=None)
