"""A workspace written to disk and the chunk nodes a sync stored, for the sync tests."""

from __future__ import annotations

from pathlib import Path

from brain import Brain
from brain.graph.sync import SyncReport

MEMORY = """\
Notes kept by the agent.

# Deploys
Deploys go through the staging cluster kestrel before production.

## Rollback
Roll back with the previous image tag.

# Coffee
The coffee machine is on the third floor.
"""


def make_workspace(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative name -> text) under ``root``; ``root``."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def chunk_rows(brain: Brain, source: str | None = None) -> list[tuple[str, str, int, int, str]]:
    """(node id, text, line start, line end, authority) of chunk nodes, in line order."""
    rows = brain.store.execute(
        "SELECT node_id, content, line_start, line_end, authority, source FROM nodes "
        "WHERE kind = 'chunk' ORDER BY source, line_start"
    )
    return [
        (str(r[0]), str(r[1]), int(r[2]), int(r[3]), str(r[4]))
        for r in rows
        if source is None or r[5] == source
    ]


def refused(report: SyncReport) -> set[tuple[str, str]]:
    """(path, reason) of every refused file."""
    return {(r.path, r.reason) for r in report.refused}


def stored_text(brain: Brain) -> str:
    """Every node's text, joined (to show a refused file was never read)."""
    return "\n".join(str(r[0]) for r in brain.store.execute("SELECT content FROM nodes"))
