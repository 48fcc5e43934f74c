"""brain.recall.search.ranking: the learned stage reorders full_text and hybrid hits."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from brain import Brain, MessageIn
from brain.recall.search import GrepOptions, ranking
from brain.recall.search.ranking import (
    RANKER_VERSION,
    RankerMismatch,
    feature_names,
    load_models,
    ranked_search,
)


def _weights(path: Path, **by_feature: float) -> Path:
    """A weights file whose models weigh only the features named (unit scale, zero mean)."""
    names = feature_names()
    model = {
        "mean": [0.0] * len(names),
        "scale": [1.0] * len(names),
        "weights": [by_feature.get(n, 0.0) for n in names],
        "bias": 0.0,
    }
    path.write_text(
        json.dumps(
            {
                "version": RANKER_VERSION,
                "features": names,
                "models": {"hybrid": model, "full_text": model},
            }
        )
    )
    return path


def _turns(brain: Brain) -> None:
    brain.ingest(
        "s",
        [
            MessageIn("user", "kayak kayak kayak", client_id="short"),
            MessageIn(
                "assistant",
                "we talked about the kayak once, then about lunch, the weather, the "
                "long drive home, the neighbours' dog and everything else under the sun",
                client_id="long",
            ),
        ],
    )


def test_the_ranking_stage_orders_hits_by_the_model_and_rank_false_keeps_bm25(
    fresh_brain: Brain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _turns(fresh_brain)
    bm25 = fresh_brain.grep(GrepOptions("kayak", rank=False), session="s")
    assert [h.id for h in bm25] == ["short", "long"]
    longest = _weights(tmp_path / "w.json", log_length=1.0)
    monkeypatch.setattr(ranking, "load_models", lambda: load_models(longest))
    ranked = fresh_brain.grep(GrepOptions("kayak"), session="s")
    assert [h.id for h in ranked] == ["long", "short"]
    assert ranked[0].score > ranked[1].score
    assert [h.id for h in fresh_brain.grep(GrepOptions("kayak", rank=False), session="s")] == [
        "short",
        "long",
    ]


def test_a_ranked_full_text_hit_always_contains_a_query_word(fresh_brain: Brain) -> None:
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", "what about the kayak?", client_id="q"),
            MessageIn("assistant", "I sold it last spring", client_id="a"),
        ],
    )
    assert [h.id for h in fresh_brain.grep(GrepOptions("kayak"), session="s")] == ["q"]


def test_the_turn_written_on_the_date_the_query_names_ranks_first(fresh_brain: Brain) -> None:
    fresh_brain.ingest(
        "s",
        [
            MessageIn(
                "user", "we went to the lake", client_id="may", created_at="2023-05-08T10:00:00Z"
            ),
            MessageIn(
                "user", "we went to the lake", client_id="june", created_at="2023-06-20T10:00:00Z"
            ),
            MessageIn("user", "see you soon", client_id="end", created_at="2023-07-01T10:00:00Z"),
        ],
    )
    for query, first in (("lake on 20 June 2023", "june"), ("the lake in May 2023", "may")):
        hits = fresh_brain.grep(GrepOptions(query), session="s")
        assert hits[0].id == first, query


def test_the_turn_of_the_speaker_the_query_names_ranks_first(fresh_brain: Brain) -> None:
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", "I adopted a puppy", client_id="c", name="Caroline"),
            MessageIn("assistant", "I adopted a puppy", client_id="m", name="Melanie"),
        ],
    )
    for query, first in (("Did Melanie adopt a puppy?", "m"), ("Caroline puppy", "c")):
        assert fresh_brain.grep(GrepOptions(query), session="s")[0].id == first, query


def test_the_shipped_weights_load_for_both_modes_with_their_provenance() -> None:
    models = load_models()
    assert set(models) == {"hybrid", "full_text"}
    for model in models.values():
        assert len(model.weights) == len(feature_names())
    data = json.loads(ranking.WEIGHTS_PATH.read_text())
    assert data["provenance"]["trained_by"] == "scripts/train_ranker.py"
    assert data["provenance"]["conversations"]


def test_a_weights_file_of_another_version_or_other_features_is_refused(tmp_path: Path) -> None:
    path = _weights(tmp_path / "w.json")
    data = json.loads(path.read_text())
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**data, "version": RANKER_VERSION + 1}))
    with pytest.raises(RankerMismatch, match="version"):
        load_models(old)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**data, "features": data["features"][:-1]}))
    with pytest.raises(RankerMismatch, match="features"):
        load_models(other)


def test_a_turn_naming_the_querys_entity_ranks_above_an_otherwise_equal_one(
    fresh_brain: Brain,
) -> None:
    # Same words for full text (the path is tokenised into etc, nginx, conf) and same
    # length; only the second names the path as one entity (the shipped weights).
    # The first comes first in every other order.
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", "the error is in etc nginx.conf. again", client_id="words"),
            MessageIn("user", "the error is in /etc/nginx.conf again", client_id="path"),
        ],
    )
    query = GrepOptions("why does /etc/nginx.conf fail?")
    assert [h.id for h in fresh_brain.grep(replace(query, rank=False), session="s")] == [
        "words",
        "path",
    ]
    fresh_brain.index_entities()
    assert [h.id for h in fresh_brain.grep(query, session="s")] == ["path", "words"]


def test_a_grep_before_the_entity_index_caught_up_still_answers(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("user", "the error is in /etc/nginx.conf", client_id="a")])
    assert fresh_brain.info().entities_pending == 1
    hits = fresh_brain.grep(GrepOptions("/etc/nginx.conf", mode="hybrid"), session="s")
    assert [h.id for h in hits] == ["a"]


def test_hybrid_ranking_adds_a_turn_reachable_only_through_a_top_hits_rare_entity(
    fresh_brain: Brain,
) -> None:
    filler = [MessageIn("user", f"unrelated chatter number {i}") for i in range(5)]
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", "Caroline met Okonkwo at the support group", client_id="met"),
            *filler,
            MessageIn("user", "Okonkwo moved to Lisbon last spring", client_id="moved"),
            *filler,
        ],
    )
    fresh_brain.index_entities()
    options = GrepOptions("who did Caroline meet at the support group", mode="hybrid")
    conversation = fresh_brain.store.scalar("SELECT id FROM conversations")
    scoped = replace(options, conversations=(int(conversation),), scope="messages")

    def nothing_embedded(k: int) -> list[tuple[str, int, float]]:
        return []  # only full text and its neighbours: "moved" shares no word

    ids = [h.id for h in ranked_search(fresh_brain.store, scoped, nothing_embedded)]
    assert ids[0] == "met"
    assert "moved" in ids
    plain = ranked_search(fresh_brain.store, replace(scoped, mode="full_text"), None)
    assert "moved" not in [h.id for h in plain]  # full_text: every hit holds a query word


def test_a_statement_ranks_above_the_same_words_asked_as_a_question(fresh_brain: Brain) -> None:
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", "so you adopted a puppy?", client_id="asked"),
            MessageIn("assistant", "so we adopted a puppy.", client_id="said"),
        ],
    )
    query = GrepOptions("adopted puppy")
    assert fresh_brain.grep(replace(query, rank=False), session="s")[0].id == "asked"
    assert [h.id for h in fresh_brain.grep(query, session="s")] == ["said", "asked"]


def test_every_hybrid_candidate_carries_its_own_rows_name_length_and_question_mark(
    fresh_brain: Brain,
) -> None:
    # Neighbours and second-hop turns bring these from the rows their own reads
    # found; the others are read by (session, seq): each must be the turn's own.
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", "did Okonkwo take the kayak?", client_id="q", name="Ada"),
            MessageIn("assistant", "yes, the red kayak", client_id="a", name="Bo"),
            MessageIn("user", "Okonkwo moved to Lisbon", client_id="m"),
            MessageIn("user", "what about the weather?\x00!", client_id="nul", name="Ada"),
            MessageIn("assistant", "kayak weather, windy", client_id="w"),
        ],
    )
    fresh_brain.index_entities()
    conversation = int(fresh_brain.store.scalar("SELECT id FROM conversations"))
    options = GrepOptions("kayak weather", mode="hybrid", conversations=(conversation,))

    def nothing_embedded(k: int) -> list[tuple[str, int, float]]:
        return []

    pool = ranking.candidates(fresh_brain.store, options, nothing_embedded)
    assert len(pool.hits) == 5  # two matches, their neighbours, the second hop's turn
    for i, hit in enumerate(pool.hits):
        row_id, name, chars, asks = fresh_brain.store.one(
            "SELECT id, name, length(content), instr(content, '?') > 0 FROM messages "
            "WHERE client_id = ?",
            (hit.id,),
        )
        assert (int(pool.row_ids[i]), pool.names[i]) == (row_id, name)
        assert (pool.length[i], pool.asks[i]) == (chars, asks)
