"""The ``graph`` check and its repair: summary nodes, dangling edges and edge weights.

Tested through the runner in tests/brain/ops/doctor/test_runner.py (a repaired summary node).
"""

from __future__ import annotations

from typing import Final

from brain.graph.nodes import add_missing_summary_nodes, bump_epoch
from brain.ops.doctor.report import Finding
from brain.store.connection import Store

__all__ = ["check", "repair"]


def check(store: Store) -> Finding:
    """Count nodeless summaries, summaryless nodes, dangling edges and weights out of range."""
    found = Finding("graph")
    found.count("nodes", store.scalar("SELECT count(*) FROM nodes"))
    found.count("edges", store.scalar("SELECT count(*) FROM edges"))
    found.problem(
        "error",
        "summaries_without_node",
        store.scalar("SELECT count(*) " + _NODELESS_SUMMARIES),
        "summaries without their graph node",
    )
    found.problem(
        "error",
        "summary_nodes_without_summary",
        store.scalar(
            "SELECT count(*) FROM nodes n WHERE n.kind = 'summary' AND NOT EXISTS "
            "(SELECT 1 FROM summaries s WHERE s.id = n.summary_id)"
        ),
        "summary nodes whose summary is missing (not repairable automatically)",
    )
    found.problem(
        "error",
        "dangling_edges",
        store.scalar("SELECT count(*) " + _DANGLING_EDGES),
        "edges to or from a missing node",
    )
    found.problem(
        "error",
        "weights_out_of_range",
        store.scalar("SELECT count(*) FROM edges WHERE NOT (weight BETWEEN -1.0 AND 1.0)"),
        "edges with a weight outside [-1, 1]",
    )
    return found


_NODELESS_SUMMARIES: Final = (
    "FROM summaries s WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.summary_id = s.id)"
)
_DANGLING_EDGES: Final = (
    "FROM edges AS e WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = e.source) "
    "OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = e.target)"
)


def repair(store: Store, found: Finding) -> list[str]:
    """Create missing summary nodes, delete dangling edges, clamp weights; bump the epoch."""
    done: list[str] = []
    if found.has("summaries_without_node"):
        with store.transaction():
            created = add_missing_summary_nodes(store)
            bump_epoch(store)
        done.append(f"created {created} summary nodes")
    if found.has("dangling_edges"):
        with store.transaction():
            store.execute("DELETE " + _DANGLING_EDGES)
            removed = store.changes()
            bump_epoch(store)
        done.append(f"deleted {removed} edges to or from a missing node")
    if found.has("weights_out_of_range"):
        with store.transaction():
            store.execute(
                "UPDATE edges SET weight = max(-1.0, min(1.0, weight)) "
                "WHERE NOT (weight BETWEEN -1.0 AND 1.0)"
            )
            clamped = store.changes()
            bump_epoch(store)
        done.append(f"clamped {clamped} edge weights into [-1, 1]")
    return done
