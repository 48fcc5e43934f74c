"""Suppression hides messages and summaries from every agent-facing path; nothing is lost."""

from __future__ import annotations

import pytest

from brain import AssembleOptions, Brain, BrainConfig, CompactionConfig, MessageIn, NotFound
from brain.search import GrepOptions


def _turns(n: int, secret_at: int) -> list[MessageIn]:
    out = []
    for i in range(n):
        text = f"routine status update number {i} about the build pipeline and its caches"
        if i == secret_at:
            text = "the root password is hunter2 please remember it"
        out.append(MessageIn("user" if i % 2 == 0 else "assistant", text, client_id=f"m{i}"))
    return out


def _small(path: object) -> Brain:
    compaction = CompactionConfig(
        auto=False, fresh_tail_count=4, leaf_chunk_tokens=200, threshold_tokens=200,
        leaf_target_tokens=60, condensed_target_tokens=80, leaf_fanout=3, condensed_fanout=2,
    )  # fmt: skip
    return Brain(path, BrainConfig(compaction=compaction))  # type: ignore[arg-type]


def _assembled_text(brain: Brain) -> str:
    result = brain.assemble("s", AssembleOptions(budget=100_000))
    return "\n".join(str(m.get("content")) for m in result.messages)


def test_a_suppressed_message_leaves_grep_and_assemble_and_comes_back_unchanged(
    fresh_brain: Brain,
) -> None:
    fresh_brain.ingest("s", _turns(10, secret_at=3))
    assert "hunter2" in _assembled_text(fresh_brain)
    result = fresh_brain.suppress(["m3"], session="s")
    assert result.changed == ("m3",)
    assert fresh_brain.grep(GrepOptions("hunter2"), session="s") == []
    assert fresh_brain.grep(GrepOptions("hunter2", mode="regex"), session="s") == []
    assert "hunter2" not in _assembled_text(fresh_brain)
    with pytest.raises(NotFound):
        fresh_brain.describe("m3", session="s")
    shown = fresh_brain.describe("m3", session="s", include_suppressed=True)
    assert shown["suppressed"] is True
    assert "hunter2" in shown["message"]["content"]

    assert fresh_brain.suppress(["m3"], session="s", suppressed=False).changed == ("m3",)
    assert [h.id for h in fresh_brain.grep(GrepOptions("hunter2"), session="s")] == ["m3"]
    assert "hunter2" in _assembled_text(fresh_brain)
    assert fresh_brain.info().messages == 10


def test_suppressed_text_never_reaches_a_summary_and_expand_skips_it(tmp_path: object) -> None:
    brain = _small(tmp_path / "s.db")  # type: ignore[operator]
    try:
        brain.ingest("s", _turns(40, secret_at=2))
        brain.suppress(["m2"], session="s")
        report = brain.compact("s")
        assert report.summaries
        contents = [str(r[0]) for r in brain.store.execute("SELECT content FROM summaries")]
        assert not any("hunter2" in c for c in contents)
        for summary_id in report.summaries:
            expanded = brain.expand(summary_id, session="s", max_tokens=100_000)
            assert "m2" not in expanded["reached"]
            assert all("hunter2" not in str(i.get("content")) for i in expanded["items"])
    finally:
        brain.close()


def test_a_suppressed_summary_disappears_from_assemble_grep_and_describe(tmp_path: object) -> None:
    brain = _small(tmp_path / "t.db")  # type: ignore[operator]
    try:
        brain.ingest("s", _turns(40, secret_at=99))
        assert brain.compact("s").summaries
        summary_id = str(
            brain.store.scalar(
                "SELECT s.summary_id FROM context_items c JOIN summaries s "
                "ON s.id = c.summary_id ORDER BY c.pos LIMIT 1"
            )
        )
        shown = f'<summary id="{summary_id}"'
        assert shown in _assembled_text(brain)
        brain.suppress([summary_id], session="s")
        assert shown not in _assembled_text(brain)
        hits = brain.grep(GrepOptions("pipeline", scope="summaries"), session="s")
        assert summary_id not in {h.id for h in hits}
        with pytest.raises(NotFound):
            brain.describe(summary_id, session="s")
        assert brain.describe(summary_id, session="s", include_suppressed=True)["id"] == summary_id
    finally:
        brain.close()


def test_ids_outside_the_session_are_not_found_and_change_nothing(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", _turns(4, secret_at=1))
    fresh_brain.ingest("other", [MessageIn("user", "hello", client_id="o1")])
    result = fresh_brain.suppress(["o1", "nope", "m1"], session="s")
    assert result.changed == ("m1",)
    assert result.not_found == ("o1", "nope")
    assert fresh_brain.grep(GrepOptions("hello"), session="other")[0].id == "o1"
    assert fresh_brain.suppress(["m1"], session="s").unchanged == ("m1",)
