"""``info``: counts and identity of an open database, read in one snapshot.

The one read that spans every layer's tables (conversations, messages, payload
files, summaries, graph nodes and edges, vectors and the embed queue). It is
read-only counting, so it lives here rather than asking each layer: importing
the layers would load numpy (vectors) and the graph, and ``info`` must stay as
cheap as a bare start (``tests/e2e/test_startup.py``).

Tested through ``Brain.info``: ``tests/brain/test_engine.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from brain.store.connection import Store
from brain.store.identity import stored_identity
from brain.version import __version__


@dataclass(frozen=True, slots=True)
class EmbeddingsInfo:
    """The vector index as this process sees it: its embedder, and how far embedding got.

    ``stored`` rows have a vector and ``pending`` wait in the queue (after an embedder
    change, every row waits again and ``stored`` climbs back as the background worker
    drains). ``dim`` is None while an embedder that learns it has not asked yet.
    ``stored_embedder`` names the embedder the stored vectors belong to; when it differs
    from ``embedder`` for more than a moment, another process owns the index with another
    embedder and this one neither embeds nor answers semantic searches.
    """

    embedder: str
    dim: int | None
    stored: int
    pending: int
    stored_embedder: str | None


@dataclass(frozen=True, slots=True)
class Info:
    """Counts and identity of an open database."""

    version: str
    schema_version: int
    db: str
    conversations: int
    messages: int
    summaries: int
    nodes: int
    edges: int
    large_files: int
    db_bytes: int
    embeddings: EmbeddingsInfo
    entities_pending: int
    """Messages waiting for the entity index (drained in the background, and by every
    ``entities``/``entity`` read); grep's entity features see them once indexed."""


_COUNTS = "SELECT name, n FROM counts"
"""The maintained counters (``brain.store.migrations.counts``): nine rows, whatever
the database holds, where ``count(*)`` took 22 ms at a million messages."""


def read_info(store: Store, *, db: str, embedder: str, dim: int) -> Info:
    """What ``store`` holds, with ``embedder`` (of ``dim``; 0: not known yet) as this
    process's embedder. ``store`` should be inside one read transaction."""
    counts = {str(name): int(n) for name, n in store.execute(_COUNTS)}
    stored = stored_identity(store)
    embeddings = EmbeddingsInfo(
        embedder=embedder,
        dim=dim or None,
        stored=counts["vectors"],
        pending=counts["embed_queue"],
        stored_embedder=None if stored is None else stored[0],
    )
    page_count = int(store.scalar("PRAGMA page_count"))
    page_size = int(store.scalar("PRAGMA page_size"))
    return Info(
        version=__version__,
        schema_version=store.schema_version(),
        db=db,
        conversations=counts["conversations"],
        messages=counts["messages"],
        summaries=counts["summaries"],
        nodes=counts["nodes"],
        edges=counts["edges"],
        large_files=counts["large_files"],
        db_bytes=page_count * page_size,
        embeddings=embeddings,
        entities_pending=counts["entity_backlog"],
    )
