"""Warming the graph: a daemon loads the mirror and the graph's vectors after its first
answer, so a first query that comes later loads neither."""

from __future__ import annotations

from pathlib import Path

from brain import Brain, NewNode
from brain.vectors.embedders import HashEmbedder
from tests.brain.graph.maintain.helpers import count_loads


def test_a_warmed_graph_answers_its_first_query_without_loading_the_mirror_or_vectors(
    db_path: Path,
) -> None:
    brain = Brain(db_path, embedder=HashEmbedder())
    for text in ("deploys go out on tuesdays", "the staging database is read only"):
        brain.teach(NewNode("teaching", text))
    brain.close()
    brain = Brain(db_path, embedder=HashEmbedder())
    try:
        assert brain.warm_graph()
        loads = count_loads(brain._graph.mirror)
        index = brain._vectors.indexes(brain.embedder)[1]
        epoch, rows = index._epoch, index._base
        assert epoch is not None  # the node vectors are loaded

        result = brain.query("when do deploys go out")

        assert result.fired
        assert loads == []
        assert (index._epoch, index._base) == (epoch, rows)  # nothing read again
    finally:
        brain.close()


def test_warming_a_database_without_a_graph_loads_nothing(db_path: Path) -> None:
    brain = Brain(db_path, embedder=HashEmbedder())
    try:
        assert not brain.warm_graph()
        assert brain._graph._built is None  # no mirror made
    finally:
        brain.close()
