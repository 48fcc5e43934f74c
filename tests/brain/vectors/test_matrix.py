"""The index's rows in the matrix file beside the database (brain.vectors.matrix).

A new ``VectorIndex`` over the same database stands for a restarted process.
"""

from __future__ import annotations

import os
import random
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import numpy.typing as npt
import orjson
import pytest

from brain import MessageIn, Store
from brain.lcm.ingest import ingest
from brain.store.connection import open_store
from brain.vectors import matrix, quantise
from brain.vectors.ann import IVF
from brain.vectors.embedders import HashEmbedder
from brain.vectors.index import VectorIndex
from brain.vectors.writes import drop_vectors

DIM = 32
_WORDS = ("deploy", "alpha", "cat", "garden", "rain", "invoice", "budget", "kernel", "queue")


def _fill(store: Store, count: int, seed: int = 1, session: str = "s") -> None:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(_WORDS) for _ in range(6)) + f" {seed}-{i}" for i in range(count)]
    ingest(
        store, session, [MessageIn("user", t, client_id=f"{seed}-{i}") for i, t in enumerate(texts)]
    )


def _index(store: Store, dim: int = DIM, **kwargs: int | bool) -> VectorIndex:
    index = VectorIndex(dim, background=False, **kwargs)  # type: ignore[arg-type]
    index.check_identity(store, HashEmbedder(dim))
    while index.drain(store, HashEmbedder(dim), batch=500):
        pass
    return index


def _query(text: str, dim: int = DIM) -> npt.NDArray[np.float32]:
    vector: npt.NDArray[np.float32] = HashEmbedder(dim).embed([text])[0]
    return vector


def _vector_reads(store: Store) -> list[int]:
    """Starts of the id ranges of vectors read from the database, as they happen."""
    starts: list[int] = []

    def trace(sql: str, bindings: object) -> None:
        if sql.startswith("SELECT kind, row_id, conversation_id, vector FROM vectors"):
            assert isinstance(bindings, tuple)
            starts.append(int(bindings[0]))

    store.set_tracer(trace)
    return starts


def test_a_restarted_index_maps_its_file_and_reads_only_the_rows_added_since(
    store: Store,
) -> None:
    _fill(store, 40)
    first = _index(store)
    assert len(first.search(store, _query("garden rain"), 100)) == 40  # writes the file
    ingest(store, "s", [MessageIn("user", "zebra xylophone quartz", client_id="late")])
    assert first.drain(store, HashEmbedder(DIM)) == 1
    reads = _vector_reads(store)
    again = _index(store)
    hits = again.search(store, _query("zebra xylophone quartz"), 100)
    store.set_tracer(None)
    assert len(hits) == 41
    assert hits[0][1] == store.scalar("SELECT id FROM messages WHERE client_id = 'late'")
    assert reads
    assert all(start > 0 for start in reads)  # never the whole table again
    in_memory = _index(store, file=False)
    assert hits == in_memory.search(store, _query("zebra xylophone quartz"), 100)


def test_a_vector_deleted_after_the_file_was_written_is_never_returned(store: Store) -> None:
    _fill(store, 30)
    assert len(_index(store).search(store, _query("cat"), 100)) == 30
    gone = int(store.scalar("SELECT min(id) FROM messages"))
    with store.transaction():
        drop_vectors(store, "message", [gone])
    hits = _index(store).search(store, _query("cat"), 100)
    assert len(hits) == 29
    assert gone not in {row for _, row, _ in hits}


def test_a_file_copied_from_another_database_is_not_trusted(tmp_path: Path) -> None:
    one, two = open_store(tmp_path / "one.db"), open_store(tmp_path / "two.db")
    try:
        _fill(one, 20, seed=1)
        _fill(two, 20, seed=2)
        _index(one).search(one, _query("budget"), 100)
        shutil.copy(
            matrix.cache_path(one.path, ("message", "summary")),
            matrix.cache_path(two.path, ("message", "summary")),
        )
        got = _index(two).search(two, _query("budget"), 100)
        assert got == _index(two, file=False).search(two, _query("budget"), 100)
    finally:
        one.close()
        two.close()


def test_loading_and_indexing_allocate_well_under_one_float32_matrix(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks of 128 rows at 1,500 rows stand for chunks of 16k at 1M rows (and scoring
    # blocks of 64 rows for blocks of 1,024).
    monkeypatch.setattr(matrix, "_CHUNK", 128)
    monkeypatch.setattr(quantise, "_BLOCK", 64)
    dim, n = 256, 1500
    _fill(store, n)
    index = _index(store, dim=dim, exact_below=10**9)
    tracemalloc.start()
    try:
        assert len(index.search(store, _query("kernel", dim), 5)) == 5
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.5 * n * dim * 4


def test_a_restarted_index_searches_through_the_ivf_saved_beside_its_file(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(store, 90)
    first = _index(store, exact_below=10, nprobe=1)
    want = first.search(store, _query("invoice budget"), 10)  # loads, then builds the IVF
    want = first.search(store, _query("invoice budget"), 10)  # through the IVF

    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the IVF was built again")

    monkeypatch.setattr(IVF, "build", never)
    again = _index(store, exact_below=10, nprobe=1)
    assert again.search(store, _query("invoice budget"), 10) == want


def test_a_repeated_scoped_search_scans_the_base_for_its_scope_once_and_sees_changes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import brain.vectors.index as index_module

    _fill(store, 40, seed=1, session="s")
    _fill(store, 30, seed=2, session="t")
    index = _index(store)
    assert len(index.search(store, _query("cat"), 100)) == 70  # the base: the mapped file
    t = int(store.scalar("SELECT id FROM conversations WHERE session_id = 't'"))
    scans: list[int] = []
    real = index_module._matching

    def counted(rows: object, *args: object) -> object:
        scans.append(len(rows))  # type: ignore[arg-type]
        return real(rows, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module, "_matching", counted)
    first = index.search(store, _query("cat"), 100, conversations=[t])
    assert index.search(store, _query("cat"), 100, conversations=[t]) == first
    assert len(first) == 30
    assert [n for n in scans if n] == [70]  # the base once; the (empty) tail each time
    # Rows added after (the tail) are found; a row dropped (a new base) is not.
    ingest(store, "t", [MessageIn("user", "cat cat cat late", client_id="late")])
    assert index.drain(store, HashEmbedder(DIM)) == 1
    gone = first[0][1]
    with store.transaction():
        drop_vectors(store, "message", [gone])
    again = {row for _, row, _ in index.search(store, _query("cat"), 100, conversations=[t])}
    assert len(again) == 30
    assert gone not in again
    assert store.scalar("SELECT id FROM messages WHERE client_id = 'late'") in again


def _header(path: Path) -> dict[str, object]:
    import orjson

    with open(path, "rb") as f:
        header: dict[str, object] = orjson.loads(f.read(4096).rstrip(b" \x00"))
    return header


def test_an_ivf_over_a_file_stores_its_rows_in_list_order_and_scores_each_list_in_place(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(store, 200, seed=1, session="a")
    _fill(store, 100, seed=2, session="b")
    exact = _index(store, file=False)  # below its IVF threshold: exact
    index = _index(store, exact_below=50)
    queries = [_query(t) for t in ("garden rain", "invoice budget kernel", "deploy alpha 1-7")]
    index.search(store, queries[0], 10)  # loads, builds the IVF, writes the file in its order
    ivf = index._ivf
    assert ivf is not None
    assert ivf.listed
    assert index._path is not None
    assert _header(index._path)["layout"]
    assert index._layout == _header(index._path)["layout"]

    def no_gather(self: matrix.Rows, query: object, positions: object = None) -> object:
        assert positions is None, "a probe gathered rows by position"
        return original(self, query, positions)  # type: ignore[arg-type]

    original = matrix.Rows.score
    monkeypatch.setattr(matrix.Rows, "score", no_gather)
    # A restarted index maps the file and its saved IVF; probing every list is exact.
    every_list = _index(store, exact_below=50, nprobe=10**6)
    conv_b = store.scalar("SELECT id FROM conversations WHERE session_id = 'b'")

    def ranked(hits: list[tuple[str, int, float]]) -> list[tuple[float, str, int]]:
        # Scores agree to float32 rounding (blocks of another length).
        return sorted((-round(score, 5), kind, row_id) for kind, row_id, score in hits)

    for q in queries:
        assert ranked(every_list.search(store, q, 300)) == ranked(exact.search(store, q, 300))
        top = every_list.search(store, q, 10)
        assert [s for _, _, s in top] == pytest.approx(
            [s for _, _, s in exact.search(store, q, 10)]
        )
        monkeypatch.setattr(matrix.Rows, "score", original)  # a scope gathers its rows
        scoped = every_list.search(store, q, 5, conversations=[conv_b])
        assert ranked(scoped) == ranked(exact.search(store, q, 5, conversations=[conv_b]))
        monkeypatch.setattr(matrix.Rows, "score", no_gather)
    assert every_list._ivf is not None
    assert every_list._ivf.listed


def test_an_ivf_saved_for_another_order_of_the_same_rows_is_not_used(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A crash between writing the file in a new list order and saving that order's IVF
    # leaves the old IVF beside it, with the same rows (key) but other positions.
    _fill(store, 90)
    first = _index(store, exact_below=10, nprobe=1)
    first.search(store, _query("invoice budget"), 10)
    path, key, ivf = first._path, first._base_key, first._ivf
    assert path is not None
    assert key is not None
    assert ivf is not None
    layout = first._layout
    assert matrix.load_ivf(path, key, 90, layout) is not None
    matrix.save_ivf(path, ivf, 90, key, "an-order-since-replaced")
    assert matrix.load_ivf(path, key, 90, layout) is None
    builds: list[int] = []
    build = IVF.build

    def counted(n: int, *args: object, **kwargs: object) -> IVF:
        builds.append(n)
        return build(n, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(IVF, "build", counted)
    again = _index(store, exact_below=10, nprobe=10**6)
    hits = again.search(store, _query("invoice budget"), 10)
    assert builds == [90]  # its own, not the one saved for another order
    exact = _index(store, file=False).search(store, _query("invoice budget"), 10)
    assert [h[:2] for h in hits][:3] == [h[:2] for h in exact][:3]
    assert again._ivf is not None
    assert again._ivf.listed


def test_a_fifo_at_the_matrix_path_is_treated_as_absent_and_rebuilt(store: Store) -> None:
    _fill(store, 20)
    path = matrix.cache_path(store.path, ("message", "summary"))
    os.mkfifo(path)  # an open or read of it would block forever
    got = _index(store).search(store, _query("budget"), 100)
    assert got == _index(store, file=False).search(store, _query("budget"), 100)
    assert path.is_file()


def test_a_matrix_file_with_a_corrupted_kind_code_is_rebuilt_not_an_error(store: Store) -> None:
    _fill(store, 20)
    expected = _index(store).search(store, _query("budget"), 100)  # writes the file
    path = matrix.cache_path(store.path, ("message", "summary"))
    data = bytearray(path.read_bytes())
    capacity = int(orjson.loads(bytes(data[:4096]).rstrip(b" \x00"))["capacity"])
    kinds_at = matrix._offsets(capacity, DIM)["kinds"]
    data[kinds_at : kinds_at + 20] = b"\x7f" * 20  # no such kind
    path.write_bytes(bytes(data))
    assert _index(store).search(store, _query("budget"), 100) == expected


def test_a_matrix_file_truncated_under_a_mapping_is_rebuilt_not_a_crash(store: Store) -> None:
    _fill(store, 40)
    index = _index(store)
    expected = index.search(store, _query("garden"), 100)  # maps the file
    path = matrix.cache_path(store.path, ("message", "summary"))
    with open(path, "r+b") as f:
        f.truncate(4096)  # same inode, the mapped pages gone: a read would be SIGBUS
    assert index.search(store, _query("garden"), 100) == expected  # nothing written since
    assert path.stat().st_size > 4096  # rebuilt
