"""The vector index: queue filled by ingest, drained in batches, semantic and hybrid grep."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from brain import Brain, EmbedderMismatch, MessageIn
from brain.recall.search import GrepOptions
from brain.vectors.embedders import (
    HashEmbedder,
    OpenAIEmbedder,
    OpenAIEmbedderConfig,
    StaticEmbedder,
)
from brain.vectors.index import VectorIndex
from tests.openai_server import OpenAIServer


def _open(db_path: Path, dim: int = 64, *, may_switch: bool = True) -> Brain:
    """An engine on ``db_path`` embedding with ``HashEmbedder(dim)``.

    ``may_switch`` (as ``brain serve`` given an embedder explicitly): this module's
    tests change embedders on purpose.
    """
    brain = Brain(db_path, may_switch_embedder=may_switch)
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
    assert lengths == {32 + 4}  # int8 codes and a float32 scale (v19)
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


class CountingEmbedder:
    """A HashEmbedder that records every text it is asked to embed."""

    def __init__(self, dim: int = 64) -> None:
        self._inner = HashEmbedder(dim)
        self.name, self.dim = self._inner.name, dim
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.seen.extend(texts)
        return self._inner.embed(texts)


def test_identical_text_is_embedded_once(db_path: Path) -> None:
    counting = CountingEmbedder()
    brain = Brain(db_path, embedder=counting)
    same = "the deploy of service alpha failed"
    brain.ingest("s", [MessageIn("user", same, client_id=f"u{i}") for i in range(3)])
    brain.ingest("t", [MessageIn("user", same, client_id="x"), MessageIn("user", "other")])
    assert brain.embed_pending(batch=100) == 5
    assert sorted(counting.seen) == sorted([same, "other"])
    hits = brain.grep(GrepOptions(same, mode="semantic", limit=10))
    assert len(hits) == 5
    assert len({round(h.score, 5) for h in hits if h.snippet.startswith("the deploy")}) == 1
    assert brain.store.scalar("SELECT count(*) FROM vectors WHERE text_hash IS NULL") == 0
    brain.close()


def test_a_text_embedded_in_an_earlier_batch_reuses_its_stored_vector(db_path: Path) -> None:
    counting = CountingEmbedder()
    brain = Brain(db_path, embedder=counting)
    brain.ingest("s", [MessageIn("user", "hello there", client_id="a")])
    assert brain.embed_pending() == 1
    brain.ingest("t", [MessageIn("user", "hello there", client_id="b")])
    brain.ingest("t", [MessageIn("user", "hello there", client_id="c")])
    assert brain.embed_pending() == 2
    assert counting.seen == ["hello there"]
    vectors = {r[0] for r in brain.store.execute("SELECT vector FROM vectors")}
    assert len(vectors) == 1
    assert brain.embeddings_pending() == 0
    brain.close()


def test_a_change_of_embedder_embeds_each_distinct_text_once_again(db_path: Path) -> None:
    brain = _open(db_path)
    brain.ingest("s", [MessageIn("user", "same words", client_id=f"u{i}") for i in range(4)])
    _drain(brain)
    counting = CountingEmbedder(dim=32)
    brain.embedder = counting
    assert brain.embeddings_pending() == 4  # stale vectors are not reused across embedders
    _drain(brain)
    assert counting.seen == ["same words"]
    lengths = {len(r[0]) for r in brain.store.execute("SELECT vector FROM vectors")}
    assert lengths == {32 + 4}  # int8 codes and a float32 scale (v19)
    brain.close()


def test_info_shows_re_embedding_progress_after_an_embedder_change(db_path: Path) -> None:
    brain = _open(db_path, dim=64)
    _fill(brain)
    before = brain.info().embeddings
    assert (before.embedder, before.dim, before.pending) == ("hash-v1-64", 64, 4)
    _drain(brain)
    done = brain.info().embeddings
    assert (done.stored, done.pending, done.stored_embedder) == (4, 0, "hash-v1-64")
    brain.embedder = HashEmbedder(32)
    assert brain.embed_pending(batch=1) == 1
    midway = brain.info().embeddings
    assert (midway.embedder, midway.stored, midway.pending) == ("hash-v1-32", 1, 3)
    assert midway.stored_embedder == "hash-v1-32"
    _drain(brain)
    assert (brain.info().embeddings.stored, brain.info().embeddings.pending) == (4, 0)
    brain.close()


def test_a_process_whose_embedder_was_replaced_by_another_refuses_to_mix(db_path: Path) -> None:
    first = _open(db_path, dim=64)
    _fill(first)
    _drain(first)
    assert first.grep(GrepOptions("alpha deploy", mode="semantic"))
    first.ingest("s", [MessageIn("user", "queued before the switch", client_id="late")])

    second = _open(db_path, dim=32)  # another process, started with another embedder
    assert second.embeddings_pending() == 5  # it takes the index over: everything requeued

    with pytest.raises(EmbedderMismatch, match="hash-v1-32"):
        first.embed_pending()
    with pytest.raises(EmbedderMismatch):
        first.grep(GrepOptions("alpha deploy", mode="semantic"))
    assert first.info().embeddings.stored_embedder == "hash-v1-32"
    assert first.grep(GrepOptions("alpha deploy"))  # full text does not need vectors

    _drain(second)
    lengths = {len(r[0]) for r in second.store.execute("SELECT vector FROM vectors")}
    assert lengths == {32 + 4}  # int8 codes and a float32 scale (v19)
    assert second.grep(GrepOptions("alpha deploy", mode="semantic"))
    first.close()
    second.close()


def test_an_engine_not_allowed_to_switch_refuses_another_embedder_and_changes_nothing(
    db_path: Path,
) -> None:
    first = _open(db_path, dim=64)
    _fill(first)
    _drain(first)
    other = _open(db_path, dim=32, may_switch=False)
    with pytest.raises(EmbedderMismatch, match="hash-v1-64") as refused:
        other.grep(GrepOptions("alpha deploy", mode="semantic"))
    assert refused.value.data["stored_embedder"] == "hash-v1-64"
    with pytest.raises(EmbedderMismatch):
        other.embed_pending()
    done = first.info().embeddings
    assert (done.stored, done.pending, done.stored_embedder) == (4, 0, "hash-v1-64")
    assert first.grep(GrepOptions("alpha deploy", mode="semantic"))
    first.close()
    other.close()


def test_a_search_that_embeds_before_it_searches_embeds_only_its_own_scope(
    db_path: Path,
) -> None:
    brain = _open(db_path)
    _fill(brain)  # three rows in session s, one in t
    brain.embed_before_search = 100
    hits = brain.grep(GrepOptions("alpha deploy", mode="semantic"), session="s")
    assert [h.id for h in hits][:1] == ["u1"]
    assert brain.embeddings_pending() == 1  # t's row waits for the background embedder
    brain.close()


def test_a_batch_taken_before_the_switch_is_not_written_after_it(db_path: Path) -> None:
    first = _open(db_path, dim=64)
    _fill(first)
    index = VectorIndex(64)  # what first.embed_pending does, cut in two around the switch
    index.check_identity(first.store, first.embedder)
    pending = index.take(first.store, 10)
    vectors = first.embedder.embed(list(pending.to_embed))
    second = _open(db_path, dim=32)
    second.embeddings_pending()
    with pytest.raises(EmbedderMismatch):
        index.put(first.store, pending, vectors)
    assert second.store.scalar("SELECT count(*) FROM vectors") == 0
    assert second.embeddings_pending() == 4
    first.close()
    second.close()


def test_a_provider_embedder_without_a_configured_dim_learns_it_before_indexing(
    db_path: Path,
) -> None:
    with OpenAIServer(embed=HashEmbedder(48)) as server:
        embedder = OpenAIEmbedder(OpenAIEmbedderConfig(base_url=server.base_url, model="e5"))
        brain = Brain(db_path, embedder=embedder)
        assert brain.info().embeddings.dim is None  # info never calls the provider
        _fill(brain)
        assert _drain(brain) == 4
        assert brain.info().embeddings.dim == 48
        assert (
            brain.store.scalar("SELECT value FROM meta WHERE key = 'embedder_name'") == "openai:e5"
        )
        hits = brain.grep(GrepOptions("cat sleeping", mode="semantic"), session="s")
        assert hits[0].id == "u2"
        brain.close()
        embedder.close()


def _question_and_reply(brain: Brain) -> None:
    # The filler is close to the query by character trigrams (the hash embedder's
    # features) but shares none of its words, so only the vector side ranks it.
    brain.ingest(
        "s",
        [
            MessageIn("user", "Which city did you move to last spring?", client_id="ask"),
            MessageIn("assistant", "Lisbon, and I love the trams.", client_id="reply"),
            *(
                MessageIn("user", f"cityscapes springtime removals {i}", client_id=f"f{i}")
                for i in range(12)
            ),
        ],
    )


def test_hybrid_lifts_the_reply_next_to_the_matching_turn(db_path: Path) -> None:
    brain = _open(db_path)
    _question_and_reply(brain)
    _drain(brain)
    lexical = [h.id for h in brain.grep(GrepOptions("city moved spring", limit=3), session="s")]
    assert "reply" not in lexical  # no word of the query is in the reply
    # The weighted fusion's own lift (the ranking stage reorders on top of it).
    options = GrepOptions("city moved spring", mode="hybrid", limit=3, rank=False)
    hits = brain.grep(options, session="s")
    assert [h.id for h in hits][:2] == ["ask", "reply"]
    reply = hits[1]
    assert reply.role == "assistant"
    assert reply.snippet.startswith("Lisbon")
    brain.close()


def test_a_suppressed_neighbour_is_not_lifted_into_the_results(db_path: Path) -> None:
    brain = _open(db_path)
    _question_and_reply(brain)
    _drain(brain)
    brain.suppress(["reply"], session="s")
    hits = brain.grep(GrepOptions("city moved spring", mode="hybrid", limit=50), session="s")
    assert "reply" not in {h.id for h in hits}
    assert hits[0].id == "ask"
    brain.close()


def test_a_stored_vector_costs_little_more_than_its_bytes_on_disk(db_path: Path) -> None:
    brain = Brain(db_path)  # the shipped 256-dim model: 1 KiB per vector
    brain.ingest("s", [MessageIn("user", f"note {i} on topic {i % 37}") for i in range(400)])
    while brain.embed_pending(batch=500):
        pass
    pages = brain.store.scalar("SELECT sum(pgsize) FROM dbstat WHERE name = 'vectors'")
    assert pages / 400 < 1_600  # a 1 KiB blob kept in its row, not on an overflow page
    brain.close()


def test_queued_rows_whose_message_is_gone_are_dequeued_and_the_rest_embedded(
    db_path: Path,
) -> None:
    # The background loop finds its batch on a read connection; rows with nothing
    # behind them are dequeued when the batch is stored, even a batch of only those.
    brain = _open(db_path)
    try:
        brain.ingest("s", [MessageIn("user", "still here")])
        brain.store.execute(
            "INSERT INTO embed_queue (kind, row_id) VALUES ('message', -2), ('message', -1)"
        )
        assert brain.embeddings_pending() == 3
        assert brain.embed_pending(batch=2) == 1  # the two gone rows, then the real one
        assert brain.embeddings_pending() == 0
        assert brain.embed_pending(batch=2) == 0
    finally:
        brain.close()
