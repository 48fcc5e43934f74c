"""Suppression hides messages and summaries from every agent-facing path; nothing is lost."""

from __future__ import annotations

import tempfile
import threading
from dataclasses import replace
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import AssembleOptions, Brain, BrainConfig, CompactionConfig, MessageIn, NotFound
from brain.lcm.summarize import SummaryRequest
from brain.recall.search import GrepOptions
from tests.brain.lcm.helpers import SMALL_BRAIN


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


def _assembled_text(brain: Brain, *, detail: bool = True) -> str:
    result = brain.assemble("s", AssembleOptions(budget=100_000, detail=detail))
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
        assert shown in _assembled_text(brain, detail=False)
        brain.suppress([summary_id], session="s")
        assert shown not in _assembled_text(brain, detail=False)
        assert shown not in _assembled_text(brain)
        hits = brain.grep(GrepOptions("pipeline", scope="summaries"), session="s")
        assert summary_id not in {h.id for h in hits}
        with pytest.raises(NotFound):
            brain.describe(summary_id, session="s")
        assert brain.describe(summary_id, session="s", include_suppressed=True)["id"] == summary_id
    finally:
        brain.close()


def test_an_unscoped_semantic_grep_whose_nearest_are_suppressed_fills_its_limit_with_the_next(
    fresh_brain: Brain,
) -> None:
    # The nearest ``limit`` rows are read first and the over-fetch only when some
    # are filtered out: suppressing the best three must bring the next three.
    fresh_brain.ingest("s", _turns(10, secret_at=-1))
    fresh_brain.embed_pending(100)
    options = GrepOptions("status update build pipeline", mode="semantic", limit=3)
    ranked = [h.id for h in fresh_brain.grep(replace(options, limit=6))]
    assert [h.id for h in fresh_brain.grep(options)] == ranked[:3]
    assert sorted(fresh_brain.suppress(ranked[:3], session="s").changed) == sorted(ranked[:3])
    assert [h.id for h in fresh_brain.grep(options)] == ranked[3:]


def test_ids_outside_the_session_are_not_found_and_change_nothing(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", _turns(4, secret_at=1))
    fresh_brain.ingest("other", [MessageIn("user", "hello", client_id="o1")])
    result = fresh_brain.suppress(["o1", "nope", "m1"], session="s")
    assert result.changed == ("m1",)
    assert result.not_found == ("o1", "nope")
    assert fresh_brain.grep(GrepOptions("hello"), session="other")[0].id == "o1"
    assert fresh_brain.suppress(["m1"], session="s").unchanged == ("m1",)


# -- summaries that hold suppressed text ----------------------------------------------

SECRET = "deploy key QX7ZEBRA4471"


def _secret_turns(n: int, secret_at: int) -> list[MessageIn]:
    out = _turns(n, secret_at=-1)
    out[secret_at] = MessageIn("user", f"the {SECRET} opens production", client_id=f"m{secret_at}")
    return out


def _everything_agents_see(brain: Brain, session: str = "s") -> str:
    """Every agent-facing output that could carry a summary's or message's text."""
    brain.embed_pending(10_000)
    seen: list[str] = [_assembled_text(brain)]
    for mode in ("full_text", "regex", "semantic", "hybrid"):
        for query in ("QX7ZEBRA4471", "deploy key production"):
            pattern = "QX7ZEBRA" if mode == "regex" else query
            hits = brain.grep(GrepOptions(pattern, mode=mode, limit=100), session=session)  # type: ignore[arg-type]
            for hit in hits:
                seen.append(hit.snippet)
                if hit.kind == "summary":
                    seen.append(str(brain.describe(hit.id, session=session)))
                    seen.append(str(brain.expand(hit.id, session=session, max_tokens=100_000)))
    seen.append(
        str(brain.expand_query("deploy key", session=session, query="deploy key QX7ZEBRA4471"))
    )
    seen.append(str(brain.query("deploy key production", session=session, record=False)))
    return "\n".join(seen)


def _context_summaries(brain: Brain) -> list[str]:
    return [
        str(r[0])
        for r in brain.store.execute(
            "SELECT s.summary_id FROM context_items c JOIN summaries s ON s.id = c.summary_id "
            "ORDER BY c.pos"
        )
    ]


class _Gate:
    """A summarizer that holds its first call until the test opens the gate, then
    summarises by keeping the head of every item (so fed text shows up), within the
    target size (or escalation would pick another summarizer)."""

    name = "gate"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    def summarize(self, request: SummaryRequest) -> str:
        if not self.entered.is_set():
            self.entered.set()
            assert self.open.wait(30)
        return "; ".join(i.text[:40] for i in request.items)[: request.target_tokens * 3]


def test_a_message_suppressed_while_compaction_summarises_it_never_reaches_a_visible_summary(
    tmp_path: Path,
) -> None:
    gate = _Gate()
    brain = Brain(tmp_path / "race.db", SMALL_BRAIN, summarizer=gate)
    try:
        brain.ingest("s", _secret_turns(40, secret_at=2))
        compacting = threading.Thread(target=brain.compact, args=("s",))
        compacting.start()
        assert gate.entered.wait(30)  # the chunk holding m2 is being summarised now
        assert brain.suppress(["m2"], session="s").changed == ("m2",)
        gate.open.set()
        compacting.join(30)
        assert not compacting.is_alive()
        assert _context_summaries(brain)  # compaction went on
        assert "QX7ZEBRA4471" not in _everything_agents_see(brain)
        visible = brain.store.execute(
            "SELECT content FROM summaries WHERE suppressed_at IS NULL AND hidden_by IS NULL"
        ).fetchall()
        assert visible
        assert not any("QX7ZEBRA4471" in str(r[0]) for r in visible)
    finally:
        gate.open.set()
        brain.close()


def test_summaries_made_before_a_suppression_are_withheld_at_once_rebuilt_and_restored(
    small: Brain,
) -> None:
    small.ingest("s", _secret_turns(40, secret_at=2))
    assert small.compact("s").summaries
    before_context = _context_summaries(small)
    before_assembled = _assembled_text(small)
    before_rows = small.store.execute("SELECT id, summary_id, content FROM summaries").fetchall()
    assert "QX7ZEBRA4471" in _everything_agents_see(small)  # a summary holds it

    result = small.suppress(["m2"], session="s")
    assert "QX7ZEBRA4471" not in _everything_agents_see(small)
    assert result.rebuild == ("s",)
    assert 'withheld="true"' in _assembled_text(small)  # the span is marked, not dropped
    withheld = [
        str(r[0])
        for r in small.store.execute("SELECT summary_id FROM summaries WHERE hidden_by = 'source'")
    ]
    assert withheld
    for summary_id in withheld:
        with pytest.raises(NotFound):
            small.describe(summary_id, session="s")
        with pytest.raises(NotFound):
            small.expand(summary_id, session="s")

    report = small.rebuild_withheld("s")
    assert report.rebuilt >= 1
    rebuilt = _everything_agents_see(small)
    assert "QX7ZEBRA4471" not in rebuilt
    assembled = _assembled_text(small)
    assert 'withheld="true"' not in assembled
    assert "routine status update number 3" in rebuilt  # the remaining sources are summarised
    replacement = _context_summaries(small)[0]
    assert small.describe(replacement, session="s")["replaces"] == before_context[0]

    assert small.suppress(["m2"], session="s", suppressed=False).changed == ("m2",)
    assert _context_summaries(small) == before_context
    assert _assembled_text(small) == before_assembled
    assert "QX7ZEBRA4471" in _everything_agents_see(small)
    # Lossless: every summary row is still there, unchanged; only replacements were added.
    after_rows = small.store.execute("SELECT id, summary_id, content FROM summaries").fetchall()
    assert after_rows[: len(before_rows)] == before_rows
    assert small.info().messages == 40
    assert small.store.scalar("SELECT count(*) FROM summaries WHERE hidden_by = 'replaced'") >= 1


def test_a_compaction_rebuilds_withheld_summaries_before_folding_more(small: Brain) -> None:
    small.ingest("s", _secret_turns(40, secret_at=2))
    small.compact("s")
    small.suppress(["m2"], session="s")
    more = _turns(20, secret_at=-1)
    small.ingest(
        "s", [MessageIn(m.role, m.content, client_id=f"more{i}") for i, m in enumerate(more)]
    )
    report = small.compact("s")
    assert report.rebuilt >= 1
    assert not small.withheld_sessions()
    assert "QX7ZEBRA4471" not in _everything_agents_see(small)


def test_a_database_from_before_withholding_hides_summaries_of_suppressed_text_on_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v10.db"
    brain = Brain(path, SMALL_BRAIN)
    brain.ingest("s", _secret_turns(40, secret_at=2))
    brain.compact("s")
    brain.close()
    # As version 10 left it: the message suppressed, its summaries untouched.
    sql = apsw.Connection(str(path))
    with sql:
        sql.execute(
            "UPDATE messages SET suppressed_at = '2026-01-01T00:00:00.000Z' "
            "WHERE client_id = 'm2'; "
            "DROP INDEX summaries_hidden; DROP INDEX summaries_replaces; "
            "ALTER TABLE summaries DROP COLUMN hidden_by; "
            "ALTER TABLE summaries DROP COLUMN replaces; "
            "ALTER TABLE summary_sources DROP COLUMN omitted; "
            "ALTER TABLE messages DROP COLUMN extra; "
            "ALTER TABLE conversations DROP COLUMN assemble_budget; "
            "ALTER TABLE conversations DROP COLUMN assemble_budget_seq; "
            "DROP TRIGGER nodes_fts_insert; DROP TRIGGER nodes_fts_delete; "
            "DROP TRIGGER nodes_fts_update; DROP TABLE nodes_fts_vocab; DROP TABLE nodes_fts; "
            "PRAGMA user_version = 10"
        )
    sql.close()
    brain = Brain(path, SMALL_BRAIN)
    try:
        assert brain.withheld_sessions() == ["s"]
        assert "QX7ZEBRA4471" not in _everything_agents_see(brain)
        assert brain.rebuild_withheld("s").rebuilt >= 1
        assert "QX7ZEBRA4471" not in _everything_agents_see(brain)
    finally:
        brain.close()


def _marker(i: int) -> str:
    return f"zq{i:03d}marker"


def _visible_text(brain: Brain, markers: list[str]) -> str:
    """assemble, full-text and regex grep of every marker, and describe/expand of each
    summary hit: what an agent can read."""
    seen = [_assembled_text(brain)]
    for marker in markers:
        for mode in ("full_text", "regex"):
            for hit in brain.grep(GrepOptions(marker, mode=mode, limit=100), session="s"):  # type: ignore[arg-type]
                seen.append(hit.snippet)
                if hit.kind == "summary":
                    seen.append(str(brain.describe(hit.id, session="s")))
                    seen.append(str(brain.expand(hit.id, session="s", max_tokens=100_000)))
    return "\n".join(seen)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(min_value=12, max_value=45),
    steps=st.lists(
        st.tuples(st.sampled_from(["suppress", "unsuppress", "compact", "rebuild", "ingest"]),
                  st.integers(min_value=0, max_value=60)),
        min_size=1,
        max_size=8,
    ),
)  # fmt: skip
def test_no_agent_facing_output_ever_holds_a_suppressed_messages_text(
    n: int, steps: list[tuple[str, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        brain = Brain(Path(tmp) / "p.db", SMALL_BRAIN)
        try:
            count = n
            brain.ingest("s", [_marked(i) for i in range(n)])
            brain.compact("s")
            hidden: set[int] = set()
            for op, arg in steps:
                target = arg % count
                if op == "suppress":
                    brain.suppress([f"m{target}"], session="s")
                    hidden.add(target)
                elif op == "unsuppress":
                    brain.suppress([f"m{target}"], session="s", suppressed=False)
                    hidden.discard(target)
                elif op == "compact":
                    brain.compact("s")
                elif op == "rebuild":
                    brain.rebuild_withheld("s")
                else:
                    brain.ingest("s", [_marked(count + i) for i in range(arg % 10 + 1)])
                    count += arg % 10 + 1
                seen = _visible_text(brain, [_marker(i) for i in sorted(hidden)])
                assert not [i for i in hidden if _marker(i) in seen]
            assert brain.info().messages == count
        finally:
            brain.close()


def _marked(i: int) -> MessageIn:
    text = f"step {i}: the value {_marker(i)} was recorded for the build pipeline"
    return MessageIn("user" if i % 2 == 0 else "assistant", text, client_id=f"m{i}")


def test_a_message_suppressed_while_its_summary_is_being_rebuilt_stays_out_of_the_rebuild(
    tmp_path: Path,
) -> None:
    gate = _Gate()
    gate.entered.set()  # let the first compaction through
    brain = Brain(tmp_path / "rebuild.db", SMALL_BRAIN, summarizer=gate)
    try:
        turns = [_marked(i) for i in range(40)]
        brain.ingest("s", turns)
        brain.compact("s")
        assert _marker(5) in _visible_text(brain, [_marker(5)])
        brain.suppress(["m2"], session="s")
        gate.entered.clear()  # hold the rebuild's summarizer
        rebuilding = threading.Thread(target=brain.rebuild_withheld, args=("s",))
        rebuilding.start()
        assert gate.entered.wait(30)
        brain.suppress(["m5"], session="s")  # fed to the rebuild a moment ago
        gate.open.set()
        rebuilding.join(30)
        assert not rebuilding.is_alive()
        seen = _visible_text(brain, [_marker(2), _marker(5)])
        assert _marker(2) not in seen
        assert _marker(5) not in seen
        assert not brain.withheld_sessions()
    finally:
        gate.open.set()
        brain.close()


def _fed(brain: Brain, summary_id: str) -> set[str]:
    """Client ids of the messages whose text went into a summary (directly)."""
    return {
        str(r[0])
        for r in brain.store.execute(
            "SELECT m.client_id FROM summary_sources ss JOIN summaries s ON s.id = ss.summary_id "
            "JOIN messages m ON m.id = ss.message_id WHERE s.summary_id = ? AND ss.omitted = 0",
            (summary_id,),
        )
    }


def test_a_partial_unsuppress_rebuilds_the_replacement_with_what_is_visible_again(
    small: Brain,
) -> None:
    small.ingest("s", [_marked(i) for i in range(40)])
    small.compact("s")
    original = _context_summaries(small)
    small.suppress(["m3", "m5"], session="s")
    assert small.rebuild_withheld("s").rebuilt == 1
    first = _context_summaries(small)[0]
    assert not {"m3", "m5"} & _fed(small, first)

    result = small.suppress(["m3"], session="s", suppressed=False)
    assert result.rebuild == ("s",)  # the original stays withheld by m5; the rebuild is stale
    assert small.rebuild_withheld("s").rebuilt == 1
    second = _context_summaries(small)[0]
    assert "m3" in _fed(small, second)
    assert "m5" not in _fed(small, second)
    assert (
        small.store.scalar("SELECT hidden_by FROM summaries WHERE summary_id = ?", (first,))
        == "replaced"
    )
    assert _marker(5) not in _visible_text(small, [_marker(5)])

    small.suppress(["m5"], session="s", suppressed=False)
    assert _context_summaries(small) == original
    assert not small.withheld_sessions()
