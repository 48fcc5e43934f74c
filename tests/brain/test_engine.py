"""brain.engine: the Brain facade (lossless read-back, info, save, reload, start-up sweep)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

import brain
from brain import Brain, BrainConfig, HashEmbedder, MessageIn, NotFound, open_store
from brain.lcm.content import FILE_MARKER, new_file_id
from brain.payloads.files import write_file
from brain.store.schema import SCHEMA_VERSION
from tests.brain.strategies import as_sent, conversations

_sessions = itertools.count()
HOUR = 3600.0


@pytest.fixture
def small_brain(db_path: Path) -> Iterator[Brain]:
    """A Brain whose payload threshold is small enough that many values go to files."""
    engine = Brain(db_path, BrainConfig(large_payload_tokens=16))
    try:
        yield engine
    finally:
        engine.close()


def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


LARGE = "x" * 200
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": LARGE}}


# -- lossless read-back ---------------------------------------------------------------------


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=conversations(with_ids=False))
@example(batch=[MessageIn("assistant", "", client_id="a", tool_calls=[CALL])])
@example(batch=[MessageIn("assistant", LARGE, client_id="a", tool_calls=[CALL])])
@example(batch=[MessageIn("tool", LARGE, client_id="a", tool_call_id="call_1")])
@example(batch=[MessageIn("tool", [{"type": "text", "text": LARGE}], tool_call_id="call_1")])
@example(
    batch=[
        MessageIn(
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "text", "text": "y" * 10} for _ in range(20)],
                },
                {"type": "image", "source": {"type": "base64", "data": "QUJD" * 100}},
                {"type": "thinking", "thinking": LARGE, "signature": "s"},
            ],
        )
    ]
)
@example(
    batch=[
        MessageIn(
            "user",
            [
                {
                    "type": "tool_use",
                    "id": "t",
                    "name": "n",
                    "input": {FILE_MARKER: new_file_id(), "encoding": "utf8"},
                }
            ],
        )
    ]
)
def test_get_message_restores_exactly_what_was_ingested(
    small_brain: Brain, batch: list[MessageIn]
) -> None:
    session = f"s{next(_sessions)}"
    result = small_brain.ingest(session, batch)
    assert len(result.messages) == len(batch)
    for msg, outcome in zip(batch, result.messages, strict=True):
        got = small_brain.get_message(session, outcome.id)
        assert got.pop("id") == outcome.id
        assert got == as_sent(msg)


def test_payload_files_are_read_back_after_a_reopen(db_path: Path) -> None:
    body = "payload " * 500
    with_files = BrainConfig(large_payload_tokens=16)
    first = Brain(db_path, with_files)
    first.ingest("s", [MessageIn("tool", body, client_id="r", tool_call_id="c")])
    first.close()
    second = Brain(db_path, with_files)
    try:
        assert second.get_message("s", "r")["content"] == body
        assert second.info().large_files == 1
    finally:
        second.close()


def test_a_client_cannot_read_another_sessions_payload_by_planting_its_file_id(
    small_brain: Brain,
) -> None:
    small_brain.ingest("private", [MessageIn("user", "secret " * 100, client_id="p")])
    [file_id] = os.listdir(small_brain.store.files_dir)
    planted = {FILE_MARKER: file_id, "encoding": "utf8"}
    sent = [{"type": "tool_use", "id": "t", "name": "n", "input": planted}]
    small_brain.ingest("attacker", [MessageIn("user", sent, client_id="a")])
    assert small_brain.get_message("attacker", "a")["content"] == sent


def test_get_message_of_an_unknown_id_is_not_found(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("user", "hi", client_id="a")])
    for missing in ("b", "msg_999", "msg_x"):
        with pytest.raises(NotFound):
            fresh_brain.get_message("s", missing)


def test_get_message_is_scoped_to_its_session(fresh_brain: Brain) -> None:
    result = fresh_brain.ingest(
        "one", [MessageIn("user", "hi", client_id="a"), MessageIn("user", "b")]
    )
    with pytest.raises(NotFound):
        fresh_brain.get_message("two", "a")
    with pytest.raises(NotFound):
        fresh_brain.get_message("two", result.messages[1].id)


def test_a_generated_id_does_not_reach_a_message_that_has_a_client_id(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("user", "hi", client_id="a")])
    with pytest.raises(NotFound):
        fresh_brain.get_message("s", "msg_1")


# -- info, save, reload, close --------------------------------------------------------------------


def test_info_counts_what_is_stored(fresh_brain: Brain, db_path: Path) -> None:
    empty = fresh_brain.info()
    assert (empty.conversations, empty.messages, empty.large_files) == (0, 0, 0)
    assert (empty.summaries, empty.nodes, empty.edges) == (0, 0, 0)
    assert empty.version == brain.__version__
    assert empty.schema_version == SCHEMA_VERSION
    assert empty.db == str(db_path)
    assert empty.db_bytes > 0

    fresh_brain.ingest("a", [MessageIn("user", "one"), MessageIn("user", "two")])
    fresh_brain.ingest("b", [MessageIn("user", "big " * 2000)])
    fresh_brain.ingest("b", [MessageIn("user", "big " * 2000)])  # a replay: not counted
    info = fresh_brain.info()
    assert (info.conversations, info.messages, info.large_files) == (2, 3, 1)


def test_info_counts_the_messages_waiting_for_the_entity_index(fresh_brain: Brain) -> None:
    fresh_brain.ingest("a", [MessageIn("user", "Caroline met Okonkwo"), MessageIn("user", "hi")])
    assert fresh_brain.info().entities_pending == 2
    fresh_brain.index_entities()
    assert fresh_brain.info().entities_pending == 0


def test_info_sees_writes_committed_by_another_process(fresh_brain: Brain, db_path: Path) -> None:
    fresh_brain.info()
    other = Brain(db_path)
    try:
        other.ingest("elsewhere", [MessageIn("user", "hello")])
    finally:
        other.close()
    assert fresh_brain.info().messages == 1


def test_info_reads_the_file_and_identity_as_the_pragmas_and_meta_say(fresh_brain: Brain) -> None:
    fresh_brain.ingest("a", [MessageIn("user", f"turn {i} about the deploy") for i in range(30)])
    fresh_brain.embed_pending(100)
    fresh_brain.ingest("a", [MessageIn("user", "x " * 3000)])
    info = fresh_brain.info()
    store = fresh_brain.store
    assert info.schema_version == store.scalar("PRAGMA user_version") == SCHEMA_VERSION
    page_size = store.scalar("PRAGMA page_size")
    assert info.db_bytes == store.scalar("PRAGMA page_count") * page_size
    assert info.retention.free_bytes == store.scalar("PRAGMA freelist_count") * page_size
    assert info.embeddings.stored_embedder == fresh_brain.embedder.name
    assert info.embeddings.stored == 30
    assert info.embeddings.pending == 1
    assert info.retention.last_pass_at is None


def test_info_as_a_dict_is_what_dataclasses_asdict_gives(fresh_brain: Brain) -> None:
    fresh_brain.ingest("a", [MessageIn("user", "one"), MessageIn("user", "two")])
    info = fresh_brain.info()
    assert info.as_dict() == dataclasses.asdict(info)
    assert list(info.as_dict()) == list(dataclasses.asdict(info))  # the same key order


def test_save_checkpoints_the_wal_and_reports_frame_counts(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("user", f"m{i}") for i in range(20)])
    saved = fresh_brain.save()
    assert saved.wal_frames > 0
    assert saved.checkpointed_frames == saved.wal_frames
    assert saved.took_ms >= 0


def test_reload_keeps_every_message_and_continues_the_sequence(fresh_brain: Brain) -> None:
    fresh_brain.ingest("s", [MessageIn("user", "before", client_id="a")])
    old_store = fresh_brain.store
    fresh_brain.reload()
    assert fresh_brain.store is not old_store
    assert fresh_brain.get_message("s", "a")["content"] == "before"
    result = fresh_brain.ingest(
        "s", [MessageIn("user", "after"), MessageIn("user", "before", client_id="a")]
    )
    assert [(m.seq, m.duplicate) for m in result.messages] == [(2, False), (1, True)]
    assert fresh_brain.info().messages == 2


def test_a_reload_that_finds_no_file_keeps_the_open_database_and_creates_nothing(
    db_path: Path, tmp_path: Path
) -> None:
    engine = Brain(db_path)
    engine.ingest("s", [MessageIn("user", "kept", client_id="k")])
    old_store = engine.store
    db_path.rename(tmp_path / "moved.db")
    with pytest.raises(brain.DatabaseMissing, match="keeps serving"):
        engine.reload()
    assert not db_path.exists()
    assert engine.store is old_store
    assert engine.get_message("s", "k")["content"] == "kept"
    assert engine.info().messages == 1
    engine.close()


def test_a_reload_onto_a_replaced_file_serves_it_and_never_leaks_the_old_wal_into_it(
    db_path: Path, tmp_path: Path
) -> None:
    engine = Brain(db_path)
    engine.ingest("s", [MessageIn("user", "old database", client_id="k")])
    backup = Brain(tmp_path / "backup.db")
    backup.ingest("t", [MessageIn("user", "restored", client_id="r")])
    backup.close()
    (tmp_path / "backup.db").replace(db_path)
    engine.reload()
    assert engine.get_message("t", "r")["content"] == "restored"
    with pytest.raises(NotFound):
        engine.get_message("s", "k")
    engine.close()


@pytest.mark.parametrize("gone", ["moved", "replaced"])
def test_maintenance_never_works_on_a_file_other_than_the_one_the_engine_opened(
    db_path: Path, tmp_path: Path, gone: str
) -> None:
    engine = Brain(db_path)
    db_path.rename(tmp_path / "moved.db")
    if gone == "replaced":
        Brain(tmp_path / "other.db").close()
        (tmp_path / "other.db").replace(db_path)
    with pytest.raises(brain.DatabaseFileLost):
        engine.maintain()
    with pytest.raises(brain.DatabaseFileLost):
        engine.health()
    if gone == "moved":
        assert not db_path.exists()  # nothing created where the file was
    engine.close()


def test_closing_twice_is_safe_and_the_data_survives(db_path: Path) -> None:
    engine = Brain(db_path)
    engine.ingest("s", [MessageIn("user", "kept", client_id="k")])
    engine.close()
    engine.close()
    reopened = Brain(db_path)
    try:
        assert reopened.get_message("s", "k")["content"] == "kept"
    finally:
        reopened.close()


def test_concurrent_ingests_from_threads_are_serialised(fresh_brain: Brain) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(10):
                fresh_brain.ingest("s", [MessageIn("user", f"t{n}-{i}", client_id=f"{n}-{i}")])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seqs = [int(r[0]) for r in fresh_brain.store.execute("SELECT seq FROM messages ORDER BY seq")]
    assert seqs == list(range(1, 41))


# -- start-up sweep of stray payload files --------------------------------------------------------


def test_opening_removes_stray_payload_files_older_than_the_grace(db_path: Path) -> None:
    config = BrainConfig(large_payload_tokens=16, orphan_file_grace_s=HOUR)
    engine = Brain(db_path, config)
    engine.ingest("s", [MessageIn("user", "known payload " * 50, client_id="k")])
    files_dir = engine.store.files_dir
    [known] = os.listdir(files_dir)
    engine.close()

    old_stray = write_file(files_dir, new_file_id(), b"left by a killed process")
    young_stray = write_file(files_dir, new_file_id(), b"another process is committing")
    old_temp = files_dir / f".tmp-{new_file_id()}"
    old_temp.write_bytes(b"half written")
    unrelated = files_dir / "README"
    unrelated.write_bytes(b"not ours")
    for path in (files_dir / known, old_stray, old_temp, unrelated):
        _age(path, 2 * HOUR)

    reopened = Brain(db_path, config)
    try:
        assert sorted(os.listdir(files_dir)) == sorted([known, young_stray.name, "README"])
        assert reopened.get_message("s", "k")["content"] == "known payload " * 50
    finally:
        reopened.close()


# -- the package ----------------------------------------------------------------------------------


def test_brain_exports_exactly_its_public_names() -> None:
    assert sorted(brain.__all__) == sorted(set(brain.__all__))
    for name in brain.__all__:
        assert getattr(brain, name) is not None
    assert brain.open_store is open_store


def test_importing_brain_loads_neither_the_daemon_nor_an_event_loop_library() -> None:
    code = (
        "import sys, brain, brain.engine, brain.lcm.ingest, brain.payloads.files\n"
        "top = {m.split('.')[0] for m in sys.modules}\n"
        "print(','.join(sorted(top & {'anyio', 'daemon', 'protocol'})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


# -- the facade -----------------------------------------------------------------------------------

PUBLIC = [
    "admit_grant", "assemble", "bootstrap", "charge_grant", "chat", "close", "compact",
    "compact_incremental", "compaction_due", "config", "create_grant", "describe", "draft_answer",
    "durable", "embed_ahead", "embed_before_search", "embed_nodes", "embed_pending", "embed_query",
    "embedder", "embeddings_pending", "embeds_in_process", "entities", "entity", "expand",
    "expand_query", "get_grant",
    "get_message", "grep", "group_commit", "health", "index_entities", "info", "info_now",
    "ingest", "learn", "maintain",
    "may_switch_embedder", "path", "prepare_teach", "probe",
    "query", "rebuild_withheld", "recall_text", "recent", "refresh_rollups", "reload",
    "renew_grant", "retain", "revoke_grant", "save",
    "settle_grant", "stop_compactions", "store", "suppress", "sync", "sync_index", "synthesize",
    "teach", "trace", "warm_graph", "withheld_sessions",
]  # fmt: skip


def test_a_brain_offers_exactly_the_pinned_public_names(fresh_brain: Brain) -> None:
    assert sorted(n for n in dir(fresh_brain) if not n.startswith("_")) == PUBLIC


def test_every_public_method_of_a_brain_says_what_it_does(fresh_brain: Brain) -> None:
    for name in PUBLIC:
        member = getattr(fresh_brain, name)
        if callable(member):
            assert (member.__doc__ or "").strip(), name


def test_settings_set_on_a_brain_are_the_ones_its_operations_use(fresh_brain: Brain) -> None:
    embedder = HashEmbedder(16)
    fresh_brain.embedder = embedder
    fresh_brain.embed_before_search = 7
    assert fresh_brain.embedder is embedder
    assert fresh_brain.embed_before_search == 7
    assert fresh_brain.chat is None
    assert fresh_brain.embed_query("hello").vector.shape == (16,)
    assert fresh_brain.info().embeddings.embedder == embedder.name


def test_opening_a_brain_and_answering_info_loads_no_operation_module(db_path: Path) -> None:
    code = (
        "import sys, brain\n"
        f"engine = brain.Brain({str(db_path)!r})\n"
        "engine.info()\n"
        "engine.close()\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(out.stdout.split())
    assert "brain.engine" in loaded
    heavy = {
        "numpy",
        "brain.lcm.assemble",
        "brain.lcm.compaction",
        "brain.lcm.ingest",
        "brain.recall.search",
        "brain.recall.expand",
        "brain.graph.nodes",
        "brain.graph.retrieval",
        "brain.ops.grants",
        "brain.vectors.index",
    }
    assert loaded.isdisjoint(heavy), sorted(loaded & heavy)
