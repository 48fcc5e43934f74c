"""brain.lcm.entities.overlap: entities shared by a query and candidates, and the second hop."""

from __future__ import annotations

import numpy as np
import pytest

from brain import Brain, MessageIn
from brain.lcm.entities import overlap
from brain.lcm.entities.overlap import entity_overlap, second_hop


def _ids(brain: Brain) -> dict[str, int]:
    rows = brain.store.execute("SELECT client_id, id FROM messages")
    return {str(r[0]): int(r[1]) for r in rows}


def _seed(brain: Brain) -> dict[str, int]:
    brain.ingest(
        "s",
        [
            MessageIn("user", "Caroline met Melanie at the LGBTQ support group.", client_id="a"),
            MessageIn("user", "Melanie ran 5 km in Central Park on 8 May 2023.", client_id="b"),
            MessageIn("user", "the weather is nice today", client_id="c"),
            MessageIn("user", "Central Park was crowded, said Jon.", client_id="d"),
        ],
    )
    brain.ingest("t", [MessageIn("user", "Central Park again with Jon", client_id="e")])
    brain.index_entities()
    return _ids(brain)


def test_overlap_counts_the_query_entities_each_candidate_mentions(fresh_brain: Brain) -> None:
    ids = _seed(fresh_brain)
    rows = np.array([ids["a"], ids["b"], ids["c"], -1, ids["d"]], dtype=np.int64)
    got = entity_overlap(fresh_brain.store, "Did Melanie run in Central Park?", rows)
    assert got.tolist() == [1.0, 2.0, 0.0, 0.0, 1.0]
    none = entity_overlap(fresh_brain.store, "nothing named here", rows)
    assert none.tolist() == [0.0] * 5


def test_a_suppressed_candidate_shares_no_entity(fresh_brain: Brain) -> None:
    ids = _seed(fresh_brain)
    fresh_brain.suppress(["b"], session="s")
    rows = np.array([ids["a"], ids["b"]], dtype=np.int64)
    assert entity_overlap(fresh_brain.store, "Melanie", rows).tolist() == [1.0, 0.0]


def test_the_second_hop_finds_turns_naming_what_the_top_hits_name(fresh_brain: Brain) -> None:
    ids = _seed(fresh_brain)
    hop = second_hop(fresh_brain.store, [ids["a"]])
    assert hop == [ids["b"]]  # shares Melanie; c names nothing
    wider = second_hop(fresh_brain.store, [ids["b"]])
    assert set(wider) == {ids["a"], ids["d"], ids["e"]}
    conversation = int(
        fresh_brain.store.scalar("SELECT conversation_id FROM messages WHERE id = ?", (ids["a"],))
    )
    assert ids["e"] not in second_hop(fresh_brain.store, [ids["b"]], conversations=[conversation])


def test_the_second_hop_never_returns_a_suppressed_message(fresh_brain: Brain) -> None:
    ids = _seed(fresh_brain)
    fresh_brain.suppress(["d"], session="s")
    assert ids["d"] not in second_hop(fresh_brain.store, [ids["b"]])


def test_overlap_with_common_set_ignores_entities_mentioned_in_more_messages(
    fresh_brain: Brain,
) -> None:
    ids = _seed(fresh_brain)  # Central Park: 3 messages; Melanie: 2
    rows = np.array([ids["a"], ids["b"], ids["d"]], dtype=np.int64)
    query = "Did Melanie run in Central Park?"
    assert entity_overlap(fresh_brain.store, query, rows, common=2).tolist() == [1.0, 1.0, 0.0]
    assert entity_overlap(fresh_brain.store, query, rows, common=1).tolist() == [0.0] * 3


def test_an_entity_common_across_the_database_links_nothing_even_where_it_is_rare(
    fresh_brain: Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overlap, "HOP_COMMON", 2)
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", "Zanele came by", client_id="a"),
            MessageIn("user", "Zanele left early", client_id="b"),
        ],
    )
    fresh_brain.ingest("t", [MessageIn("user", "Zanele again", client_id="c")])
    fresh_brain.index_entities()
    ids = _ids(fresh_brain)
    scope = [int(fresh_brain.store.scalar("SELECT id FROM conversations WHERE session_id = 's'"))]
    assert second_hop(fresh_brain.store, [ids["a"]], conversations=scope) == []
    monkeypatch.setattr(overlap, "HOP_COMMON", 3)
    assert second_hop(fresh_brain.store, [ids["a"]], conversations=scope) == [ids["b"]]
