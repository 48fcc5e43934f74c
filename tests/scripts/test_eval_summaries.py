"""scripts/eval_summaries.py: answer scoring, coverage, compression, and a tiny run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import ROOT
from tests.scripts import load_script

SCRIPT = ROOT / "scripts" / "eval_summaries.py"


ev = load_script("eval_summaries")

FILLER = [
    "Haha, that's great, I really love hearing about your week, it sounds lovely!",
    "Wow, so cool, thanks for telling me all about it, I'm so happy for you!",
    "Thanks, you too, it was really nice chatting with you again today!",
    "Totally agree, that sounds like a wonderful way to spend the afternoon!",
]


def _sample() -> dict[str, Any]:
    turns = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I went to the support group yesterday."},
        {"speaker": "Bob", "dia_id": "D1:2", "text": "We adopted a puppy named Rex from Oakland."},
    ]
    for i in range(3, 81):
        speaker = "Ann" if i % 2 else "Bob"
        turns.append({"speaker": speaker, "dia_id": f"D1:{i}", "text": FILLER[i % len(FILLER)]})
    turns[-1]["text"] = "My sister Lena moved to Lisbon in March."
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
        "qa": [
            {
                "question": "When did Ann go to the support group?",
                "answer": "7 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "What did Bob adopt?",
                "answer": "a puppy named Rex",
                "evidence": ["D1:02"],
                "category": 4,
            },
            {"question": "Where?", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
            {"question": "Where did Lena move?", "answer": 1, "evidence": ["D1:80"], "category": 4},
            {"question": "Missing", "answer": "y", "evidence": ["D9:9"], "category": 1},
        ],
    }


def test_answer_words_are_lowercased_stemmed_and_without_stop_words() -> None:
    assert ev.answer_terms("The puppies were adopted in May") == {"puppy", "adopt", "may"}
    assert ev.stem("running") == "run"
    assert ev.stem("painted") == "paint"
    assert ev.answer_terms("Yes") == set()


def test_an_answer_share_counts_its_content_words_found() -> None:
    assert ev.answer_share("a puppy named Rex", "Bob: adopted puppies, one named Rex") == 1.0
    assert ev.answer_share("7 May 2023", "[2023-05-08 13:56] went yesterday") == 1 / 3
    assert ev.answer_share("Yes", "anything") is None


def test_questions_keep_their_answer_and_only_evidence_that_exists() -> None:
    questions = ev.answered_questions([_sample()])
    assert [(q.question, q.answer, q.evidence) for q in questions] == [
        ("When did Ann go to the support group?", "7 May 2023", ("D1:1",)),
        ("What did Bob adopt?", "a puppy named Rex", ("D1:2",)),
        ("Where did Lena move?", "1", ("D1:80",)),
    ]


def test_a_question_is_scored_against_the_summaries_covering_all_its_evidence() -> None:
    q = ev.AnsweredQuestion("c", "q", "puppy Rex", "4", ("D1:1", "D1:5"))
    a = ev.SummaryView("sum_a", 0, "adopted a puppy", 10, 100, frozenset({"D1:1", "D1:2"}))
    b = ev.SummaryView("sum_b", 0, "named Rex", 10, 100, frozenset({"D1:5"}))
    rows, uncovered = ev.score_level([q], {"c": [a, b]})
    assert [share for _, share in rows] == [1.0]
    assert uncovered == 0
    rows, uncovered = ev.score_level([q], {"c": [a]})
    assert rows == []
    assert uncovered == 1


def test_figures_are_percent_per_category_and_compression_is_tokens_over_source() -> None:
    q2 = ev.AnsweredQuestion("c", "q", "a", "2", ("D1:1",))
    q4 = ev.AnsweredQuestion("c", "q", "a", "4", ("D1:1",))
    out = ev.figures([(q2, 1.0), (q4, 0.5), (q4, 0.0)])
    assert out["fact_recall"] == 50.0
    assert out["full_answer"] == 33.3
    assert out["by_category"]["2 temporal"] == {
        "fact_recall": 100.0,
        "full_answer": 100.0,
        "questions": 1,
    }
    assert out["by_category"]["4 single-hop"]["fact_recall"] == 25.0
    views = [
        ev.SummaryView("a", 0, "", 10, 100, frozenset()),
        ev.SummaryView("b", 0, "", 30, 100, frozenset()),
    ]
    assert ev.compression(views) == 0.2


def test_end_to_end_through_the_daemon(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text(json.dumps([_sample()]))
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(data),
            "--json",
            "--summarizers",
            "default,extractive_v1,truncation,random",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=300,
    )
    result = json.loads(out.stdout)
    assert set(result) == {"default", "extractive_v1", "truncation", "random"}
    for figures in result.values():
        assert figures["questions"]["leaf_scored"] == 2  # D1:80 is in the fresh tail
        assert figures["questions"]["leaf_uncovered"] == 1
        assert figures["summaries"]["leaf"] >= 1
        assert 0 < figures["compression_leaf"] < 1
        for key in ("leaf_fact_recall", "leaf_full_answer", "condensed_fact_recall"):
            assert 0 <= figures[key] <= 100
    default, v1 = result["default"], result["extractive_v1"]
    # "yesterday", said on 8 May 2023, is kept as the date it meant.
    assert default["by_category"]["2 temporal"]["fact_recall"] == 100.0
    assert v1["by_category"]["2 temporal"]["fact_recall"] < 100.0
    assert default["by_category"]["4 single-hop"]["fact_recall"] == 100.0
    assert "extractive_v1" in out.stderr


def test_an_unknown_summarizer_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text("[]")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(data), "--summarizers", "gpt"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 2
    assert "unknown summarizers: gpt" in out.stderr


def test_misses_name_the_answer_words_the_evidence_had_and_the_leaves_lost() -> None:
    question = ev.AnsweredQuestion("s", "What did Bob adopt?", "a puppy named Rex", "4", ("D1:2",))
    leaf = ev.SummaryView("a", 0, "Bob: adopted puppy", 3, 30, frozenset({"D1:1", "D1:2"}))
    turns = {"s": {"D1:2": "We adopted a puppy named Rex from Oakland."}}
    [miss] = ev.missed([question], {"s": [leaf]}, turns)
    assert miss["lost"] == ["nam", "rex"]
    assert miss["evidence"] == ["We adopted a puppy named Rex from Oakland."]
    assert miss["leaves"] == ["Bob: adopted puppy"]
    # Words the evidence never said are no miss of the summarizer's.
    vague = ev.AnsweredQuestion("s", "Who?", "his dog Rex", "4", ("D1:2",))
    assert [m["lost"] for m in ev.missed([vague], {"s": [leaf]}, turns)] == [["rex"]]


def test_conversations_and_misses_limit_and_explain_a_run(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    other = {**_sample(), "sample_id": "conv-y"}
    other["conversation"]["session_1"][39]["text"] = "Our cat Miso only eats tuna from Lisbon."
    other["qa"] = [*other["qa"], {"question": "Food?", "answer": "tuna", "evidence": ["D1:40"]}]
    data.write_text(json.dumps([_sample(), other]))
    misses = tmp_path / "misses.jsonl"
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(data),
            "--json",
            "--summarizers",
            "truncation",
            "--conversations",
            "1",
            "--misses",
            str(misses),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=300,
    )
    result = json.loads(out.stdout)["truncation"]
    assert result["questions"]["leaf_scored"] == 3  # conv-y's three, not conv-x's too
    rows = [json.loads(line) for line in misses.read_text().splitlines()]
    # Truncation keeps the start of the chunk: turn 40's answer is lost.
    assert [(r["summarizer"], r["sample"], r["answer"], r["lost"]) for r in rows] == [
        ("truncation", "conv-y", "tuna", ["tuna"])
    ]


def test_a_conversation_index_out_of_range_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text(json.dumps([_sample()]))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(data), "--conversations", "3"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 2
    assert "--conversations: indices 0 to 0" in out.stderr
