"""The ``vectors`` check and its repair: stored vectors against their rows and embedder identity.

The repair deletes ghost or malformed vectors and queues their rows (and every row neither
embedded nor queued) for embedding. Tested through the runner in
tests/brain/ops/doctor/test_runner.py.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

from brain.ops.doctor.report import Finding
from brain.store.connection import Store
from brain.vectors.index import Kind, note_vectors_changed, stored_identity
from brain.vectors.matrix import damaged_files
from brain.vectors.writes import RETAINED, enqueue_existing

__all__ = ["check", "repair"]


_GHOST_VECTORS: Final = (
    "FROM vectors AS v WHERE (v.kind = 'message' AND NOT EXISTS "
    "(SELECT 1 FROM messages m WHERE m.id = v.row_id)) "
    "OR (v.kind = 'summary' AND NOT EXISTS (SELECT 1 FROM summaries s WHERE s.id = v.row_id)) "
    # A summary node reads its summary's vector; only nodes with their own text have one.
    "OR (v.kind = 'node' AND NOT EXISTS "
    "(SELECT 1 FROM nodes n WHERE n.id = v.row_id AND n.content IS NOT NULL))"
)


def _unembedded(kind: str, table: str, where: str = "1", alias: str = "t") -> str:
    return (
        f"SELECT '{kind}', {alias}.id FROM {table} {alias} WHERE {where} AND NOT EXISTS "  # noqa: S608
        f"(SELECT 1 FROM vectors v WHERE v.kind = '{kind}' AND v.row_id = {alias}.id) "
        f"AND NOT EXISTS (SELECT 1 FROM embed_queue q WHERE q.kind = '{kind}' "
        f"AND q.row_id = {alias}.id)"
    )


_MISSING_VECTORS: Final = (
    # A message whose vector retention dropped is not missing one.
    _unembedded("message", "messages", f"NOT {RETAINED}", alias="m"),
    _unembedded("summary", "summaries"),
    _unembedded("node", "nodes", "t.content IS NOT NULL"),
)


def check(store: Store) -> Finding:
    """Count vectors of the wrong length, ghosts, and rows neither embedded nor queued."""
    found = Finding("vectors")
    identity = stored_identity(store)
    total = int(store.scalar("SELECT count(*) FROM vectors"))
    found.count("vectors", total)
    found.count("queued", store.scalar("SELECT count(*) FROM embed_queue"))
    dim = _stored_dim(identity)
    found.count("dim", dim or 0)
    if identity is None or dim is None:
        found.problem("error", "no_identity", total, "vectors with no embedder identity in meta")
    else:
        found.problem(
            "error",
            "wrong_dim",
            store.scalar(
                "SELECT count(*) FROM vectors WHERE length(vector) NOT IN (?, ?)",
                (dim + 4, dim * 4),
            ),
            f"vectors whose length is not dim {dim} (int8 and a scale, or float32 before v19)",
        )
    found.problem(
        "error",
        "ghosts",
        store.scalar("SELECT count(*) " + _GHOST_VECTORS),
        "ghost vectors (their row is gone)",
    )
    missing = sum(
        int(store.scalar(f"SELECT count(*) FROM ({sql})"))  # noqa: S608
        for sql in _MISSING_VECTORS
    )
    found.problem("warning", "missing", missing, "rows neither embedded nor queued")
    found.problem(
        "error",
        "damaged_cache",
        len(damaged_files(store.path)),
        "vector matrix or IVF files that cannot be used (removed by --repair: rebuilt)",
    )
    return found


def _stored_dim(identity: tuple[str, str] | None) -> int | None:
    if identity is None:
        return None
    with contextlib.suppress(ValueError):
        return int(identity[1])
    return None


def repair(store: Store, found: Finding) -> list[str]:
    """Delete the wrong and ghost vectors (queueing rows that remain) and queue what is missing."""
    done: list[str] = []
    dim = found.counts.get("dim", 0)
    if found.has("wrong_dim") and dim:
        with store.transaction():
            bad = list(
                store.execute(
                    "DELETE FROM vectors WHERE length(vector) NOT IN (?, ?) RETURNING kind, row_id",
                    (dim + 4, dim * 4),
                )
            )
            enqueue_existing(store, [(str(k), int(r)) for k, r in bad])
            note_vectors_changed(store, _kinds(bad))
        done.append(f"deleted {len(bad)} vectors of the wrong length and queued their rows")
    if found.has("ghosts"):
        with store.transaction():
            ghosts = list(store.execute("DELETE " + _GHOST_VECTORS + " RETURNING kind, row_id"))
            note_vectors_changed(store, _kinds(ghosts))
        done.append(f"deleted {len(ghosts)} ghost vectors")
    if found.has("damaged_cache"):
        # Derived caches: removing them is safe; the next search rebuilds from SQLite.
        for path in damaged_files(store.path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            done.append(f"removed damaged vector cache {path.name}")
    if found.has("missing"):
        with store.transaction():
            queued = 0
            for sql in _MISSING_VECTORS:
                store.execute(f"INSERT OR IGNORE INTO embed_queue (kind, row_id) {sql}")
                queued += store.changes()
        done.append(f"queued {queued} rows for embedding")
    return done


def _kinds(rows: list[Any]) -> list[Kind]:
    kinds: list[Kind] = ["message", "summary", "node"]
    present = {str(r[0]) for r in rows}
    return [k for k in kinds if k in present]
