"""A batch taken from the embed queue: which of its texts need embedding, each once.

Identical text is embedded once: each vector row records ``text_hash`` (blake2b-128 of the
UTF-8 text), and only texts with no stored vector (one per distinct text in the batch) go
to the embedder. Tested through tests/brain/vectors/test_index.py (identical text is
embedded once) and the graph's sync and retrieval tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from brain.store.connection import Store
from brain.vectors.embedders import Embedder
from brain.vectors.epochs import Kind

__all__ = ["Pending", "pending_batch", "text_hash"]


def pending_batch(
    store: Store,
    keys: Sequence[tuple[Kind, int]],
    conversations: Sequence[int],
    texts: Sequence[str],
    gone: Sequence[tuple[Kind, int]] = (),
) -> Pending:
    """A batch for ``VectorIndex.put``: which texts need embedding, each once.

    A text whose hash already has a stored vector is copied from it (slot -1);
    the others get a slot in ``to_embed``, shared by equal texts in the batch.
    ``gone``: queued rows found with no row behind them, for ``put`` to dequeue.
    """
    hashes = tuple(text_hash(t) for t in texts)
    slot_of: dict[bytes, int] = {}
    to_embed: list[str] = []
    slots: list[int] = []
    for text, digest in zip(texts, hashes, strict=True):
        if digest not in slot_of:
            stored = store.one("SELECT 1 FROM vectors WHERE text_hash = ? LIMIT 1", (digest,))
            slot_of[digest] = -1 if stored is not None else len(to_embed)
            if stored is None:
                to_embed.append(text)
        slots.append(slot_of[digest])
    return Pending(
        tuple(keys),
        tuple(conversations),
        tuple(texts),
        hashes,
        tuple(slots),
        tuple(to_embed),
        tuple(gone),
    )


def text_hash(text: str) -> bytes:
    """The 16-byte blake2b digest of ``text``'s UTF-8: equal texts share one vector."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Pending:
    """Rows taken from the queue for embedding, and which of their texts need embedding.

    ``slots[i]`` is the index in ``to_embed`` of row ``i``'s text, or ``-1`` when a vector
    for that text is already stored (``put`` copies it). ``to_embed`` has each text once.
    ``gone`` are queued rows whose message, summary or node no longer exists (taken on
    a read connection, they are dequeued by ``put``).
    """

    keys: tuple[tuple[Kind, int], ...]
    conversations: tuple[int, ...]
    texts: tuple[str, ...]
    hashes: tuple[bytes, ...]
    slots: tuple[int, ...]
    to_embed: tuple[str, ...]
    gone: tuple[tuple[Kind, int], ...] = ()

    def embed(self, embedder: Embedder, dim: int) -> npt.NDArray[np.float32]:
        """The vectors of ``to_embed`` (an empty matrix when every text had one)."""
        if not self.to_embed:
            return np.zeros((0, dim), dtype=np.float32)
        return embedder.embed(list(self.to_embed))
