"""brain.lcm.entities.lookup: entities by name, and one entity's mentions in time order."""

from __future__ import annotations

import pytest

from brain import Brain, InvalidInput, MessageIn, NotFound
from brain.lcm.entities.lookup import entity_mentions, find_entities


def _conversation(brain: Brain, session: str) -> int:
    return int(brain.store.scalar("SELECT id FROM conversations WHERE session_id = ?", (session,)))


def _seed(brain: Brain) -> None:
    brain.ingest(
        "s",
        [
            MessageIn(
                "user",
                "Yes, Caroline met Melanie.",
                client_id="a",
                created_at="2023-05-01T10:00:00Z",
            ),
            MessageIn(
                "user",
                "Melanie Smith paints. Melanie! Go Melanie",
                client_id="b",
                created_at="2023-05-02T10:00:00Z",
            ),
            MessageIn(
                "user",
                "Caroline moved to Sweden.",
                client_id="c",
                created_at="2023-06-01T10:00:00Z",
            ),
        ],
    )
    brain.ingest(
        "t",
        [MessageIn("user", "Caroline called", client_id="d", created_at="2023-07-01T10:00:00Z")],
    )
    brain.index_entities()


def test_entities_are_found_by_prefix_with_counts_and_first_and_last_seen(
    fresh_brain: Brain,
) -> None:
    _seed(fresh_brain)
    found = find_entities(fresh_brain.store, "mel", None)
    assert [(e.key, e.match, e.messages, e.mentions) for e in found] == [
        ("melanie", "prefix", 2, 3), ("melanie smith", "prefix", 1, 1),
    ]  # fmt: skip
    (caroline,) = find_entities(fresh_brain.store, "Caroline", None)
    assert (caroline.match, caroline.messages, caroline.sessions) == ("exact", 3, 2)
    assert caroline.first_seen.startswith("2023-05-01")
    assert caroline.last_seen.startswith("2023-07-01")


def test_a_later_word_and_a_misspelling_find_the_entity(fresh_brain: Brain) -> None:
    _seed(fresh_brain)
    assert [(e.key, e.match) for e in find_entities(fresh_brain.store, "smith", None)] == [
        ("melanie smith", "word")
    ]
    assert [(e.key, e.match) for e in find_entities(fresh_brain.store, "Caorline", None)] == [
        ("caroline", "fuzzy")
    ]


def test_lookups_are_scoped_to_the_conversations_given(fresh_brain: Brain) -> None:
    _seed(fresh_brain)
    (caroline,) = find_entities(fresh_brain.store, "caroline", [_conversation(fresh_brain, "t")])
    assert (caroline.messages, caroline.sessions) == (1, 1)
    assert find_entities(fresh_brain.store, "melanie", [_conversation(fresh_brain, "t")]) == []
    assert find_entities(fresh_brain.store, "melanie", []) == []


def test_an_entitys_mentions_come_in_time_order_with_snippets(fresh_brain: Brain) -> None:
    _seed(fresh_brain)
    result = entity_mentions(fresh_brain.store, "CAROLINE", None)
    assert (result.name, result.kind, result.total) == ("Caroline", "name", 3)
    assert [(m.session, m.id) for m in result.mentions] == [("s", "a"), ("s", "c"), ("t", "d")]
    assert result.mentions[1].snippet == "Caroline moved to Sweden."
    limited = entity_mentions(fresh_brain.store, "caroline", None, limit=1)
    assert (limited.total, len(limited.mentions)) == (3, 1)


def test_a_suppressed_message_s_mentions_are_neither_returned_nor_counted(
    fresh_brain: Brain,
) -> None:
    _seed(fresh_brain)
    fresh_brain.suppress(["c"], session="s")
    assert [m.id for m in entity_mentions(fresh_brain.store, "caroline", None).mentions] == [
        "a",
        "d",
    ]
    assert find_entities(fresh_brain.store, "caroline", None)[0].messages == 2
    with pytest.raises(NotFound):
        entity_mentions(fresh_brain.store, "sweden", None)
    assert find_entities(fresh_brain.store, "sweden", None) == []
    fresh_brain.suppress(["c"], session="s", suppressed=False)
    assert entity_mentions(fresh_brain.store, "sweden", None).total == 1


def test_a_blank_name_or_unknown_kind_is_refused(fresh_brain: Brain) -> None:
    with pytest.raises(InvalidInput):
        find_entities(fresh_brain.store, "  ", None)
    with pytest.raises(InvalidInput):
        entity_mentions(fresh_brain.store, "x", None, kind="planet")
