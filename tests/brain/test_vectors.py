"""The vector index: queue filled by ingest, drained in batches, semantic and hybrid grep."""

from __future__ import annotations

from pathlib import Path

from brain import Brain, MessageIn
from brain.embedders import HashEmbedder, StaticEmbedder
from brain.search import GrepOptions


def _open(db_path: Path, dim: int = 64) -> Brain:
    brain = Brain(db_path)
    brain.embedder = HashEmbedder(dim)
    return brain


def _drain(brain: Brain) -> int:
    total = 0
    while (n := brain.embed_pending(batch=2)) > 0:
        total += n
    return total


def _fill(brain: Brain) -> None:
    brain.ingest(
        "s",
        [
            MessageIn("user", "the deploy of service alpha failed", client_id="u1"),
            MessageIn("assistant", "database migration timed out", client_id="a1"),
            MessageIn("user", "my cat likes sleeping in the sun", client_id="u2"),
        ],
    )
    brain.ingest("t", [MessageIn("user", "alpha deploy notes", client_id="x1")])


def test_ingest_queues_messages_and_draining_embeds_them(db_path: Path) -> None:
    brain = _open(db_path)
    _fill(brain)
    assert brain.embeddings_pending() == 4
    assert _drain(brain) == 4
    assert brain.embeddings_pending() == 0
    assert brain.store.scalar("SELECT count(*) FROM vectors") == 4
    brain.close()


def test_a_restart_resumes_the_queue_where_it_stopped(db_path: Path) -> None:
    brain = _open(db_path)
    _fill(brain)
    assert brain.embed_pending(batch=1) == 1
    brain.close()
    again = _open(db_path)
    assert again.embeddings_pending() == 3
    assert _drain(again) == 3
    assert again.store.scalar("SELECT count(*) FROM vectors") == 4
    again.close()


def test_a_different_embedder_re_embeds_everything_and_never_mixes(db_path: Path) -> None:
    brain = _open(db_path, dim=64)
    _fill(brain)
    _drain(brain)
    brain.embedder = HashEmbedder(32)
    assert brain.embeddings_pending() == 4
    assert brain.store.scalar("SELECT count(*) FROM vectors") == 0
    _drain(brain)
    lengths = {len(r[0]) for r in brain.store.execute("SELECT vector FROM vectors")}
    assert lengths == {32 * 4}
    hits = brain.grep(GrepOptions("alpha deploy", mode="semantic"))
    assert hits
    brain.close()


def test_semantic_finds_the_nearest_message_and_reports_only_embedded_rows(db_path: Path) -> None:
    brain = _open(db_path)
    _fill(brain)
    assert brain.grep(GrepOptions("cat sleeping", mode="semantic")) == []
    _drain(brain)
    hits = brain.grep(GrepOptions("cat sleeping", mode="semantic"), session="s")
    assert hits[0].id == "u2"
    brain.close()


def test_semantic_with_the_static_embedder_finds_a_paraphrase(db_path: Path) -> None:
    brain = Brain(db_path)
    brain.embedder = StaticEmbedder()
    brain.ingest(
        "s",
        [
            MessageIn("user", "I adopted a puppy last week", client_id="dog"),
            MessageIn("user", "The quarterly tax report is due", client_id="tax"),
        ],
    )
    _drain(brain)
    hits = brain.grep(GrepOptions("new pet dog", mode="semantic"), session="s")
    assert hits[0].id == "dog"
    brain.close()


def test_hybrid_returns_the_union_of_both_rankings_with_either_fusion(db_path: Path) -> None:
    brain = _open(db_path)
    _fill(brain)
    _drain(brain)
    for fusion in ("rrf", "weighted"):
        options = GrepOptions("alpha sleeping", mode="hybrid", fusion=fusion)  # type: ignore[arg-type]
        hits = brain.grep(options, session="s")
        ids = [h.id for h in hits]
        assert {"u1", "u2"} <= set(ids)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    brain.close()


def test_scope_and_suppression_are_respected(db_path: Path) -> None:
    brain = _open(db_path)
    _fill(brain)
    _drain(brain)
    in_t = brain.grep(GrepOptions("alpha deploy", mode="semantic"), session="t")
    assert {h.session for h in in_t} == {"t"}
    brain.suppress(["u1"], session="s")
    for mode in ("semantic", "hybrid"):
        hits = brain.grep(GrepOptions("alpha deploy", mode=mode), session="s")  # type: ignore[arg-type]
        assert "u1" not in {h.id for h in hits}
    brain.close()


def test_semantic_applies_the_time_bounds(db_path: Path) -> None:
    brain = _open(db_path)
    brain.ingest(
        "s",
        [
            MessageIn(
                "user", "alpha deploy one", client_id="old", created_at="2026-01-01T00:00:00Z"
            ),
            MessageIn(
                "user", "alpha deploy two", client_id="new", created_at="2026-03-01T00:00:00Z"
            ),
        ],
    )
    _drain(brain)
    options = GrepOptions("alpha deploy", mode="semantic", since="2026-02-01T00:00:00Z")
    assert [h.id for h in brain.grep(options, session="s")] == ["new"]
    options = GrepOptions("alpha deploy", mode="semantic", before="2026-02-01T00:00:00Z")
    assert [h.id for h in brain.grep(options, session="s")] == ["old"]
    brain.close()


def test_a_second_process_sees_vectors_the_first_one_wrote(db_path: Path) -> None:
    writer, reader = _open(db_path), _open(db_path)
    _fill(writer)
    assert reader.grep(GrepOptions("cat sleeping", mode="semantic")) == []
    _drain(writer)
    hits = reader.grep(GrepOptions("cat sleeping", mode="semantic"), session="s")
    assert hits[0].id == "u2"
    writer.ingest("s", [MessageIn("user", "the cat is sleeping again", client_id="u3")])
    _drain(writer)
    hits = reader.grep(GrepOptions("cat is sleeping again", mode="semantic"), session="s")
    assert hits[0].id == "u3"
    writer.close()
    reader.close()


def test_a_row_queued_again_is_replaced_not_duplicated_in_search(db_path: Path) -> None:
    brain = _open(db_path)
    _fill(brain)
    _drain(brain)
    brain.grep(GrepOptions("cat", mode="semantic"))  # load the hot matrix
    brain.store.execute("INSERT INTO embed_queue (kind, row_id) SELECT 'message', id FROM messages")
    _drain(brain)
    hits = brain.grep(GrepOptions("cat sleeping", mode="semantic"), session="s")
    assert len({h.id for h in hits}) == len(hits) == 3
    brain.close()
