"""The IVF index (brain.vectors.ann) and the vector index's use of it above its exact threshold.

The IVF path is forced with a tiny ``exact_below``; nothing here needs 200k rows.
"""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import MessageIn, Store
from brain.lcm.ingest import ingest
from brain.vectors import index as index_module
from brain.vectors.ann import IVF, top_k
from brain.vectors.embedders import HashEmbedder
from brain.vectors.index import VectorIndex

DIM = 32
_VOCAB_TEXT = (
    "deploy service alpha failed database migration timed out cat sleeps sun garden "
    "rain invoice customer meeting calendar budget report kernel panic retry queue "
    "worker lock guitar concert ticket hiking trail mountain recipe pasta tomato"
)
_VOCAB = tuple(_VOCAB_TEXT.split())


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> npt.NDArray[np.float32]:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(rng.randint(3, 9)))


def _fill(store: Store, count: int, seed: int = 1, sessions: int = 3) -> None:
    rng = random.Random(seed)
    for s in range(sessions):
        ingest(
            store,
            f"s{s}",
            [
                MessageIn("user", _text(rng), client_id=f"{seed}-{s}-{i}")
                for i in range(count // sessions)
            ],
        )


def _index(store: Store, **kwargs: int | bool | None) -> VectorIndex:
    index = VectorIndex(DIM, **kwargs)  # type: ignore[arg-type]
    index.check_identity(store, HashEmbedder(DIM))
    while index.drain(store, HashEmbedder(DIM), batch=64):
        pass
    return index


def _exact(store: Store) -> VectorIndex:
    return _index(store, exact_below=10**9)


def _query(text: str) -> npt.NDArray[np.float32]:
    vector: npt.NDArray[np.float32] = HashEmbedder(DIM).embed([text])[0]
    return vector


def _conversation(store: Store, session: str) -> int:
    return int(store.scalar("SELECT id FROM conversations WHERE session_id = ?", (session,)))


# -- brain.vectors.ann ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 80),
    dim=st.integers(2, 8),
    lists=st.integers(1, 12),
    k=st.integers(1, 20),
    seed=st.integers(0, 2**16),
)
def test_ivf_probing_every_list_returns_the_exact_top_k(
    n: int, dim: int, lists: int, k: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    matrix = _unit_rows(rng, n, dim)
    query = _unit_rows(rng, 1, dim)[0]
    ivf = IVF.build(n, lambda p: matrix[p], lists=lists, seed=seed)
    positions, scores = ivf.search(lambda p: matrix[p] @ query, query, k, nprobe=ivf.lists)
    exact = matrix @ query
    assert sorted(ivf.order.tolist()) == list(range(n))
    assert len(positions) == min(k, n) == len(set(positions.tolist()))
    np.testing.assert_allclose(scores, np.sort(exact)[::-1][: min(k, n)], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(matrix[positions] @ query, scores, rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), extra=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_an_extended_ivf_still_covers_every_row_exactly_once(n: int, extra: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    first = _unit_rows(rng, n, 6)
    ivf = IVF.build(n, lambda p: first[p], seed=seed)
    combined = np.concatenate([first, _unit_rows(rng, extra, 6)])
    grown = ivf.extended(n + extra, lambda p: combined[p])
    query = _unit_rows(rng, 1, 6)[0]
    assert grown.rows == n + extra
    assert sorted(grown.order.tolist()) == list(range(n + extra))
    _, scores = grown.search(lambda p: combined[p] @ query, query, n + extra, grown.lists)
    exact = combined @ query
    np.testing.assert_allclose(scores, np.sort(exact)[::-1], rtol=1e-5, atol=1e-6)


def test_top_k_orders_best_first_and_handles_k_beyond_the_length() -> None:
    scores = np.asarray([0.1, 0.9, 0.5, 0.9], dtype=np.float32)
    assert top_k(scores, 2).tolist() == [1, 3]
    assert top_k(scores, 10).tolist() == [1, 3, 2, 0]
    assert top_k(scores, 0).tolist() == []


# -- VectorIndex above its exact threshold -------------------------------------------


def test_building_an_ivf_allocates_less_than_the_int8_rows_it_indexes() -> None:
    # A cold start builds the IVF while the matrix is mapped: its scratch (a float32
    # sample, rows x lists scores) counted on top of the loading peak (1.45x at 1M).
    import tracemalloc

    n, dim = 100_000, 64
    rows = _unit_rows(np.random.default_rng(3), n, dim)
    tracemalloc.start()
    try:
        ivf = IVF.build(n, lambda p: rows[p])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ivf.rows == n
    assert peak < n * dim  # the int8 codes' bytes; a float32 sample alone is 3.2 MB


def test_the_ivf_path_probing_every_list_answers_like_the_exact_path(store: Store) -> None:
    _fill(store, 90)
    ivf = _index(store, exact_below=10, nprobe=10_000, background=False)
    exact = _exact(store)
    for text in ("deploy failed", "cat sleeps in the sun", "pasta tomato recipe"):
        got = ivf.search(store, _query(text), 15)
        want = exact.search(store, _query(text), 15)
        # Equal up to float rounding: BLAS sums a sub-matrix's products in another order.
        assert [s for _, _, s in got] == pytest.approx([s for _, _, s in want], abs=1e-6)


def test_rows_appended_after_the_build_are_searched_exactly_in_the_tail(store: Store) -> None:
    _fill(store, 90)
    index = _index(store, exact_below=10, nprobe=1, background=False)
    assert index.search(store, _query("anything"), 5)  # builds the IVF over 90 rows
    ingest(store, "late", [MessageIn("user", "zebra xylophone quartz", client_id="new")])
    assert index.drain(store, HashEmbedder(DIM)) == 1
    hits = index.search(store, _query("zebra xylophone quartz"), 3)
    new_id = store.scalar("SELECT id FROM messages WHERE client_id = 'new'")
    assert hits[0][1] == new_id
    assert hits[0][2] > 0.99


def test_scoped_search_is_exact_and_never_leaves_its_conversations(store: Store) -> None:
    _fill(store, 90)
    index = _index(store, exact_below=10, nprobe=1, background=False)
    exact = _exact(store)
    scope = [_conversation(store, "s1")]
    both = [_conversation(store, "s0"), _conversation(store, "s2")]
    members = {
        c: {
            int(r[0])
            for r in store.execute("SELECT id FROM messages WHERE conversation_id = ?", (c,))
        }
        for c in (*scope, *both)
    }
    for conversations in (scope, both):
        got = index.search(store, _query("budget report meeting"), 10, conversations)
        want = exact.search(store, _query("budget report meeting"), 10, conversations)
        # Equal up to float rounding: BLAS sums a sub-matrix's products in another order.
        assert [s for _, _, s in got] == pytest.approx([s for _, _, s in want], abs=1e-6)
        allowed = set().union(*(members[c] for c in conversations))
        assert {r for _, r, _ in got} <= allowed


def test_k_beyond_the_row_count_returns_every_row_once_best_first(store: Store) -> None:
    _fill(store, 30)
    index = _index(store, exact_below=10, background=False)
    hits = index.search(store, _query("guitar concert"), 1_000)
    assert len(hits) == 30 == len({r for _, r, _ in hits})
    assert [s for _, _, s in hits] == sorted((s for _, _, s in hits), reverse=True)


def test_an_empty_index_finds_nothing(store: Store) -> None:
    index = _index(store, exact_below=0, background=False)
    assert index.search(store, _query("anything"), 10) == []
    assert index.search(store, _query("anything"), 10, [1]) == []


def test_a_requeued_row_never_shows_its_stale_vector_after_the_reload(store: Store) -> None:
    _fill(store, 60)
    index = _index(store, exact_below=10, nprobe=10_000, background=False)
    assert index.search(store, _query("deploy"), 5)
    row = int(store.scalar("SELECT min(id) FROM messages"))
    with store.transaction():
        store.execute("UPDATE messages SET content = 'zebra xylophone quartz' WHERE id = ?", (row,))
        store.execute("INSERT INTO embed_queue (kind, row_id) VALUES ('message', ?)", (row,))
    assert index.drain(store, HashEmbedder(DIM)) == 1
    hits = index.search(store, _query("zebra xylophone quartz"), 100)
    assert len(hits) == 60 == len({r for _, r, _ in hits})
    assert hits[0][1] == row
    assert hits[0][2] > 0.99


class _Renamed(HashEmbedder):
    """The same vectors under another name: to the index, another embedder."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.name = "renamed-hash"


def test_an_embedder_change_by_another_index_empties_this_one(store: Store) -> None:
    _fill(store, 60)
    index = _index(store, exact_below=10, background=False)
    assert len(index.search(store, _query("deploy"), 100)) == 60
    VectorIndex(DIM).check_identity(store, _Renamed(DIM), may_switch=True)  # requeues all
    assert index.search(store, _query("deploy"), 100) == []


def test_a_background_build_leaves_searches_answering_and_then_serves_them(store: Store) -> None:
    _fill(store, 90)
    index = _index(store, exact_below=10, nprobe=10_000)
    exact = _exact(store)
    query = _query("hiking trail mountain")
    first = index.search(store, query, 10)  # exact (or IVF, if the build already ended)
    assert index.wait_idle(timeout=30)
    want = pytest.approx([s for _, _, s in exact.search(store, query, 10)], abs=1e-6)
    assert [s for _, _, s in first] == want
    assert [s for _, _, s in index.search(store, query, 10)] == want


def test_an_approximate_search_uses_the_ivf_lists_past_approximate_below_and_others_stay_exact(
    store: Store,
) -> None:
    # The graph's index: a taught node's neighbours come from the lists at 100k nodes,
    # a query's seeds stay exact below exact_below (IVF recall of the top 100 was 0.75).
    _fill(store, 90)
    index = _index(store, exact_below=10**9, approximate_below=10, nprobe=1, background=False)
    exact = _exact(store)
    query = _query("deploy failed")
    assert index.search(store, query, 15) == exact.search(store, query, 15)
    assert index._ivf is not None  # kept from approximate_below: built by the first search

    approximate = index.search(store, query, 15, approximate=True)

    assert len(approximate) < 15  # one probed list of ~9 rows: not every row was scored
    assert index.search(store, query, 15) == exact.search(store, query, 15)


def test_a_large_scope_searched_again_answers_from_its_gathered_rows_like_the_first_time(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every scope counts as large, and the gathered rows of one scope fill the budget.
    monkeypatch.setattr(index_module, "_SCOPE_GATHER_FROM", 1)
    monkeypatch.setattr(index_module, "_SCOPE_CODES_HELD", 30 * (DIM + 4))
    _fill(store, 90)
    index = _index(store, exact_below=10, nprobe=1, background=False)
    exact = _exact(store)
    query = _query("budget report meeting")
    scopes = ([_conversation(store, "s1")], [_conversation(store, "s0")])

    def same(conversations: list[int]) -> None:
        got = index.search(store, query, 10, conversations)
        want = exact.search(store, query, 10, conversations)
        assert [r for _, r, _ in got] == [r for _, r, _ in want]
        assert [s for _, _, s in got] == pytest.approx([s for _, _, s in want], abs=1e-6)

    for conversations in (*scopes, *scopes):  # each gathered, then the other evicts it
        same(conversations)
    # New rows of the scope, folded into a new base: gathered again from it.
    ingest(store, "s1", [MessageIn("user", "budget report meeting", client_id="late")])
    assert index.drain(store, HashEmbedder(DIM)) == 1
    for _ in range(30):
        ingest(store, "s2", [MessageIn("user", _text(random.Random(_)), client_id=f"f{_}")])
    while index.drain(store, HashEmbedder(DIM), batch=64):
        pass
    late = int(store.scalar("SELECT id FROM messages WHERE client_id = 'late'"))
    assert index.search(store, query, 1, scopes[0])[0][1] == late
    same(scopes[0])


def test_the_first_search_scores_before_a_background_build_starts(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold start's first answer does not share the CPU with the IVF build it makes due.
    _fill(store, 90)
    index = _index(store, exact_below=10)
    building_while_scoring: list[bool] = []
    real_top_k = index_module.top_k

    def top_k(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
        building_while_scoring.append(not index.wait_idle(timeout=0))
        return real_top_k(scores, k)

    monkeypatch.setattr(index_module, "top_k", top_k)
    assert index.search(store, _query("hiking trail mountain"), 5)
    assert building_while_scoring
    assert not any(building_while_scoring)
    assert index.wait_idle(timeout=30)
    monkeypatch.setattr(index_module, "top_k", real_top_k)
    assert index.search(store, _query("hiking trail mountain"), 5)  # now through the IVF


def test_the_graph_index_builds_its_lists_after_its_first_search_before_any_teach_asks(
    store: Store,
) -> None:
    # At 100k nodes the lists took a second to build: made at the first teach, the
    # teaches meanwhile scanned every row (a daemon's first minute of teaches).
    _fill(store, 90)
    index = _index(store, exact_below=10**9, approximate_below=10, nprobe=1)
    exact = _exact(store)
    query = _query("deploy failed")
    assert index.search(store, query, 15) == exact.search(store, query, 15)
    assert index.wait_idle(timeout=30)
    assert index._ivf is not None  # no approximate search yet
    assert len(index.search(store, query, 15, approximate=True)) < 15  # from the lists


def test_lists_only_approximate_searches_use_wait_for_a_pause_in_the_exact_searches(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A daemon's warm-up search started the graph's build as its first query came in.
    monkeypatch.setattr("brain.vectors.index.QUIET_S", 3_600.0)  # no pause ever comes...
    monkeypatch.setattr("brain.vectors.index.QUIET_MAX_S", 1.0)  # ...so it waits this long
    _fill(store, 90)
    index = _index(store, exact_below=10**9, approximate_below=10, nprobe=1)
    query = _query("deploy failed")
    index.search(store, query, 15)
    index.search(store, query, 15)
    assert index._ivf is None  # not built while the queries keep coming
    assert index.wait_idle(timeout=30)
    assert index._ivf is not None
