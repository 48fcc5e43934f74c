"""brain.lcm.compaction: leaf and condensed passes; incremental, sweep, targeted; crashes,
threads."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, BrainConfig, MessageIn, NotFound, ProviderError
from brain.lcm.assemble import AssembleOptions
from brain.lcm.context import conversation, tail_start
from brain.lcm.summarize import ExtractiveSummarizer, SummaryRequest
from tests import ROOT
from tests.brain.lcm.helpers import SMALL, SMALL_BRAIN, assert_invariants, chat, new_session
from tests.brain.strategies import tool_conversations


def outside_tail(brain: Brain, session: str) -> int:
    """Raw tokens before the fresh tail, read from the tables."""
    store = brain.store
    conv = conversation(store, session)
    start = tail_start(store, conv, brain.config.compaction.fresh_tail_count)
    in_tail = store.scalar(
        "SELECT coalesce(sum(token_count), 0) FROM context_items "
        "WHERE conversation_id = ? AND pos >= ? AND message_id IS NOT NULL",
        (conv.id, start),
    )
    return conv.raw_tokens - int(in_tail)


def snapshot(brain: Brain) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables compaction writes."""
    tables = {
        "context_items": "SELECT * FROM context_items ORDER BY conversation_id, pos",
        "summaries": "SELECT * FROM summaries ORDER BY id",
        "summary_sources": "SELECT * FROM summary_sources ORDER BY summary_id, ordinal",
        "conversations": "SELECT id, context_tokens, raw_tokens, context_version, "
        "compaction_epoch FROM conversations ORDER BY id",
        "summaries_fts": "SELECT rowid, content FROM summaries_fts ORDER BY rowid",
    }
    return {name: [tuple(r) for r in brain.store.execute(sql)] for name, sql in tables.items()}


def summary_ids(brain: Brain) -> set[str]:
    return {str(r[0]) for r in brain.store.execute("SELECT summary_id FROM summaries")}


# -- properties -------------------------------------------------------------------------------


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(conversation_=tool_conversations(), data=st.data())
def test_random_tool_conversations_keep_every_invariant_through_ingest_and_compaction(
    small: Brain, conversation_: list[MessageIn], data: st.DataObject
) -> None:
    session = new_session()
    done = 0
    while done < len(conversation_):
        size = data.draw(st.integers(1, 12), label="batch")
        small.ingest(session, conversation_[done : done + size])
        done += size
        op = data.draw(st.sampled_from(["none", "incremental", "sweep", "target"]), label="op")
        store = small.store
        conv = conversation(store, session)
        tail = tail_start(store, conv, SMALL.fresh_tail_count)
        before = summary_ids(small)
        if op == "incremental":
            small.compact_incremental(session)
        elif op == "sweep":
            small.compact(session)
        elif op == "target":
            small.compact(session, target_tokens=data.draw(st.integers(0, 2_000), label="target"))
        assert_invariants(small, session)
        for sid in summary_ids(small) - before:
            described = small.describe(sid, session=session)
            # Leaf chunks never take fresh-tail items (the tail as it was when the pass ran).
            assert described["last_seq"] < tail, (sid, described["last_seq"], tail)
            if described["summary_kind"] == "leaf":
                assert_no_call_split_from_its_result(small, session, described)


def assert_no_call_split_from_its_result(brain: Brain, session: str, leaf: dict[str, Any]) -> None:
    """Every result that follows a call folded into ``leaf`` was folded with it."""
    conv = conversation(brain.store, session)
    rows = brain.store.execute(
        "SELECT cm.seq, rm.seq FROM messages cm "
        "JOIN message_parts cp ON cp.message_id = cm.id AND cp.kind = 'tool_call' "
        "JOIN message_parts rp ON rp.tool_call_id = cp.tool_call_id AND rp.kind = 'tool_result' "
        "JOIN messages rm ON rm.id = rp.message_id AND rm.conversation_id = cm.conversation_id "
        "WHERE cm.conversation_id = ? AND cm.seq BETWEEN ? AND ? AND rm.seq > cm.seq "
        # The result answers this call: no other call of its id comes in between.
        "AND NOT EXISTS (SELECT 1 FROM message_parts op JOIN messages om ON om.id = op.message_id "
        "WHERE op.tool_call_id = cp.tool_call_id AND op.kind = 'tool_call' "
        "AND om.conversation_id = cm.conversation_id AND om.seq > cm.seq AND om.seq < rm.seq)",
        (conv.id, leaf["first_seq"], leaf["last_seq"]),
    )
    for call_seq, result_seq in rows:
        assert result_seq <= leaf["last_seq"], f"call at {call_seq}, result left at {result_seq}"


# -- incremental, sweep, targeted ------------------------------------------------------------


def test_incremental_compaction_runs_only_over_the_threshold(small: Brain) -> None:
    small.ingest("s", chat(8))
    assert outside_tail(small, "s") <= SMALL.threshold_tokens
    assert not small.compaction_due("s")
    report = small.compact_incremental("s")
    assert report.leaf_passes == report.condensed_passes == 0
    assert summary_ids(small) == set()

    small.ingest("s", chat(30, start=8))
    assert outside_tail(small, "s") > SMALL.threshold_tokens
    assert small.compaction_due("s")
    report = small.compact_incremental("s")
    assert report.leaf_passes > 0
    assert report.tokens_after < report.tokens_before
    assert outside_tail(small, "s") <= SMALL.threshold_tokens
    assert not small.compaction_due("s")
    assert_invariants(small, "s")


def test_compaction_of_an_unknown_session_is_not_found(small: Brain) -> None:
    with pytest.raises(NotFound):
        small.compact("nobody")
    with pytest.raises(NotFound):
        small.compact_incremental("nobody")
    assert not small.compaction_due("nobody")


def test_a_sweep_folds_everything_before_the_tail_and_a_second_sweep_does_nothing(
    small: Brain,
) -> None:
    small.ingest("s", chat(60))
    first = small.compact("s")
    assert first.leaf_passes > 0
    assert first.condensed_passes > 0
    assert_invariants(small, "s")
    # Nothing raw is left before the tail.
    store = small.store
    conv = conversation(store, "s")
    start = tail_start(store, conv, SMALL.fresh_tail_count)
    assert (
        store.scalar(
            "SELECT count(*) FROM context_items WHERE conversation_id = ? AND pos < ? "
            "AND message_id IS NOT NULL",
            (conv.id, start),
        )
        == 0
    )
    before = snapshot(small)
    second = small.compact("s")
    assert second.summaries == []
    assert snapshot(small) == before


def test_a_sweep_stops_when_a_pass_saves_nothing(small: Brain) -> None:
    # Messages so short that no summary (wrapped in its XML) is cheaper than them.
    small.ingest("s", [MessageIn("user", "ok", client_id=f"k{i}") for i in range(12)])
    before = snapshot(small)
    report = small.compact("s")
    assert report.summaries == []
    assert report.tokens_after == report.tokens_before
    assert snapshot(small) == before  # the abandoned pass left no summary row behind
    assert_invariants(small, "s")


def test_targeted_compaction_reaches_the_target_when_possible(tmp_path: Path) -> None:
    # The summarizer whose sizes make the leaf passes alone fall short of the target,
    # so that the pressure has to fold: the fact summarizer can reach it with leaves.
    config = replace(SMALL_BRAIN, compaction=replace(SMALL, offline_summarizer="extractive_v1"))
    small = Brain(tmp_path / "v1.db", config)
    try:
        _reaches_the_target_by_folding(small)
    finally:
        small.close()


def _reaches_the_target_by_folding(small: Brain) -> None:
    small.ingest("a", chat(10))
    small.ingest("b", chat(10))
    swept = small.compact("a")
    # The sweep leaves two leaf summaries, fewer than leaf_fanout; under pressure they fold.
    assert summary_depths(small, "a") == [0, 0]
    target = swept.tokens_after - 1
    report = small.compact("b", target_tokens=target)
    assert report.tokens_after <= target
    assert conversation(small.store, "b").context_tokens == report.tokens_after
    assert summary_depths(small, "b") == [1]
    assert_invariants(small, "b")


@pytest.mark.parametrize("n", [14, 22, 80])
def test_targeted_compaction_never_ends_above_a_plain_sweep(small: Brain, n: int) -> None:
    # Folding long runs two by two used to leave summaries of mixed depths side
    # by side, which never fold together: 14 messages ended at 514 tokens, not 415.
    small.ingest("a", chat(n))
    small.ingest("b", chat(n))
    swept = small.compact("a")
    targeted = small.compact("b", target_tokens=swept.tokens_after)
    assert targeted.tokens_after <= swept.tokens_after
    assert_invariants(small, "b")


def summary_depths(brain: Brain, session: str) -> list[int]:
    conv = conversation(brain.store, session)
    return [
        int(r[0])
        for r in brain.store.execute(
            "SELECT depth FROM context_items WHERE conversation_id = ? AND summary_id IS NOT NULL "
            "ORDER BY pos",
            (conv.id,),
        )
    ]


def test_targeted_compaction_stops_when_the_target_cannot_be_reached(small: Brain) -> None:
    small.ingest("s", chat(40))
    report = small.compact("s", target_tokens=0)
    # Compacted again before any assemble: an assemble makes the session follow its
    # budget, whose smaller tail would leave more to fold.
    again = small.compact("s", target_tokens=0)
    assert again.summaries == []
    tail = small.assemble("s", AssembleOptions(budget=1)).fresh_tail["tokens"]
    assert report.tokens_after >= tail > 0
    assert_invariants(small, "s")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(n=st.integers(6, 160), target=st.integers(0, 8_000))
def test_compaction_to_a_target_makes_no_pass_once_the_context_fits(
    small: Brain, n: int, target: int
) -> None:
    # The old sweep ran whole rounds of leaf passes and condensation, so it went
    # on folding long after the context fitted (and ended far below the target).
    session = new_session()
    small.ingest(session, chat(n))
    after_each: list[int] = []  # the context after each pass, read as the pass ends

    def progress(_done: int, _total: int | None, _phase: str) -> None:
        after_each.append(conversation(small.store, session).context_tokens)

    report = small.compact(session, target_tokens=target, progress=progress)
    assert len(after_each) == len(report.summaries)
    # One fewer pass would have been over the target: every pass started over it.
    before_each = [report.tokens_before, *after_each[:-1]]
    assert all(tokens > target for tokens in before_each[: len(after_each)])
    assert report.tokens_after == (after_each[-1] if after_each else report.tokens_before)
    if report.tokens_after > target:
        # Over it only when nothing more can be folded.
        assert small.compact(session, target_tokens=target).summaries == []
    assert_invariants(small, session)


def test_condensation_never_mixes_depths_and_stacks_up(small: Brain) -> None:
    small.ingest("s", chat(200))
    small.compact("s", target_tokens=0)
    depths = [
        int(r[0])
        for r in small.store.execute("SELECT depth FROM context_items WHERE summary_id IS NOT NULL")
    ]
    assert max(depths) >= 2
    assert_invariants(small, "s")
    for depth, kid_depth in small.store.execute(
        "SELECT s.depth, k.depth FROM summaries s JOIN summary_sources ss ON ss.summary_id = s.id "
        "JOIN summaries k ON k.id = ss.child_id"
    ):
        assert kid_depth == depth - 1  # a sweep folds one depth at a time


def test_a_late_tool_result_pulls_the_tail_back_but_never_over_a_summary(small: Brain) -> None:
    call = MessageIn(
        "assistant",
        "",
        client_id="call",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    )
    small.ingest("s", [*chat(10), call, *chat(20, start=10)])
    small.compact("s")
    small.ingest("s", [MessageIn("tool", "late output", client_id="late", tool_call_id="c1")])
    assert_invariants(small, "s")  # the tail starts after every summary
    result = small.assemble("s", AssembleOptions(budget=10_000, detail=False))
    assert result.pairing["dropped_results"] == 1  # its call is folded: no orphan is shown
    assert all(m["role"] != "tool" for m in result.messages)


def test_call_ids_numbered_afresh_in_every_response_do_not_stretch_the_tail(small: Brain) -> None:
    # Some model servers name the calls of every response call_0, call_1...
    # Matching results to every call of their id stretched the tail back to the
    # first call_0: nothing was ever compacted and every assemble was over budget.
    tool_call = {"id": "call_0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages = []
    for i in range(30):
        messages += [
            MessageIn("user", f"turn {i}: " + "word " * 30),
            MessageIn("assistant", "", tool_calls=[tool_call]),
            MessageIn("tool", "output " * 30, tool_call_id="call_0"),
            MessageIn("assistant", f"done {i}: " + "word " * 30),
        ]
    small.ingest("s", messages)
    assert_invariants(small, "s")
    assert small.compact("s").summaries
    assert_invariants(small, "s")
    out = small.assemble("s", AssembleOptions(budget=1_000))
    assert out.fresh_tail["count"] == 4
    assert not out.over_budget


# -- failures ---------------------------------------------------------------------------------


class Crashing:
    """A summarizer that works ``ok`` times, then fails the way a broken provider
    client might (not with ``ProviderError``, which escalation absorbs)."""

    name = "crashing"

    def __init__(self, ok: int) -> None:
        self.ok = ok
        self.inner = ExtractiveSummarizer()

    def summarize(self, request: SummaryRequest) -> str:
        if self.ok == 0:
            raise RuntimeError("the provider client crashed")
        self.ok -= 1
        return self.inner.summarize(request)


def test_a_crash_while_summarising_leaves_the_state_before_that_pass(db_path: Path) -> None:
    engine = Brain(db_path, SMALL_BRAIN, summarizer=Crashing(ok=0))
    try:
        engine.ingest("s", chat(40))
        before = snapshot(engine)
        with pytest.raises(RuntimeError):
            engine.compact("s")
        assert snapshot(engine) == before
        assert_invariants(engine, "s")
    finally:
        engine.close()


def test_passes_committed_before_a_crash_stay_and_compaction_resumes(db_path: Path) -> None:
    crashing = Crashing(ok=2)
    engine = Brain(db_path, SMALL_BRAIN, summarizer=crashing)
    try:
        engine.ingest("s", chat(60))
        with pytest.raises(RuntimeError):
            engine.compact("s")
        assert len(summary_ids(engine)) == 2
        assert_invariants(engine, "s")
        crashing.ok = 1_000  # the provider is back; the per-session lock was released
        assert engine.compact("s").summaries
        assert_invariants(engine, "s")
    finally:
        engine.close()


class Unavailable:
    """A provider that is down: every call raises ``ProviderError``."""

    name = "llm:down"

    def summarize(self, request: SummaryRequest) -> str:
        raise ProviderError("connection refused")


def test_an_unavailable_provider_falls_back_to_the_extractive_summary(db_path: Path) -> None:
    engine = Brain(db_path, SMALL_BRAIN, summarizer=Unavailable())
    try:
        engine.ingest("s", chat(40))
        assert engine.compact("s").summaries
        made_by = {str(r[0]) for r in engine.store.execute("SELECT summarizer FROM summaries")}
        assert made_by <= {"fallback", "fallback:truncated", "verbatim"}
        assert_invariants(engine, "s")
    finally:
        engine.close()


_KILL_DURING_COMMIT = """
import sys, time
from brain import Brain, BrainConfig
from brain.config import CompactionConfig

config = BrainConfig(large_payload_tokens=100, compaction=CompactionConfig(
    leaf_chunk_tokens=300, threshold_tokens=300, fresh_tail_count=4, leaf_fanout=3,
    condensed_fanout=2, leaf_target_tokens=60, condensed_target_tokens=80))
engine = Brain(sys.argv[1], config)

def trace(sql, bindings):
    # replace_run: the summary row is in and the chunk's items are deleted; the
    # summary's own item is next. Say so, then hang until killed.
    if sql.startswith("INSERT INTO context_items") and "summary_id" in sql:
        print("inside", flush=True)
        time.sleep(60)

engine.store.set_tracer(trace)
engine.compact("s")
"""


def test_a_process_killed_inside_the_commit_leaves_the_old_state(db_path: Path) -> None:
    engine = Brain(db_path, SMALL_BRAIN)
    engine.ingest("s", chat(40))
    before = snapshot(engine)
    engine.close()

    child = subprocess.Popen(
        [sys.executable, "-c", _KILL_DURING_COMMIT, str(db_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"inside\n"
    finally:
        child.kill()
        child.wait(30)
        if child.stdout is not None:
            child.stdout.close()

    engine = Brain(db_path, SMALL_BRAIN)
    try:
        assert snapshot(engine) == before
        assert_invariants(engine, "s")
        assert engine.compact("s").summaries
        assert_invariants(engine, "s")
    finally:
        engine.close()


# -- threads ----------------------------------------------------------------------------------


class Watching:
    """The extractive summarizer, slowed down, recording how many calls overlap."""

    name = "watching"

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.lock = threading.Lock()
        self.active = 0
        self.most = 0
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> str:
        with self.lock:
            self.active += 1
            self.calls += 1
            self.most = max(self.most, self.active)
        try:
            time.sleep(0.002)
            return self.inner.summarize(request)
        finally:
            with self.lock:
                self.active -= 1


def test_concurrent_compactions_of_one_conversation_never_interleave(db_path: Path) -> None:
    watching = Watching()
    engine = Brain(db_path, SMALL_BRAIN, summarizer=watching)
    errors: list[BaseException] = []

    def run(work: Any) -> None:
        try:
            work()
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)

    try:
        engine.ingest("s", chat(30))
        threads = [
            threading.Thread(target=run, args=(lambda: engine.compact("s"),)),
            threading.Thread(target=run, args=(lambda: engine.compact("s"),)),
            threading.Thread(target=run, args=(lambda: engine.compact_incremental("s"),)),
            threading.Thread(target=run, args=(lambda: engine.compact("s", target_tokens=0),)),
            threading.Thread(target=run, args=(lambda: engine.ingest("s", chat(30, start=30)),)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert watching.calls > 0
        assert watching.most == 1
        assert_invariants(engine, "s")
    finally:
        engine.close()


def test_compactions_of_different_conversations_run_side_by_side(db_path: Path) -> None:
    barrier = threading.Barrier(2, timeout=10)
    waited: set[int] = set()

    class Meeting:
        """Each thread's first summary waits for the other thread's first summary."""

        name = "meeting"
        inner = ExtractiveSummarizer()

        def summarize(self, request: SummaryRequest) -> str:
            me = threading.get_ident()
            if me not in waited:
                waited.add(me)
                barrier.wait()  # BrokenBarrierError if the other compaction were blocked
            return self.inner.summarize(request)

    engine = Brain(db_path, SMALL_BRAIN, summarizer=Meeting())
    errors: list[BaseException] = []

    def compact(session: str) -> None:
        try:
            engine.compact(session)
        except BaseException as exc:
            errors.append(exc)

    try:
        engine.ingest("a", chat(30))
        engine.ingest("b", chat(30))
        threads = [threading.Thread(target=compact, args=(s,)) for s in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert_invariants(engine, "a")
        assert_invariants(engine, "b")
    finally:
        engine.close()


# -- flush recommendation ---------------------------------------------------------------------


def test_flush_is_recommended_once_per_compaction_epoch_as_raw_history_nears_the_threshold(
    small: Brain,
) -> None:
    def flush() -> bool:
        return small.assemble("s", AssembleOptions(budget=100_000)).flush_recommended

    small.ingest("s", chat(5))
    assert outside_tail(small, "s") < SMALL.threshold_tokens - SMALL.flush_soft_tokens
    assert not flush()
    small.ingest("s", chat(3, start=5))
    assert SMALL.threshold_tokens - SMALL.flush_soft_tokens <= outside_tail(small, "s")
    assert flush()
    assert not flush()  # once per epoch
    small.ingest("s", chat(6, start=8))
    assert outside_tail(small, "s") > SMALL.threshold_tokens
    assert not flush()  # still the same epoch

    small.compact("s")  # a new epoch, and raw history is short again
    assert not flush()
    small.ingest("s", chat(6, start=14))
    assert outside_tail(small, "s") >= SMALL.threshold_tokens - SMALL.flush_soft_tokens
    assert flush()
    assert not flush()


def test_an_assemble_does_not_wait_behind_a_write_to_recommend_a_flush(small: Brain) -> None:
    """The mark is written only when the write lock is free at once: an assemble of a
    host that never pauses is not held up by a compaction's commit; a later one says it."""
    small.ingest("s", chat(5))
    # The budget is remembered now (that write does wait): below the flush mark yet.
    assert not small.assemble("s", AssembleOptions(budget=100_000)).flush_recommended
    small.ingest("s", chat(3, start=5))
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with small._access.locked():  # a long write elsewhere (a compaction's commit)
            held.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert held.wait(10)
        out = small.assemble("s", AssembleOptions(budget=100_000))
        assert not out.flush_recommended  # answered without waiting for the lock
    finally:
        release.set()
        thread.join(10)
    assert small.assemble("s", AssembleOptions(budget=100_000)).flush_recommended
    assert not small.assemble("s", AssembleOptions(budget=100_000)).flush_recommended


def test_the_flush_recommendation_survives_a_restart(db_path: Path) -> None:
    engine = Brain(db_path, SMALL_BRAIN)
    engine.ingest("s", chat(8))
    assert engine.assemble("s", AssembleOptions(budget=100_000)).flush_recommended
    engine.close()
    engine = Brain(db_path, SMALL_BRAIN)
    try:
        assert not engine.assemble("s", AssembleOptions(budget=100_000)).flush_recommended
    finally:
        engine.close()


def test_compaction_config_without_auto_is_never_due(db_path: Path) -> None:
    config = BrainConfig(compaction=replace(SMALL, auto=False))
    engine = Brain(db_path, config)
    try:
        engine.ingest("s", chat(40))
        assert not engine.compaction_due("s")
        assert engine.compact("s").summaries  # an explicit compact still runs
    finally:
        engine.close()
