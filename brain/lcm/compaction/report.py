"""What a compaction did: ``CompactionReport``.

Tested through the compactor in tests/brain/lcm/compaction/test_compactor.py,
whose tests read every field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CompactionReport"]


@dataclass
class CompactionReport:
    """What a compaction did."""

    leaf_passes: int = 0
    condensed_passes: int = 0
    rebuilt: int = 0
    summaries: list[str] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    summarize_ms: float = 0.0
    took_ms: float = 0.0
    skipped: str | None = None

    def merge(self, other: CompactionReport) -> None:
        """Add another report's passes to this one."""
        self.leaf_passes += other.leaf_passes
        self.condensed_passes += other.condensed_passes
        self.rebuilt += other.rebuilt
        self.summaries += other.summaries
        self.summarize_ms += other.summarize_ms
