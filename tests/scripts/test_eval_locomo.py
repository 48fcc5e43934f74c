"""scripts/eval_locomo.py: date parsing, evidence handling, scoring, and one tiny end-to-end run."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from tests import ROOT
from tests.scripts import load_script

SCRIPT = ROOT / "scripts" / "eval_locomo.py"


ev = load_script("eval_locomo")


def _sample() -> dict[str, object]:
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
                {
                    "speaker": "Bob",
                    "dia_id": "D1:2",
                    "text": "Look at my garden!",
                    "blip_caption": "a photo of red tulips",
                },
            ],
            "session_2_date_time": "10:04 am on 1 June, 2023",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "Rex chewed my violin."},
            ],
            "session_3_date_time": "9:00 am on 2 June, 2023",
        },
        "qa": [
            {"question": "What is the puppy called?", "evidence": ["D1:1"], "category": 4},
            {"question": "What flowers?", "evidence": ["D1:02"], "category": 1},
            {"question": "Where?", "evidence": ["D1:1; D2:1"], "category": 2},
            {"question": "Missing", "evidence": ["D9:9"], "category": 5, "answer": 1},
        ],
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("12:30 pm on 1 Jan, 2024", datetime(2024, 1, 1, 12, 30)),
        ("nonsense", None),
        ("1:56 pm on 31 February, 2023", None),
    ],
)
def test_parse_date(text: str, expected: datetime | None) -> None:
    assert ev.parse_locomo_date(text) == expected


def test_messages_carry_id_name_date_and_caption() -> None:
    messages, bad = ev.messages_of(_sample())
    assert bad == 0
    assert [m["id"] for m in messages] == ["D1:1", "D1:2", "D2:1"]
    assert messages[0]["name"] == "Ann"
    assert messages[0]["created_at"] == "2023-05-08T13:56:00Z"
    assert messages[1]["created_at"] == "2023-05-08T13:56:01Z"
    assert messages[1]["content"].endswith("[image: a photo of red tulips]")


def test_malformed_and_missing_evidence() -> None:
    data = ev.questions_of([_sample()])
    assert [q.evidence for q in data.questions] == [("D1:1",), ("D1:2",), ("D1:1", "D2:1")]
    assert data.skipped_questions == 1
    assert data.skipped_evidence_ids == 1
    assert data.malformed_evidence_fields == 1  # "D1:1; D2:1" (split); "D1:02" is normalised


def test_scoring() -> None:
    s = ev.score_question(["D3:1", "D1:1", "D2:4"], ["D1:1", "D2:1"])
    assert s["recall@5"] == 0.5
    assert s["recall_all@5"] == 0.0
    assert s["mrr"] == 0.5
    assert s["session_recall@5"] == 1.0


def test_a_named_fusion_is_measured_without_the_ranking_stage_that_would_replace_its_order() -> (
    None
):
    q = ev.Question("conv-x", "where did Ann go?", "4", ("D1:1",))
    rrf = ev.grep_params("hybrid:rrf", q)
    assert (rrf["mode"], rrf["fusion"], rrf["rank"]) == ("hybrid", "rrf", False)
    assert ev.grep_params("hybrid:norank", q)["rank"] is False
    assert "fusion" not in ev.grep_params("hybrid:norank", q)
    ranked = ev.grep_params("hybrid", q)
    assert "rank" not in ranked  # the daemon's default: ranked
    assert (ranked["session"], ranked["scope"]) == ("conv-x", "messages")


def test_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text(json.dumps([_sample()]))
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(data),
            "--json",
            "--modes",
            "full_text,semantic,hybrid:weighted,vector",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
    )
    result = json.loads(out.stdout)
    assert "error" in result["vector"]  # a mode the daemon refuses
    assert result["semantic"]["questions"] == 3  # embedded before the questions ran
    assert result["hybrid:weighted"]["questions"] == 3
    ft = result["full_text"]
    assert ft["questions"] == 3
    assert ft["by_category"]["4"]["recall@5"] == 100.0
    assert set(ft["by_category"]) == {"1", "2", "4", "all_but_5"}
    assert "full_text" in out.stderr


def test_the_turn_file_has_one_section_per_turn_under_its_session_and_maps_its_heading_lines() -> (
    None
):
    turns = ev.turn_file(_sample())
    lines = turns.text.split("\n")
    assert sorted(turns.dia_at_line.values()) == ["D1:1", "D1:2", "D2:1"]
    for line_no, dia in turns.dia_at_line.items():
        assert lines[line_no - 1] == f"### {dia}"
    sessions = [line for line in lines if line.startswith("## ")]
    assert len(sessions) == 2
    assert all(s.startswith("## Session ") for s in sessions)
    assert "Bob: Look at my garden! [image: a photo of red tulips]" in lines


def test_graph_modes_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text(json.dumps([_sample()]))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(data), "--json", "--modes", "query,query_learned"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
    )
    result = json.loads(out.stdout)
    assert result["query"]["questions"] == 2  # the 1st and 3rd scored questions
    assert result["query"]["by_category"]["4"]["recall@5"] == 100.0
    assert result["hybrid@graph_questions"]["questions"] == 2  # the same questions
    replay = result["query_learned"]["replay"]
    assert replay["replayed"] == 1
    assert result["query_learned"]["questions"] == 2
