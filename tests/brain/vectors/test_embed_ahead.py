"""``Brain.embed_ahead``: the next batch at the embedder while the one before is stored."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from brain import Brain, MessageIn
from brain.errors import ProviderError
from brain.vectors.embed_child import ChildStaticEmbedder
from brain.vectors.embedders import HashEmbedder

if TYPE_CHECKING:
    from brain.vectors.embedders import Matrix

WAIT_S = 30.0


class Gated(HashEmbedder):
    """A hash embedder whose ``hold``-th call (1-based) waits for ``release`` (and then
    raises when ``fail``), telling ``held`` when it starts waiting."""

    def __init__(self, hold: int, *, fail: bool = False) -> None:
        super().__init__(64)
        self.hold, self.fail = hold, fail
        self.calls: list[int] = []
        self.held, self.release = threading.Event(), threading.Event()

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(len(texts))
        if len(self.calls) == self.hold:
            self.held.set()
            assert self.release.wait(WAIT_S)
            if self.fail:
                raise ProviderError("the provider went away")
        return super().embed(texts)


def _engine(db_path: Path, embedder: HashEmbedder | ChildStaticEmbedder, rows: int) -> Brain:
    brain = Brain(db_path, embedder=embedder)
    brain.ingest("s", [MessageIn("user", f"distinct message number {i}") for i in range(rows)])
    return brain


def _vectors(brain: Brain) -> int:
    return int(brain.store.scalar("SELECT count(*) FROM vectors"))


def test_a_batch_is_stored_while_the_next_one_is_still_at_the_embedder(db_path: Path) -> None:
    embedder = Gated(hold=2)
    brain = _engine(db_path, embedder, 30)
    try:
        assert brain.embed_ahead(10) == 10  # returns with rows 11-20 held at the embedder
        assert embedder.held.wait(WAIT_S)
        assert (_vectors(brain), brain.embeddings_pending()) == (10, 20)
        embedder.release.set()
        assert brain.embed_ahead(10) == 10  # the held batch, while rows 21-30 are embedded
        assert brain.embed_ahead(10) == 10
        assert brain.embed_ahead(10) == 0
        assert embedder.calls == [10, 10, 10]  # each row embedded once
        assert (_vectors(brain), brain.embeddings_pending()) == (30, 0)
    finally:
        embedder.release.set()
        brain.close()


def test_rows_at_an_embedder_that_fails_stay_queued_and_are_stored_once_later(
    db_path: Path,
) -> None:
    embedder = Gated(hold=2, fail=True)
    brain = _engine(db_path, embedder, 30)
    try:
        assert brain.embed_ahead(10) == 10
        embedder.release.set()
        with pytest.raises(ProviderError):
            brain.embed_ahead(10)
        assert (_vectors(brain), brain.embeddings_pending()) == (10, 20)
        while brain.embed_ahead(10):
            pass
        assert (_vectors(brain), brain.embeddings_pending()) == (30, 0)
    finally:
        embedder.release.set()
        brain.close()


def test_rows_another_drain_stored_while_their_batch_was_at_the_embedder_are_not_stored_again(
    db_path: Path,
) -> None:
    embedder = Gated(hold=2)
    brain = _engine(db_path, embedder, 30)
    try:
        assert brain.embed_ahead(10) == 10
        assert embedder.held.wait(WAIT_S)
        assert brain.embed_pending(100) == 20  # e.g. a search embedding its scope first
        stored = {
            (kind, row_id): vector
            for kind, row_id, vector in brain.store.execute(
                "SELECT kind, row_id, vector FROM vectors"
            )
        }
        embedder.release.set()
        assert brain.embed_ahead(10) == 0  # its rows were dequeued meanwhile: skipped
        assert brain.embed_ahead(10) == 0
        after = {
            (kind, row_id): vector
            for kind, row_id, vector in brain.store.execute(
                "SELECT kind, row_id, vector FROM vectors"
            )
        }
        assert after == stored
        assert (len(after), brain.embeddings_pending()) == (30, 0)
    finally:
        embedder.release.set()
        brain.close()


def test_a_child_killed_with_a_batch_in_flight_loses_no_row_and_stores_none_twice(
    db_path: Path,
) -> None:
    child = ChildStaticEmbedder(min_batch=1)
    brain = _engine(db_path, child, 300)
    try:
        assert brain.embed_ahead(100) == 100  # rows 101-200 sent to the child
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        total = 100
        while n := brain.embed_ahead(100):
            total += n
        assert total == 300
        assert (_vectors(brain), brain.embeddings_pending()) == (300, 0)
    finally:
        brain.close()
        child.close()
