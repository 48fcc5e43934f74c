"""brain's surface: ``brain/__init__.py`` is the only module ``daemon`` and ``scripts``
import engine names from, its names are pinned here, and they resolve lazily.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import brain
from tests import ROOT

SURFACE = [
    "AssembleOptions",
    "Assembled",
    "Brain",
    "BrainConfig",
    "BrainError",
    "ChatClient",
    "ChildStaticEmbedder",
    "ChildSummarizer",
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
    "HostTurn",
    "IVF",
    "Info",
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
    "Summarizer",
    "SummaryRequest",
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


def test_the_surface_is_exactly_the_pinned_names() -> None:
    assert sorted(brain.__all__) == SURFACE
    assert len(set(brain.__all__)) == len(brain.__all__)


def test_every_name_on_the_surface_resolves_to_what_its_module_defines() -> None:
    for name in brain.__all__:
        assert getattr(brain, name) is not None, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        brain.__getattr__("no_such_name")


def _engine_imports(path: Path) -> list[str]:
    """Every ``brain.<module>`` the file imports (``from brain import X`` is the surface)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("brain."):
                found.append(f"{path.name}:{node.lineno} {node.module}")
        elif isinstance(node, ast.Import):
            found += [
                f"{path.name}:{node.lineno} {a.name}"
                for a in node.names
                if a.name.startswith("brain.")
            ]
    return found


def test_the_daemon_and_the_scripts_import_the_engine_only_through_brain() -> None:
    files = sorted((ROOT / "daemon").glob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
    assert len(files) > 20
    assert [hit for path in files for hit in _engine_imports(path)] == []


def test_importing_brain_loads_none_of_its_modules_but_the_version() -> None:
    script = "import sys, brain\nprint(sorted(m for m in sys.modules if m.startswith('brain')))"
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "['brain', 'brain.version']"
