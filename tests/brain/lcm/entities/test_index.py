"""brain.lcm.entities.index: mentions are written with their message, and older
messages are indexed when the database is opened after the upgrade."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest

from brain import Brain, Conflict, MessageIn
from brain.lcm.entities.index import index_backlog
from brain.store.migrations.entities import ENTITIES
from brain.store.schema import MIGRATIONS


def _mentions(brain: Brain) -> set[tuple[str, str]]:
    brain.index_entities()
    rows = brain.store.execute(
        "SELECT m.client_id, e.key FROM entity_mentions em JOIN entities e ON e.id = em.entity_id "
        "JOIN messages m ON m.id = em.message_id"
    )
    return {(str(r[0]), str(r[1])) for r in rows}


def test_ingest_queues_each_new_message_and_indexing_records_its_entities(
    fresh_brain: Brain,
) -> None:
    fresh_brain.ingest(
        "s",
        [
            MessageIn(
                "user", "So Caroline went to the support group on 8 May 2023.", client_id="a"
            ),
            MessageIn("assistant", "Did Caroline like it? See /srv/notes/group.md", client_id="b"),
        ],
    )
    assert fresh_brain.store.scalar("SELECT count(*) FROM entity_backlog") == 2
    assert _mentions(fresh_brain) == {
        ("a", "caroline"), ("a", "8 may 2023"), ("b", "caroline"), ("b", "/srv/notes/group.md"),
    }  # fmt: skip
    # One entity row for both mentions, with the span of what was written.
    row = fresh_brain.store.one(
        "SELECT e.name, em.start, em.end FROM entity_mentions em "
        "JOIN entities e ON e.id = em.entity_id JOIN messages m ON m.id = em.message_id "
        "WHERE m.client_id = 'a' AND e.key = 'caroline'"
    )
    assert row == ("Caroline", 3, 11)


def test_a_duplicate_message_adds_no_mentions_twice(fresh_brain: Brain) -> None:
    msg = MessageIn("user", "So Melanie paints on Sundays with Caroline", client_id="a")
    fresh_brain.ingest("s", [msg])
    fresh_brain.ingest("s", [msg])
    assert len(_mentions(fresh_brain)) == 2
    assert fresh_brain.store.scalar("SELECT count(*) FROM entity_mentions") == 2


def test_a_message_is_queued_with_its_message_or_not_at_all(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("user", "hello there", client_id="a")])
    with pytest.raises(Conflict):
        fresh_brain.ingest(
            "s",
            [
                MessageIn("user", "Melanie went to Paris", client_id="b"),
                MessageIn("user", "something else", client_id="a"),  # reused id: Conflict
            ],
        )
    assert fresh_brain.store.scalar("SELECT count(*) FROM messages") == 1
    assert fresh_brain.store.scalar("SELECT count(*) FROM entity_backlog") == 1
    assert fresh_brain.index_entities() == 1
    assert fresh_brain.store.scalar("SELECT count(*) FROM entity_mentions") == 0


@contextmanager
def _opened(path: Path) -> Iterator[Brain]:
    brain = Brain(path)
    try:
        yield brain
    finally:
        brain.close()


def _downgrade(path: Path) -> None:
    """Make ``path`` a database of the version before the entity index, messages kept."""
    conn = apsw.Connection(str(path))
    version = MIGRATIONS.index(ENTITIES)
    conn.execute(
        "DROP TABLE entity_mentions; DROP TABLE entities; DROP TABLE entity_backlog; "
        f"PRAGMA user_version = {version}"
    )
    conn.close()


def test_messages_stored_before_the_entity_index_are_queued_and_indexed(db_path: Path) -> None:
    with _opened(db_path) as brain:
        brain.ingest(
            "s",
            [
                MessageIn("user", f"Caroline met Melanie, turn {i}", client_id=f"m{i}")
                for i in range(7)
            ],
        )
    _downgrade(db_path)
    with _opened(db_path) as brain:
        # The migration queued them; the first drain indexes them.
        assert brain.store.scalar("SELECT count(*) FROM entity_backlog") == 7
        assert brain.index_entities() == 7
        assert brain.store.scalar("SELECT count(*) FROM entity_mentions") == 14
        brain.ingest("s", [MessageIn("user", "Melanie again", client_id="new")])
        assert ("new", "melanie") in _mentions(brain)


def test_the_backlog_is_indexed_in_bounded_batches_each_once(db_path: Path) -> None:
    with _opened(db_path) as brain:
        brain.ingest("s", [MessageIn("user", f"Caroline {i}", client_id=f"m{i}") for i in range(5)])
        brain.index_entities()
        store = brain.store
        store.execute("DELETE FROM entity_mentions")
        store.execute("INSERT INTO entity_backlog SELECT id FROM messages")
        assert index_backlog(store, batch=2, batches=2) == 4
        assert index_backlog(store, batch=2) == 1
        assert index_backlog(store, batch=2) == 0
        assert store.scalar("SELECT count(*) FROM entity_mentions") == 5
