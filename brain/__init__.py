"""brain: the memory engine. A synchronous library; it knows nothing of stdio,
JSON-RPC or event loops (the ``daemon`` package wraps it).

Public names are re-exported here; modules are one concept each.
"""

from brain.assemble import Assembled, AssembleOptions
from brain.compaction import CompactionReport
from brain.config import BrainConfig, CompactionConfig
from brain.content import MessageIn
from brain.engine import Brain, EmbeddingsInfo, Info, SaveResult
from brain.errors import (
    BrainError,
    Conflict,
    DatabaseFileLost,
    DatabaseMissing,
    EmbedderMismatch,
    GrantDenied,
    GrantExhausted,
    InvalidInput,
    NotFound,
    PayloadMissing,
    ProviderError,
    StorageError,
    StoreBusy,
)
from brain.ingest import IngestedMessage, IngestResult
from brain.store import Store, open_store
from brain.version import __version__

__all__ = [
    "AssembleOptions",
    "Assembled",
    "Brain",
    "BrainConfig",
    "CompactionConfig",
    "CompactionReport",
    "BrainError",
    "Conflict",
    "DatabaseFileLost",
    "DatabaseMissing",
    "EmbedderMismatch",
    "GrantDenied",
    "GrantExhausted",
    "EmbeddingsInfo",
    "Info",
    "IngestResult",
    "IngestedMessage",
    "InvalidInput",
    "MessageIn",
    "NotFound",
    "PayloadMissing",
    "ProviderError",
    "SaveResult",
    "StorageError",
    "Store",
    "StoreBusy",
    "__version__",
    "open_store",
]
