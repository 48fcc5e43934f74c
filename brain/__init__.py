"""brain: the memory engine. A synchronous library; it knows nothing of stdio,
JSON-RPC or event loops (the ``daemon`` package wraps it).

This module is the engine's one surface: ``daemon`` and ``scripts`` import every
engine name from here (``tests/brain/test_surface.py`` pins ``__all__`` and checks
that they do; import-linter forbids the daemon the sub-packages). Inside, the
modules live in sub-packages by layer (docs/architecture.md).

The names resolve on first access (PEP 562), so importing ``brain`` and asking
for ``BrainError`` or ``BrainConfig`` does not load the whole engine (numpy,
tokenizers, httpx): a one-shot ``brain call info`` stays close to a bare start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from brain.version import __version__

if TYPE_CHECKING:
    from brain.config import BrainConfig, CompactionConfig, RecallMode
    from brain.engine import Brain
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
    from brain.graph.maintain import TASKS as MAINTAIN_TASKS
    from brain.graph.maintain import MaintainOptions
    from brain.graph.nodes import NewNode, insert_node
    from brain.graph.service import teach_text
    from brain.graph.traverse import TraverseOptions
    from brain.lcm.assemble import Assembled, AssembleOptions
    from brain.lcm.budgets import sizes as compaction_sizes
    from brain.lcm.compaction import CompactionReport
    from brain.lcm.content import MessageIn
    from brain.lcm.context import conversation as session_conversation
    from brain.lcm.context import tail_start as fresh_tail_start
    from brain.lcm.hosts import HostTurn
    from brain.lcm.ingest import IngestedMessage, IngestResult
    from brain.lcm.llm_summarizer import LLMSummarizer
    from brain.lcm.offline import offline_summarizer
    from brain.lcm.summary_child import ChildSummarizer
    from brain.lcm.summary_contract import SourceItem, Summarizer, SummaryRequest
    from brain.ops.doctor import (
        DoctorReport,
        doctor,
    )
    from brain.ops.doctor import (
        format_report as format_doctor_report,
    )
    from brain.ops.doctor import (
        report_json as doctor_report_json,
    )
    from brain.ops.grants import HOLD_S as GRANT_HOLD_S
    from brain.ops.grants import Reach
    from brain.ops.info import EmbeddingsInfo, Info
    from brain.progress import Progress
    from brain.progress import ignore as ignore_progress
    from brain.providers.llm import ChatClient, LLMConfig
    from brain.recall.search import GrepOptions, GrepScope, node_ranking, ranking
    from brain.recall.search import Mode as GrepMode
    from brain.results import SaveResult
    from brain.store.connection import Store, open_store
    from brain.store.groupsync import deferring as defer_durability
    from brain.tokens import estimate_tokens
    from brain.vectors.ann import IVF
    from brain.vectors.ann import default_nprobe as ivf_default_nprobe
    from brain.vectors.ann import top_k as exact_top_k
    from brain.vectors.embed_child import ChildStaticEmbedder
    from brain.vectors.embedders import (
        Embedder,
        HashEmbedder,
        OnnxEmbedder,
        OpenAIEmbedder,
        OpenAIEmbedderConfig,
        StaticEmbedder,
        default_embedder,
    )
    from brain.vectors.quantise import quantise as quantise_vectors
    from brain.vectors.quantise import scores as quantised_scores

_WHERE: dict[str, str] = {
    "AssembleOptions": "brain.lcm.assemble",
    "Assembled": "brain.lcm.assemble",
    "Brain": "brain.engine",
    "BrainConfig": "brain.config",
    "BrainError": "brain.errors",
    "ChatClient": "brain.providers.llm",
    "CompactionConfig": "brain.config",
    "CompactionReport": "brain.lcm.compaction",
    "Conflict": "brain.errors",
    "DatabaseFileLost": "brain.errors",
    "DatabaseMissing": "brain.errors",
    "DoctorReport": "brain.ops.doctor",
    "Embedder": "brain.vectors.embedders",
    "EmbedderMismatch": "brain.errors",
    "EmbeddingsInfo": "brain.ops.info",
    "GRANT_HOLD_S": "brain.ops.grants:HOLD_S",
    "GrantDenied": "brain.errors",
    "GrantExhausted": "brain.errors",
    "GrepMode": "brain.recall.search:Mode",
    "GrepOptions": "brain.recall.search",
    "GrepScope": "brain.recall.search",
    "HashEmbedder": "brain.vectors.embedders",
    "IVF": "brain.vectors.ann",
    "Info": "brain.ops.info",
    "IngestResult": "brain.lcm.ingest",
    "IngestedMessage": "brain.lcm.ingest",
    "InvalidInput": "brain.errors",
    "LLMConfig": "brain.providers.llm",
    "LLMSummarizer": "brain.lcm.llm_summarizer",
    "SourceItem": "brain.lcm.summary_contract",
    "SummaryRequest": "brain.lcm.summary_contract",
    "Summarizer": "brain.lcm.summary_contract",
    "ChildSummarizer": "brain.lcm.summary_child",
    "ChildStaticEmbedder": "brain.vectors.embed_child",
    "offline_summarizer": "brain.lcm.offline",
    "MAINTAIN_TASKS": "brain.graph.maintain:TASKS",
    "MaintainOptions": "brain.graph.maintain",
    "MessageIn": "brain.lcm.content",
    "HostTurn": "brain.lcm.hosts",
    "NewNode": "brain.graph.nodes",
    "NotFound": "brain.errors",
    "OnnxEmbedder": "brain.vectors.embedders",
    "OpenAIEmbedder": "brain.vectors.embedders",
    "OpenAIEmbedderConfig": "brain.vectors.embedders",
    "PayloadMissing": "brain.errors",
    "Progress": "brain.progress",
    "ProviderError": "brain.errors",
    "Reach": "brain.ops.grants",
    "RecallMode": "brain.config",
    "SaveResult": "brain.results",
    "StaticEmbedder": "brain.vectors.embedders",
    "StorageError": "brain.errors",
    "Store": "brain.store.connection",
    "StoreBusy": "brain.errors",
    "TraverseOptions": "brain.graph.traverse",
    "compaction_sizes": "brain.lcm.budgets:sizes",
    "default_embedder": "brain.vectors.embedders",
    "defer_durability": "brain.store.groupsync:deferring",
    "doctor": "brain.ops.doctor",
    "doctor_report_json": "brain.ops.doctor:report_json",
    "estimate_tokens": "brain.tokens",
    "exact_top_k": "brain.vectors.ann:top_k",
    "format_doctor_report": "brain.ops.doctor:format_report",
    "fresh_tail_start": "brain.lcm.context:tail_start",
    "ignore_progress": "brain.progress:ignore",
    "insert_node": "brain.graph.nodes",
    "ivf_default_nprobe": "brain.vectors.ann:default_nprobe",
    "node_ranking": "brain.recall.search.node_ranking:",
    "open_store": "brain.store.connection",
    "quantise_vectors": "brain.vectors.quantise:quantise",
    "quantised_scores": "brain.vectors.quantise:scores",
    "ranking": "brain.recall.search:ranking",
    "session_conversation": "brain.lcm.context:conversation",
    "teach_text": "brain.graph.service",
}
"""Each public name and where it is defined: ``module``, ``module:attribute``, or
``module:`` (the module itself)."""


def __getattr__(name: str) -> Any:
    """Import the module defining ``name`` on first access (PEP 562)."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'brain' has no attribute {name!r}")
    module, colon, attribute = where.partition(":")
    imported = importlib.import_module(module)
    # "package.module:" (nothing after the colon) is the module itself.
    value = imported if colon and not attribute else getattr(imported, attribute or name)
    globals()[name] = value  # later accesses skip this hook
    return value


__all__ = [
    "AssembleOptions",
    "Assembled",
    "Brain",
    "BrainConfig",
    "BrainError",
    "ChatClient",
    "CompactionConfig",
    "CompactionReport",
    "Conflict",
    "DatabaseFileLost",
    "DatabaseMissing",
    "DoctorReport",
    "Embedder",
    "EmbedderMismatch",
    "EmbeddingsInfo",
    "GRANT_HOLD_S",
    "GrantDenied",
    "GrantExhausted",
    "GrepMode",
    "GrepOptions",
    "GrepScope",
    "HashEmbedder",
    "IVF",
    "Info",
    "HostTurn",
    "IngestResult",
    "IngestedMessage",
    "InvalidInput",
    "LLMConfig",
    "LLMSummarizer",
    "MAINTAIN_TASKS",
    "MaintainOptions",
    "MessageIn",
    "NewNode",
    "NotFound",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "OpenAIEmbedderConfig",
    "PayloadMissing",
    "Progress",
    "ProviderError",
    "Reach",
    "RecallMode",
    "SaveResult",
    "SourceItem",
    "StaticEmbedder",
    "StorageError",
    "Store",
    "StoreBusy",
    "SummaryRequest",
    "Summarizer",
    "ChildSummarizer",
    "ChildStaticEmbedder",
    "TraverseOptions",
    "__version__",
    "compaction_sizes",
    "default_embedder",
    "defer_durability",
    "doctor",
    "doctor_report_json",
    "estimate_tokens",
    "exact_top_k",
    "format_doctor_report",
    "fresh_tail_start",
    "ignore_progress",
    "insert_node",
    "ivf_default_nprobe",
    "node_ranking",
    "offline_summarizer",
    "open_store",
    "quantise_vectors",
    "quantised_scores",
    "ranking",
    "session_conversation",
    "teach_text",
]
