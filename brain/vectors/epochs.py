"""Per-kind write counters of the stored vectors, so every process's index notices writes.

A counter per kind in ``meta`` (``vectors_epoch:<kind>``) changes on every write of that
kind's vectors, so a process notices another process's writes and reloads its matrix, and
an index reloads only for writes to the kinds it holds. Tested through
tests/brain/vectors/test_index.py (reloads across processes) and the doctor's vector repairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import orjson

from brain.store.connection import Store
from brain.vectors.writes import Kind

__all__ = ["KINDS", "Kind", "bump_epochs", "epochs", "note_vectors_changed"]

KINDS: Final[tuple[Kind, Kind, Kind]] = ("message", "summary", "node")
"""Every kind of vector, in the order their codes follow in an index."""
_EPOCH_KEY: Final = "vectors_epoch:"


def epochs(store: Store, kinds: Sequence[Kind]) -> tuple[int, ...]:
    """The write counters of ``kinds``' vectors, in order (0 before the first write).

    One counter per kind: a taught node does not make grep's index of messages
    reload, and a drained batch of messages does not make the graph's reload.
    """
    stored = dict(
        store.execute(
            "SELECT key, value FROM meta WHERE key IN (SELECT value FROM json_each(?))",
            (orjson.dumps([_EPOCH_KEY + kind for kind in kinds]),),
        )
    )
    return tuple(int(stored.get(_EPOCH_KEY + kind, 0)) for kind in kinds)


def bump_epochs(store: Store, kinds: Sequence[Kind]) -> None:
    """Count a write to ``kinds``' vectors (inside the writing transaction)."""
    for kind in kinds:
        store.execute(
            "INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE "
            "SET value = CAST(value AS INTEGER) + 1",
            (_EPOCH_KEY + kind,),
        )


def note_vectors_changed(store: Store, kinds: Sequence[Kind]) -> None:
    """Count a write to ``kinds``' vectors made outside an index (inside its transaction).

    Code that deletes vector rows directly (maintenance merging or pruning nodes)
    calls this, so every process's index holding those kinds reloads before its
    next search instead of returning rows that are gone.
    """
    bump_epochs(store, kinds)
