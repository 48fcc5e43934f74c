"""scripts/bench.py --only host: the evidence scoring, and one tiny real run through the
daemon whose JSON has every part's figures (no timing is asserted)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from tests.scripts import bench_module, load_script

bench = load_script("bench")
host = bench_module("host")

SERIES = (
    "assembles",
    "dropped_messages_assembles",
    "dropped_summaries_assembles",
    "dropped_messages_max",
    "assemble_p50_ms",
    "assemble_p95_ms",
    "assemble_max_ms",
    "used_share_median",
    "used_share_min",
)


def _locomo(path: Path) -> Path:
    """A LoCoMo-shaped file: two conversations of 50 turns, questions of every category."""
    samples = []
    for n in range(2):
        turns = [
            {
                "speaker": "Ann" if i % 2 == 0 else "Bo",
                "dia_id": f"D1:{i + 1}",
                "text": f"Turn {i} of talk {n}: we planted {i} tulips near the blue shed.",
            }
            for i in range(50)
        ]
        qa = [
            {"question": "How many?", "answer": "7 tulips", "evidence": ["D1:8"], "category": 4},
            {"question": "When?", "answer": 2023, "evidence": ["D1:2; D1:3"], "category": 2},
            {"question": "Who?", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
            {"question": "Gone?", "answer": "no", "evidence": ["D9:99"], "category": 1},
        ]
        samples.append(
            {
                "sample_id": f"conv-{n}",
                "conversation": {
                    "speaker_a": "Ann",
                    "speaker_b": "Bo",
                    "session_1_date_time": "1:56 pm on 8 May, 2023",
                    "session_1": turns,
                },
                "qa": qa,
            }
        )
    path.write_text(json.dumps(samples))
    return path


def test_a_question_counts_when_its_evidence_words_are_in_the_context() -> None:
    qa = {"answer": "Blue Shed", "evidence": ["We painted the blue shed on Sunday."]}
    context = host.normalised("Ann: we painted the BLUE shed on   sunday. Later: tea.")

    full = host.score_question(qa, context, host.content_words(context))
    partial = host.score_question(qa, "tea", host.content_words("painted the shed"))

    assert full == {
        "answer_verbatim": 1.0,
        "evidence_raw": 1.0,
        "evidence_word_share": 1.0,
        "evidence_words_present": 1.0,
    }
    assert partial["evidence_word_share"] == 0.5  # painted, shed of: painted, blue, shed, sunday
    assert partial["evidence_words_present"] == 0.0
    assert partial["answer_verbatim"] == partial["evidence_raw"] == 0.0


def test_every_numeric_member_of_an_assemble_result_is_a_field_whatever_its_name() -> None:
    result = {
        "messages": [{"role": "user", "content": "hi"}],
        "budget": 4000,
        "tokens": 12,
        "over_budget": False,
        "dropped": {"messages": 3, "summaries": 0},
        "gap": {"standins": 2},
        "system": "x",
    }

    assert host.numeric_fields(result) == {
        "tokens": 12.0,
        "over_budget": 0.0,
        "dropped.messages": 3.0,
        "dropped.summaries": 0.0,
        "gap.standins": 2.0,
    }


def test_a_tiny_host_run_reports_every_part_in_one_json_object(tmp_path: Path) -> None:
    data = _locomo(tmp_path / "locomo.json")
    out = io.StringIO()
    with redirect_stdout(out):
        code = bench.main(
            ["--json", "--only", "host", "--size", "0.05", "--runs", "1", "--locomo", str(data)]
        )
    report: dict[str, Any] = json.loads(out.getvalue())
    entry = report["host"]

    assert code == 0, entry.get("error")
    for part in ("loop_openai", "loop_anthropic", "coding", "coding_openai"):
        for figure in SERIES:
            assert isinstance(entry[part][figure], float | int), (part, figure)
        assert entry[part]["fields"]["dropped"]["messages"]["nonzero"] >= 0
        assert entry[part]["fields"]["tokens"]["max"] > 0
    assert entry["loop_openai"]["assembles"] == entry["loop_openai"]["turns"] == 6
    assert entry["coding"]["assembles"] > entry["coding"]["turns"]
    for budget in (4000, 6000):
        part = entry[f"import_{budget}"]
        assert part["messages"] == 30
        assert part["first"]["tokens"] > 0
        assert "used_share" in part["settled"]
    replay = entry["replay"]
    assert replay["turns"] == 40
    assert replay["final"]["shown"]["raw"] > 0
    assert replay["final"]["shown"]["summary"] >= 0
    assert replay["answers"]["sampled"] <= 30
    assert "unpaused" in entry["replay_checkpoints"]
    evidence = entry["evidence"]
    assert evidence["conversations_replayed"] == 1
    # category 5 is skipped, and so is a question whose evidence is not in the conversation
    assert evidence["all"]["questions"] == 2
    assert set(evidence) >= {"category_2", "category_4"}
    assert "category_5" not in evidence
    assert "category_1" not in evidence
    for figure in ("evidence_words_present", "evidence_raw", "evidence_word_share"):
        assert 0 <= evidence["all"][figure] <= 1, figure
    assert 0 <= evidence["control_turn_word_share"] <= 1
    assert set(entry["part_s"]) == {
        "loop_openai",
        "loop_anthropic",
        "coding",
        "coding_openai",
        "import",
        "replay",
        "evidence",
    }
