"""brain.recall.search.ranking: the learned stage reorders full_text and hybrid hits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain import Brain, MessageIn
from brain.recall.search import GrepOptions, ranking
from brain.recall.search.ranking import FEATURES, RANKER_VERSION, RankerMismatch, load_models


def _weights(path: Path, **by_feature: float) -> Path:
    """A weights file whose models weigh only the features named (unit scale, zero mean)."""
    names = [name for name, _ in FEATURES]
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
        assert len(model.weights) == len(FEATURES)
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
