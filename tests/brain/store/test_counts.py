"""The maintained row counters ``info`` reports equal ``count(*)`` of their tables
after every kind of write: ingest (payload files too), compaction, suppression,
embedding (queue drained, vectors stored), teach and a maintain that merges nodes
away, and a doctor repair of counters written around."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, MessageIn, open_store
from brain.graph.maintain import MaintainOptions
from brain.graph.nodes import NewNode
from brain.ops.doctor import doctor
from brain.store.migrations.counts import COUNTED, COUNTS
from brain.store.schema import MIGRATIONS
from brain.vectors.embedders import HashEmbedder
from tests.brain.lcm.helpers import SMALL_BRAIN, chat, new_session

COUNTS_VERSION = MIGRATIONS.index(COUNTS) + 1
"""The schema version that added the counters."""


def _kept(brain: Brain) -> dict[str, int]:
    with brain._access.reading() as store:
        return {str(name): int(n) for name, n in store.execute("SELECT name, n FROM counts")}


def _counted(brain: Brain) -> dict[str, int]:
    with brain._access.reading() as store:
        return {t: int(store.scalar(f"SELECT count(*) FROM {t}")) for t in COUNTED}


def _info_counts(brain: Brain) -> dict[str, int]:
    info = brain.info()
    return {
        "conversations": info.conversations,
        "messages": info.messages,
        "large_files": info.large_files,
        "summaries": info.summaries,
        "nodes": info.nodes,
        "edges": info.edges,
        "vectors": info.embeddings.stored,
        "embed_queue": info.embeddings.pending,
        "entity_backlog": info.entities_pending,
    }


def _assert_agree(brain: Brain) -> None:
    counted = _counted(brain)
    assert _kept(brain) == counted
    assert _info_counts(brain) == counted


def test_info_counts_equal_the_table_counts_after_ingest_compaction_suppression_and_embedding(
    db_path: Path,
) -> None:
    brain = Brain(db_path, SMALL_BRAIN)
    brain.embedder = HashEmbedder(64)
    try:
        _assert_agree(brain)
        brain.ingest("a", chat(40))
        brain.ingest("b", [MessageIn("user", "payload " * 400, client_id="big")])
        _assert_agree(brain)
        assert _counted(brain)["large_files"] == 1
        brain.compact("a")
        assert _counted(brain)["summaries"] > 0
        _assert_agree(brain)
        brain.suppress(["c3"], session="a")
        brain.suppress(["c3"], session="a", suppressed=False)
        _assert_agree(brain)
        assert _counted(brain)["embed_queue"] > 0
        while brain.embed_pending():
            pass
        assert _counted(brain)["vectors"] > 0
        _assert_agree(brain)
    finally:
        brain.close()


def test_info_counts_equal_the_table_counts_after_teach_and_a_maintain_that_merges_nodes_away(
    db_path: Path,
) -> None:
    brain = Brain(db_path)
    brain.embedder = HashEmbedder(64)
    try:
        brain.teach(NewNode("teaching", "the staging database lives on host nova"))
        brain.teach(NewNode("teaching", "the staging database lives on host nova!"))
        brain.query("where does the staging database live")
        _assert_agree(brain)
        report = brain.maintain(["merge"], options=MaintainOptions(merge_similarity=0.9))
        assert report.tasks["merge"]["ids"]
        assert _counted(brain)["nodes"] == 1
        _assert_agree(brain)
    finally:
        brain.close()


def test_doctor_finds_counters_written_around_and_recounts_them(db_path: Path) -> None:
    brain = Brain(db_path, SMALL_BRAIN)
    brain.ingest("a", chat(6))
    brain.close()
    store = open_store(db_path)
    try:
        store.execute("UPDATE counts SET n = n + 5 WHERE name = 'messages'")
    finally:
        store.close()
    found = doctor(db_path).check("counts")
    assert found.status == "warning"
    assert found.counts["drifted"] == 1
    repaired = doctor(db_path, repair=True).check("counts")
    assert repaired.status == "ok"
    assert repaired.repaired == ("recounted messages from count(*)",)
    brain = Brain(db_path, SMALL_BRAIN)
    try:
        _assert_agree(brain)
        assert brain.info().messages == 6
    finally:
        brain.close()


_OPS = st.lists(
    st.sampled_from(["ingest", "big", "compact", "suppress", "unsuppress", "embed", "teach"]),
    min_size=1,
    max_size=8,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_counters_equal_count_after_any_sequence_of_writes(ops: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        brain = Brain(Path(tmp) / "brain.db", SMALL_BRAIN)
        brain.embedder = HashEmbedder(32)
        session = new_session()
        sent = 0
        try:
            for op in ops:
                if op == "ingest":
                    brain.ingest(session, chat(12, start=sent))
                    sent += 12
                elif op == "big":
                    brain.ingest(session, [MessageIn("user", "blob " * 500, client_id=f"b{sent}")])
                    sent += 1
                elif op == "compact" and sent:
                    brain.compact(session)
                elif op in ("suppress", "unsuppress") and sent:
                    brain.suppress(["c0"], session=session, suppressed=op == "suppress")
                elif op == "embed":
                    brain.embed_pending()
                elif op == "teach":
                    brain.teach(NewNode("teaching", f"fact number {sent} about the deploy"))
                _assert_agree(brain)
        finally:
            brain.close()


def test_a_database_from_before_the_counters_is_counted_when_it_is_migrated(
    db_path: Path,
) -> None:
    brain = Brain(db_path, SMALL_BRAIN)
    brain.ingest("a", chat(9))
    brain.close()
    store = open_store(db_path)
    try:  # back to schema v17: no counters, no triggers
        for table in COUNTED:
            store.execute(f"DROP TRIGGER counts_{table}_insert")
            store.execute(f"DROP TRIGGER counts_{table}_delete")
        store.execute("DROP TABLE counts")
        store.execute(f"PRAGMA user_version = {COUNTS_VERSION - 1}")
    finally:
        store.close()
    brain = Brain(db_path, SMALL_BRAIN)
    try:
        assert brain.info().messages == 9
        brain.ingest("a", chat(3, start=9))
        _assert_agree(brain)
    finally:
        brain.close()
