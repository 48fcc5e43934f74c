"""``info``: counts and identity of an open database, read in one snapshot.

The one read that spans every layer's tables (conversations, messages, payload
files, summaries, graph nodes and edges, vectors and the embed queue). It is
read-only counting, so it lives here rather than asking each layer: importing
the layers would load numpy (vectors) and the graph, and ``info`` must stay as
cheap as a bare start (``tests/e2e/test_startup.py``).

Tested through ``Brain.info``: ``tests/brain/test_engine.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final

from brain.lcm.hosts import HostTurns, read_host_turns
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


TOTALS: Final = (
    "passes",
    "vectors_dropped",
    "traces_dropped",
    "sessions_deleted",
    "messages_deleted",
    "pages_vacuumed",
    "bytes_reclaimed",
)
"""The running sums ``info`` reports (``retention_totals``)."""
AUTO_VACUUM: Final = {0: "none", 1: "full", 2: "incremental"}


@dataclass(frozen=True, slots=True)
class RetentionInfo:
    """Retention as ``info`` shows it: the running totals of every pass, and the file's
    free pages (``free_bytes``: reused by later writes, or handed back by the next pass
    when ``auto_vacuum`` is incremental)."""

    auto_vacuum: str
    free_bytes: int
    last_pass_at: str | None
    passes: int
    vectors_dropped: int
    traces_dropped: int
    sessions_deleted: int
    messages_deleted: int
    pages_vacuumed: int
    bytes_reclaimed: int


def read_retention(store: Store) -> RetentionInfo:
    """The totals and the file's state (read-only; inside the caller's read)."""
    totals = {str(k): int(v) for k, v in store.execute("SELECT name, n FROM retention_totals")}
    page_size = int(store.scalar("PRAGMA page_size"))
    last = store.scalar("SELECT value FROM meta WHERE key = 'retention_last_pass_at'")
    return RetentionInfo(
        # Recorded by the migration and the switch, not asked of the pragma here: see
        # brain.store.migrations.retention.
        auto_vacuum=AUTO_VACUUM.get(totals.get("auto_vacuum", 0), "none"),
        free_bytes=int(store.scalar("PRAGMA freelist_count")) * page_size,
        last_pass_at=None if last is None else str(last),
        passes=totals.get("passes", 0),
        vectors_dropped=totals.get("vectors_dropped", 0),
        traces_dropped=totals.get("traces_dropped", 0),
        sessions_deleted=totals.get("sessions_deleted", 0),
        messages_deleted=totals.get("messages_deleted", 0),
        pages_vacuumed=totals.get("pages_vacuumed", 0),
        bytes_reclaimed=totals.get("bytes_reclaimed", 0),
    )


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
    retention: RetentionInfo
    """What retention passes took back (``brain.ops.retention``) and the file's free pages."""
    hosts: dict[str, HostTurns]
    """Per host integration that marks its turns (``ingest``'s ``turn``): its last turn
    committed through brain, when, and how many (``brain.lcm.hosts``)."""

    def as_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)``, made field by field: asdict deep-copies
        recursively (18 us against 1.7 us), and the daemon answers ``info`` on its
        event loop."""
        out = {name: getattr(self, name) for name in _INFO_FIELDS}
        out["embeddings"] = {name: getattr(self.embeddings, name) for name in _EMBEDDINGS_FIELDS}
        out["retention"] = {name: getattr(self.retention, name) for name in _RETENTION_FIELDS}
        out["hosts"] = {name: turns.as_dict() for name, turns in self.hosts.items()}
        return out


_INFO_FIELDS: Final = tuple(f.name for f in fields(Info))
_EMBEDDINGS_FIELDS: Final = tuple(f.name for f in fields(EmbeddingsInfo))
_RETENTION_FIELDS: Final = tuple(f.name for f in fields(RetentionInfo))

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
        retention=read_retention(store),
        hosts=read_host_turns(store),
    )
