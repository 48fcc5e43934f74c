"""brain: the memory engine. A synchronous library; it knows nothing of stdio,
JSON-RPC or event loops (the ``daemon`` package wraps it).

Public names are re-exported here; modules are one concept each. The re-exports
resolve on first access (PEP 562), so importing a light submodule such as
``brain.config`` or ``brain.errors`` does not load the whole engine (numpy,
tokenizers, httpx): a one-shot ``brain call info`` stays close to a bare start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from brain.version import __version__

if TYPE_CHECKING:
    from brain.config import BrainConfig, CompactionConfig
    from brain.engine import Brain, EmbeddingsInfo, Info
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
    from brain.lcm.assemble import Assembled, AssembleOptions
    from brain.lcm.compaction import CompactionReport
    from brain.lcm.content import MessageIn
    from brain.lcm.ingest import IngestedMessage, IngestResult
    from brain.results import SaveResult
    from brain.store.connection import Store, open_store

_WHERE: dict[str, str] = {
    "AssembleOptions": "brain.lcm.assemble",
    "Assembled": "brain.lcm.assemble",
    "Brain": "brain.engine",
    "BrainConfig": "brain.config",
    "CompactionConfig": "brain.config",
    "CompactionReport": "brain.lcm.compaction",
    "BrainError": "brain.errors",
    "Conflict": "brain.errors",
    "DatabaseFileLost": "brain.errors",
    "DatabaseMissing": "brain.errors",
    "EmbedderMismatch": "brain.errors",
    "GrantDenied": "brain.errors",
    "GrantExhausted": "brain.errors",
    "EmbeddingsInfo": "brain.engine",
    "Info": "brain.engine",
    "IngestResult": "brain.lcm.ingest",
    "IngestedMessage": "brain.lcm.ingest",
    "InvalidInput": "brain.errors",
    "MessageIn": "brain.lcm.content",
    "NotFound": "brain.errors",
    "PayloadMissing": "brain.errors",
    "ProviderError": "brain.errors",
    "SaveResult": "brain.results",
    "StorageError": "brain.errors",
    "Store": "brain.store.connection",
    "StoreBusy": "brain.errors",
    "open_store": "brain.store.connection",
}
"""Each re-exported name and the module that defines it."""


def __getattr__(name: str) -> Any:
    """Import the module defining ``name`` on first access (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'brain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later accesses skip this hook
    return value


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
