"""Where a graph query starts: seeds ranked by keywords and vectors fused (brain.graph.seeding)."""

from __future__ import annotations

from pathlib import Path

from brain import Brain
from brain.graph.nodes import NewNode
from brain.graph.traverse import TraverseOptions

QUERY = "When did the kestrel migration finish?"
FAR = (
    "Parking permits, printer toner, laptop invoices, hiring plans, the budget review, "
    "lunch orders, weather alerts, badge renewals, desk moves and the kestrel cutover "
    "wrapped up on Tuesday afternoon after the quarterly offsite planning session"
)
"""Matches the query's keyword ``kestrel`` but shares little else with it."""
NEAR = [
    "When did the team do it and when did they say so?",
    "When did the thing happen, and did the others know when?",
    "Did the crew say when the work would be done?",
    "When did the people do what they did?",
]
"""Close to the query by words it is mostly made of, but with none of its keywords."""


def test_a_node_matching_the_querys_keywords_is_seeded_though_far_in_vector_space(
    fresh_brain: Brain,
) -> None:
    far = fresh_brain.teach(NewNode("teaching", FAR)).node_id
    for text in NEAR:
        fresh_brain.teach(NewNode("teaching", text))
    result = fresh_brain.query(QUERY, options=TraverseOptions(top_k=2), record=False)
    assert far in [node for node, _ in result.seeds]
    assert result.fired[0].id == far


def test_a_node_rewritten_or_deleted_is_found_by_its_current_words_only(
    fresh_brain: Brain,
) -> None:
    node = fresh_brain.teach(NewNode("teaching", FAR)).node_id
    store = fresh_brain.store

    def matching(word: str) -> int:
        return len(
            list(store.execute("SELECT rowid FROM nodes_fts WHERE nodes_fts MATCH ?", (word,)))
        )

    assert matching("kestrel") == 1
    with store.transaction():
        store.execute(
            "UPDATE nodes SET content = 'the osprey cluster moved' WHERE node_id = ?", (node,)
        )
    assert (matching("osprey"), matching("kestrel")) == (1, 0)
    with store.transaction():
        store.execute("DELETE FROM nodes WHERE node_id = ?", (node,))
    assert matching("osprey") == 0


def test_in_a_large_graph_a_query_of_common_words_and_one_rare_word_seeds_the_rare_match(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    # Over 2,000 nodes, "weekly" and "report" (in every node) are left out of the
    # keyword search (brain.graph.seeding.FREQUENT_SHARE); "kestrel" still finds its node.
    notes = tmp_path / "workspace" / "memory"
    notes.mkdir(parents=True)
    sections = [
        f"## Note {i}\n\nThe weekly report number {i} lists nothing new.\n" for i in range(2_100)
    ]
    sections[1_234] = "## Note 1234\n\nThe weekly report says kestrel moved to Frankfurt.\n"
    (notes / "notes.md").write_text("# Notes\n\n" + "\n".join(sections))
    fresh_brain.sync(tmp_path / "workspace")
    assert fresh_brain.info().nodes > 2_000
    result = fresh_brain.query(
        "weekly report kestrel", options=TraverseOptions(top_k=3), record=False
    )
    assert "kestrel" in result.fired[0].text


def test_in_a_large_graph_a_common_word_is_left_out_by_its_stem_when_it_is_written_otherwise(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    # "deploys" is indexed as "deploi": looked up as written it was not found, kept,
    # and the keyword search scored every node it matched.
    from brain.graph.seeding import _thinned

    notes = tmp_path / "workspace" / "memory"
    notes.mkdir(parents=True)
    sections = [f"## Note {i}\n\nThe deploys of week {i} went fine.\n" for i in range(2_100)]
    sections[7] = "## Note 7\n\nThe deploys moved to kestrel.\n"
    (notes / "notes.md").write_text("# Notes\n\n" + "\n".join(sections))
    fresh_brain.sync(tmp_path / "workspace", embed=False)
    nodes = fresh_brain.info().nodes
    assert nodes > 2_000
    store = fresh_brain.store
    assert _thinned(store, '"deploys" OR "kestrel"', nodes) == '"kestrel"'
