"""A graph built by hand on a real store, for the maintenance tasks' tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

from brain import Store
from brain.graph.mirror import Graph, GraphState
from brain.graph.nodes import NewNode, insert_node

DIM = 8
T0 = datetime(2025, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def iso_at(moment: datetime) -> str:
    """A moment as stored."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def unit(seed: int) -> npt.NDArray[np.float32]:
    """A unit vector; equal seeds give equal vectors (near-duplicates)."""
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@dataclass
class G:
    """A graph built by hand: node row ids by name."""

    store: Store
    ids: dict[str, int]

    def node(
        self,
        name: str,
        kind: str = "teaching",
        authority: str = "overlay",
        *,
        vector: int | None = None,
        created: datetime = T0,
        source: str | None = None,
    ) -> int:
        row_id, _, _ = insert_node(
            self.store,
            NewNode(kind, f"text of {name}", authority, source=source),  # type: ignore[arg-type]
            embed=False,
        )
        self.store.execute(
            "UPDATE nodes SET created_at = ? WHERE id = ?", (iso_at(created), row_id)
        )
        if vector is not None:
            self.store.execute(
                "INSERT INTO vectors (kind, row_id, conversation_id, vector) "
                "VALUES ('node', ?, 0, ?)",
                (row_id, unit(vector).tobytes()),
            )
        self.ids[name] = row_id
        return row_id

    def edge(self, a: str, b: str, weight: float, at: datetime = T0) -> None:
        self.store.execute(
            "INSERT INTO edges (source, target, weight, kind, updated_at) "
            "VALUES (?, ?, ?, 'learned', ?)",
            (self.ids[a], self.ids[b], weight, iso_at(at)),
        )

    def weight(self, a: str, b: str) -> float | None:
        value = self.store.scalar(
            "SELECT weight FROM edges WHERE source = ? AND target = ?", (self.ids[a], self.ids[b])
        )
        return None if value is None else float(value)

    def exists(self, name: str) -> bool:
        return self.store.one("SELECT 1 FROM nodes WHERE id = ?", (self.ids[name],)) is not None

    def has_vector(self, name: str) -> bool:
        row = self.store.one(
            "SELECT 1 FROM vectors WHERE kind = 'node' AND row_id = ?", (self.ids[name],)
        )
        return row is not None


def dump(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row a task may touch, sorted (to compare before and after)."""
    return {
        table: sorted(tuple(r) for r in store.execute(f"SELECT * FROM {table}"))
        for table in ("nodes", "edges", "vectors", "embed_queue", "meta", "traces")
    }


def mixed(g: G) -> None:
    """Duplicates, an idle node, a chunk and a constitutional node, with old edges."""
    old = T0 - 60 * DAY
    g.node("a", vector=1, created=old)
    g.node("b", vector=1, created=old)
    g.node("c", vector=2, created=old)
    g.node("idle", vector=3, created=old)
    g.node("chunk", kind="chunk", vector=2, source="x.md", created=old)
    g.node("k", authority="constitutional", created=old)
    g.edge("a", "c", 0.9, at=old)
    g.edge("b", "c", 0.3, at=old)
    g.edge("c", "a", 0.2, at=T0 - 20 * DAY)
    g.edge("k", "a", 0.9, at=old)


def mirror_maps(state: GraphState) -> tuple[object, ...]:
    """Everything a mirror state holds but its epoch (to compare with a fresh load)."""
    return (
        state.out,
        state.inc,
        state.kind,
        state.authority,
        state.public,
        state.by_public,
        state.by_summary,
        state.prior,
    )


def count_loads(graph: Graph) -> list[int]:
    """Every reload of ``graph`` from the tables from now on, by epoch (wraps its loader)."""
    loads: list[int] = []
    load = graph._load

    def counted(store: Store, epoch: int) -> GraphState:
        loads.append(epoch)
        return load(store, epoch)

    graph._load = counted  # type: ignore[method-assign]
    return loads
