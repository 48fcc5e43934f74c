"""The static embedder's large batches made by a child process (``brain.vectors.embed_child``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.vectors.embed_child import MIN_BATCH, ChildStaticEmbedder
from brain.vectors.embedders import StaticEmbedder, embeds_in_process

TEXTS = [
    f"Turn {i}: the deploy of service {i % 9} moved to Friday after ticket {4000 + i}."
    for i in range(40)
] + ["", "   \n", "héllo wörld ☃ naïve café", "x" * 300, "Ünïcödé and ascii mixed 42"]


@pytest.fixture(scope="module")
def child() -> Iterator[ChildStaticEmbedder]:
    embedder = ChildStaticEmbedder(min_batch=1)
    try:
        yield embedder
    finally:
        embedder.close()


@pytest.fixture(scope="module")
def here() -> StaticEmbedder:
    return StaticEmbedder()


def test_it_is_the_static_embedder_by_name_dim_and_kind() -> None:
    embedder = ChildStaticEmbedder()
    try:
        assert (embedder.name, embedder.dim) == (StaticEmbedder.name, StaticEmbedder.dim)
        assert embeds_in_process(embedder)  # a query is still embedded in the answering thread
    finally:
        embedder.close()


def test_the_child_gives_the_vectors_this_process_gives(
    child: ChildStaticEmbedder, here: StaticEmbedder
) -> None:
    rows = child.embed(TEXTS)
    assert child.pid is not None
    assert child.pid != os.getpid()
    assert rows.dtype == np.float32
    assert rows.flags.writeable
    assert np.array_equal(rows, here.embed(TEXTS))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=12))
def test_any_texts_get_the_same_vectors_from_the_child(
    child: ChildStaticEmbedder, here: StaticEmbedder, texts: list[str]
) -> None:
    assert np.array_equal(child.embed(texts), here.embed(texts))


def test_a_small_batch_is_embedded_here_and_starts_no_child(here: StaticEmbedder) -> None:
    embedder = ChildStaticEmbedder()
    try:
        small = TEXTS[:10]
        assert np.array_equal(embedder.embed(small), here.embed(small))
        assert embedder.pid is None
        large = (TEXTS * (MIN_BATCH // len(TEXTS) + 1))[:MIN_BATCH]
        assert np.array_equal(embedder.embed(large), here.embed(large))
        assert embedder.pid is not None  # the first large batch started it
    finally:
        embedder.close()


def test_a_dead_child_costs_no_vectors_and_a_new_one_takes_the_next_batch(
    here: StaticEmbedder,
) -> None:
    embedder = ChildStaticEmbedder(min_batch=1)
    expected = here.embed(TEXTS)
    try:
        embedder.embed(TEXTS)
        first = embedder.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert np.array_equal(embedder.embed(TEXTS), expected)  # in process, or a new child
        assert np.array_equal(embedder.embed(TEXTS), expected)
        assert embedder.pid not in (None, first)
    finally:
        embedder.close()


def test_after_close_the_child_is_gone_and_batches_are_embedded_here(here: StaticEmbedder) -> None:
    embedder = ChildStaticEmbedder(min_batch=1)
    embedder.embed(TEXTS)
    pid = embedder.pid
    assert pid is not None
    embedder.close()
    assert embedder.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left behind
    assert np.array_equal(embedder.embed(TEXTS), here.embed(TEXTS))
    assert embedder.pid is None


def test_a_single_string_is_refused_as_by_the_static_embedder() -> None:
    embedder = ChildStaticEmbedder(min_batch=1)
    try:
        with pytest.raises(TypeError):
            embedder.embed("one text")  # type: ignore[arg-type]
    finally:
        embedder.close()


def test_a_stopped_child_is_killed_at_its_deadline_and_the_batch_embedded_in_process(
    monkeypatch: pytest.MonkeyPatch, here: StaticEmbedder
) -> None:
    import time

    from brain.vectors import embed_child

    monkeypatch.setattr(embed_child, "ANSWER_BASE_S", 1.0)
    embedder = ChildStaticEmbedder(min_batch=1)
    texts = [f"text number {i}" for i in range(600)]
    try:
        embedder.embed(texts[:5])
        stopped = embedder.pid
        assert stopped is not None
        os.kill(stopped, signal.SIGSTOP)  # as a wedged child looks: alive, never answering
        start = time.monotonic()
        assert np.allclose(embedder.embed(texts), here.embed(texts))
        assert time.monotonic() - start < 20  # today: never returns
    finally:
        embedder.close()
