"""Retention: old derived data goes first, messages only when configured, the file shrinks."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw

from brain import Brain, BrainConfig, MessageIn
from brain.clock import iso
from brain.config import RetentionConfig
from brain.ops.doctor import doctor
from brain.recall.search import GrepOptions
from brain.store.connection import open_store
from brain.vectors.embedders import HashEmbedder
from brain.vectors.writes import enqueue_everything

NOW = datetime.now(UTC)


def _messages(prefix: str, n: int, *, days_ago: float, words: int = 12) -> list[MessageIn]:
    at = iso(NOW - timedelta(days=days_ago))
    return [
        MessageIn(
            "user" if i % 2 == 0 else "assistant",
            f"{prefix} note {i} " + " ".join(f"{prefix}{i}w{k}" for k in range(words)),
            client_id=f"{prefix}-{i}",
            created_at=at,
        )
        for i in range(n)
    ]


def _config(**retention: object) -> BrainConfig:
    return BrainConfig(retention=RetentionConfig(**retention))  # type: ignore[arg-type]


def _brain(db: Path, config: BrainConfig) -> Brain:
    return Brain(db, config, embedder=HashEmbedder(256))


def _embed_all(brain: Brain) -> None:
    while brain.embed_pending():
        pass


def _vectors_of(db: Path, session: str) -> int:
    conn = apsw.Connection(str(db))
    try:
        row = conn.execute(
            "SELECT count(*) FROM vectors v JOIN conversations c ON c.id = v.conversation_id "
            "WHERE v.kind = 'message' AND c.session_id = ?",
            (session,),
        ).fetchone()
        assert row is not None
        return int(row[0])
    finally:
        conn.close()


def test_a_new_database_keeps_a_page_map_for_incremental_vacuum(tmp_path: Path) -> None:
    store = open_store(tmp_path / "brain.db")
    try:
        assert store.scalar("PRAGMA auto_vacuum") == 2  # INCREMENTAL
    finally:
        store.close()
    brain = _brain(tmp_path / "brain.db", BrainConfig())
    try:
        assert brain.info().retention.auto_vacuum == "incremental"
    finally:
        brain.close()


def test_messages_past_their_age_lose_their_vectors_and_keep_everything_else(
    tmp_path: Path,
) -> None:
    db = tmp_path / "brain.db"
    brain = _brain(db, _config(max_age_days=30))
    try:
        brain.ingest("s", _messages("old", 40, days_ago=90))
        brain.ingest("s", _messages("new", 10, days_ago=1))
        _embed_all(brain)
        report = brain.retain()
        assert report.vectors_dropped == 40
        assert report.messages_deleted == 0
        info = brain.info()
        assert info.messages == 50
        assert info.embeddings.stored == 10
        assert info.retention.vectors_dropped == 40
        assert info.retention.passes == 1
        # Full text still finds an old message; semantic grep no longer does.
        hits = brain.grep(GrepOptions("old3w5", rank=False))
        assert [h.snippet for h in hits if "old3w5" in h.snippet]
        semantic = brain.grep(GrepOptions("old note 3 old3w1 old3w2", mode="semantic"))
        assert all("new" in h.snippet for h in semantic)
        # A second pass has nothing left to drop.
        assert brain.retain().vectors_dropped == 0
    finally:
        brain.close()
    # Nothing is queued again and doctor counts none of them missing.
    found = doctor(db, _config(max_age_days=30))
    assert found.ok, found.to_dict()


def test_a_session_keys_own_age_overrides_the_default(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    config = _config(max_age_days=365, key_max_age_days=(("scratch", 2.0),))
    brain = _brain(db, config)
    try:
        brain.ingest("kept", _messages("k", 6, days_ago=10), session_key="work")
        brain.ingest("short", _messages("s", 6, days_ago=10), session_key="scratch")
        brain.ingest("plain", _messages("p", 6, days_ago=10))
        _embed_all(brain)
        assert brain.retain().vectors_dropped == 6
    finally:
        brain.close()
    assert _vectors_of(db, "short") == 0
    assert _vectors_of(db, "kept") == 6
    assert _vectors_of(db, "plain") == 6


def test_over_max_bytes_the_oldest_vectors_go_and_the_file_shrinks(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    brain = _brain(db, BrainConfig())
    try:
        for batch in range(6):
            brain.ingest(f"s{batch % 2}", _messages(f"b{batch}x", 500, days_ago=0))
        _embed_all(brain)
        brain.save()
        used = brain.info().db_bytes
    finally:
        brain.close()
    size_before = db.stat().st_size
    limit = used - 500_000  # about 1,400 int8 vectors (~360 bytes a row) must go
    brain = _brain(db, _config(max_bytes=limit))
    try:
        report = brain.retain()
        assert report.used_bytes <= limit
        assert not report.over_limit
        assert 1_000 <= report.vectors_dropped < 3_000
        assert report.pages_vacuumed > 0
        info = brain.info()
        assert info.messages == 3_000
        assert info.retention.bytes_reclaimed > 400_000
        assert info.retention.free_bytes < 1_000_000
    finally:
        brain.close()
    assert db.stat().st_size < size_before - 400_000
    # The oldest went first: the first batch has no vectors left, the last all of its.
    conn = apsw.Connection(str(db))
    try:
        kept = [
            int(r[0])
            for r in conn.execute(
                "SELECT m.id FROM vectors v JOIN messages m ON m.id = v.row_id "
                "WHERE v.kind = 'message' ORDER BY m.id"
            )
        ]
        dropped_max = conn.execute(
            "SELECT max(m.id) FROM messages m WHERE NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.kind = 'message' AND v.row_id = m.id)"
        ).fetchone()
    finally:
        conn.close()
    assert dropped_max is not None
    assert kept
    assert dropped_max[0] < kept[0]
    assert doctor(db, BrainConfig()).ok


def test_without_delete_messages_a_pass_never_deletes_a_message(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    brain = _brain(db, _config(max_age_days=1, max_bytes=4096))
    try:
        brain.ingest("s", _messages("old", 30, days_ago=40))
        _embed_all(brain)
        report = brain.retain()
        assert report.over_limit  # nothing left it may drop
        assert report.messages_deleted == 0
        assert brain.info().messages == 30
        assert brain.ingest("s", _messages("old", 30, days_ago=40)).duplicates == 30
    finally:
        brain.close()


def test_with_delete_messages_a_session_past_its_age_is_emptied_and_doctor_is_clean(
    tmp_path: Path,
) -> None:
    db = tmp_path / "brain.db"
    config = dataclasses.replace(
        BrainConfig(large_payload_tokens=100),
        retention=RetentionConfig(max_age_days=30, delete_messages=True),
    )
    brain = _brain(db, config)
    try:
        brain.ingest("gone", _messages("g", 60, days_ago=100, words=40), session_key="k")
        big = "\n".join(f"{i:04d} line of a long log" for i in range(200))
        brain.ingest(
            "gone",
            [MessageIn("user", big, client_id="big", created_at=iso(NOW - timedelta(days=99)))],
        )
        brain.compact("gone")
        brain.refresh_rollups()
        brain.ingest("stays", _messages("s", 20, days_ago=100))
        brain.ingest("stays", _messages("t", 2, days_ago=0))
        _embed_all(brain)
        assert list((db.parent / "brain.db-files").iterdir())
        report = brain.retain()
        assert report.sessions_deleted == 1
        assert report.messages_deleted == 61
        info = brain.info()
        assert info.messages == 22
        assert info.summaries == 0
        assert info.large_files == 0
        assert info.retention.messages_deleted == 61
        # The session's name stays, empty, and takes new messages.
        assert brain.ingest("gone", _messages("again", 2, days_ago=0)).ingested == 2
    finally:
        brain.close()
    assert not [p for p in (db.parent / "brain.db-files").iterdir() if p.is_file()]
    found = doctor(db, config)
    assert found.ok, found.to_dict()


def test_an_embedder_switch_does_not_queue_retained_messages_again(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    brain = _brain(db, _config(max_age_days=30))
    try:
        brain.ingest("s", _messages("old", 10, days_ago=90))
        brain.ingest("s", _messages("new", 5, days_ago=1))
        _embed_all(brain)
        brain.retain()
        with brain._access.locked() as store, store.transaction():
            enqueue_everything(store)
        assert brain.info().embeddings.pending == 5
    finally:
        brain.close()


def test_doctor_switches_an_old_database_to_incremental_vacuum(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    brain = _brain(db, BrainConfig())
    try:
        brain.ingest("s", _messages("m", 20, days_ago=0))
    finally:
        brain.close()
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA auto_vacuum = NONE")
    conn.execute("VACUUM")  # as every database made before schema v20
    assert conn.execute("PRAGMA auto_vacuum").fetchone() == (0,)
    conn.execute("UPDATE retention_totals SET n = 0 WHERE name = 'auto_vacuum'")
    conn.close()
    looked = doctor(db, BrainConfig())
    assert looked.check("vacuum").problems == ("not_incremental",)
    repaired = doctor(db, BrainConfig(), repair=True)
    assert repaired.ok, repaired.to_dict()
    assert repaired.check("vacuum").repaired
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA auto_vacuum").fetchone() == (2,)
    conn.close()
    brain = _brain(db, BrainConfig())
    try:
        assert brain.info().retention.auto_vacuum == "incremental"
    finally:
        brain.close()
