"""Stored rows the tasks read or delete directly: node vectors, and a node deleted whole.

Tested through the tasks that use them: tests/brain/graph/maintain/test_merge.py,
test_prune.py and test_connect.py.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import orjson

from brain.store.connection import Store
from brain.vectors.quantise import decode, decode_rows
from brain.vectors.writes import dequeue, drop_vectors

__all__ = ["delete_node", "node_matrix", "node_vectors"]


def node_vectors(store: Store, rows: Iterable[int]) -> dict[int, npt.NDArray[np.float32]]:
    """Stored node vectors (unit length) of ``rows`` that have one."""
    found, matrix = node_matrix(store, rows)
    return {row_id: matrix[i] for i, row_id in enumerate(found)}


def node_matrix(store: Store, rows: Iterable[int]) -> tuple[list[int], npt.NDArray[np.float32]]:
    """The rows of ``rows`` that have a stored vector, and those vectors (unit length)
    as one matrix in that order (a caller gathers its rows by position: stacking 100k
    row views again was half a second of a merge)."""
    wanted = orjson.dumps(sorted(rows))
    found = list(
        store.execute(
            "SELECT row_id, vector FROM vectors WHERE kind = 'node' "
            "AND row_id IN (SELECT value FROM json_each(?))",
            (wanted,),
        )
    )
    dim = int(
        store.scalar("SELECT coalesce((SELECT value FROM meta WHERE key = 'embedder_dim'), 0)")
    )
    ids = [int(row_id) for row_id, _ in found]
    if not found:
        return ids, np.zeros((0, dim), dtype=np.float32)
    # Stored as int8 with a scale (brain.vectors.quantise): dequantised and made unit
    # again, all rows at once (one row at a time was a second of a 100k-node merge).
    if not dim:  # no dimension recorded (vectors written by hand): float32, as before v19
        dim = len(found[0][1]) // 4
    try:
        codes, scales = decode_rows([blob for _, blob in found], dim)
    except ValueError:  # rows of several sizes: each as it is
        return ids, np.stack([_unit(blob, dim) for _, blob in found])
    matrix = codes.astype(np.float32) * scales[:, None]
    norms = np.linalg.norm(matrix, axis=1)
    matrix = np.divide(matrix, norms[:, None], out=matrix, where=norms[:, None] > 0)
    return ids, matrix


def _unit(blob: bytes, dim: int) -> npt.NDArray[np.float32]:
    vector = decode(blob, dim or len(blob) // 4)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def delete_node(store: Store, row_id: int) -> None:
    """A node with its edges, its vector and its queued embedding: no ghost vectors."""
    store.execute("DELETE FROM edges WHERE source = ? OR target = ?", (row_id, row_id))
    drop_vectors(store, "node", [row_id])
    dequeue(store, "node", [row_id])
    store.execute("DELETE FROM nodes WHERE id = ?", (row_id,))
