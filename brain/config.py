"""Engine configuration: a typed, frozen object the caller builds once.

The engine never reads the environment itself; ``daemon.config`` builds this
from flags, environment variables and an optional TOML file.

A frozen record: tested where it is built and checked
(``tests/daemon/test_config.py``) and by every engine test that sets it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

Synchronous = Literal["FULL", "NORMAL", "EXTRA"]


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """How history is folded into summaries.

    ``fresh_tail_count``: the newest raw messages always kept whole, counted as
    OpenAI sends them (``context.MESSAGE_UNITS``: parallel tool results in one
    user turn count one each), so either shape keeps the same tail (the tail
    also stretches back to the newest user message and to the calls of any
    tool results in it). ``leaf_chunk_tokens``: most raw tokens one leaf
    summary covers. ``threshold_tokens``: raw tokens outside the tail that
    start an incremental compaction. ``leaf_fanout`` / ``condensed_fanout``:
    how many same-depth summaries one condensed summary takes at depth 0 /
    above; ``pressure_fanout`` is used when compacting towards a target.
    ``incremental_max_depth``: deepest condensation an incremental pass makes
    (-1: no limit). ``flush_soft_tokens``: how close to the threshold
    ``assemble`` starts recommending a memory flush.

    ``budget_share``: once a session has been assembled with a budget
    (``brain.lcm.budgets``), the share of that budget raw history outside the tail
    may take before compaction starts (the threshold is the smaller of
    ``threshold_tokens`` and this share), and the share its summaries may take
    before they are condensed; the rest is the tail's. Chunk sizes and summary
    targets shrink with it (never above the settings above).
    """

    auto: bool = True
    fresh_tail_count: int = 32
    leaf_chunk_tokens: int = 20_000
    threshold_tokens: int = 20_000
    leaf_target_tokens: int = 1_200
    condensed_target_tokens: int = 2_000
    leaf_fanout: int = 8
    condensed_fanout: int = 4
    pressure_fanout: int = 2
    incremental_max_depth: int = -1
    flush_soft_tokens: int = 4_000
    budget_share: float = 0.25
    offline_summarizer: str = "default"
    """What summarises when no LLM is configured, and the LLM's fallback
    (``brain.lcm.offline``): ``default`` (the fact summarizer), ``extractive_v1``,
    or the evaluation baselines ``truncation`` and ``random``."""

    def __post_init__(self) -> None:
        # Raw history and summaries each get this share: above one half the
        # tail would have nothing left.
        if not (math.isfinite(self.budget_share) and 0 < self.budget_share <= 0.5):
            raise ValueError(
                f"budget_share must be above 0 and at most 0.5, got {self.budget_share}"
            )
        if self.offline_summarizer not in ("default", "extractive_v1", "truncation", "random"):
            raise ValueError(
                "offline_summarizer must be default, extractive_v1, truncation or random, "
                f"got {self.offline_summarizer!r}"
            )


@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """What a retention pass (``brain.ops.retention``) may take back, and when.

    ``max_age_days``: messages older than this lose their derived data (their
    vectors: semantic grep no longer finds them; full text, summaries and the
    messages themselves stay). ``key_max_age_days``: the same per session key,
    over the default (a session filed under no key takes the default).
    ``max_bytes``: while the database's used pages pass this, the oldest
    messages' vectors go, oldest first. ``delete_messages``: only then may a pass
    delete messages, and only whole sessions whose newest message passed its age,
    oldest first (then, over ``max_bytes``, the least recently written sessions).
    0 (or no entry) turns a limit off; with every limit off a pass only vacuums.
    """

    max_bytes: int = 0
    max_age_days: float = 0.0
    key_max_age_days: tuple[tuple[str, float], ...] = ()
    delete_messages: bool = False

    def __post_init__(self) -> None:
        if self.max_bytes < 0:
            raise ValueError(f"retention max_bytes must be 0 or more, got {self.max_bytes}")
        ages = [self.max_age_days, *(days for _key, days in self.key_max_age_days)]
        for days in ages:
            if not (math.isfinite(days) and days >= 0):
                raise ValueError(f"retention ages must be 0 or a positive number, got {days}")

    @property
    def active(self) -> bool:
        """Whether any limit is set (a pass with none only vacuums)."""
        return bool(
            self.max_bytes or self.max_age_days or any(d for _k, d in self.key_max_age_days)
        )

    def age_days(self, session_key: str | None) -> float:
        """The age limit of a session filed under ``session_key`` (0: none)."""
        for key, days in self.key_max_age_days:
            if key == session_key:
                return days
        return self.max_age_days


RecallMode = Literal["off", "shadow", "on"]


@dataclass(frozen=True, slots=True)
class BrainConfig:
    """Knobs of the storage engine.

    ``large_payload_tokens``: a content block whose payload is estimated above
    this many tokens is written to the files directory and replaced in the
    message by a compact reference.

    ``busy_timeout_ms``: how long a statement waits for another process's
    write lock before failing with ``StoreBusy``.

    ``synchronous``: SQLite's ``PRAGMA synchronous``. FULL (the default) makes
    every acknowledged commit survive power loss as well as a killed process;
    NORMAL survives a killed process only. ``group_commit``: see the field.

    ``orphan_file_grace_s``: a payload file with no row is removed at start-up
    only when older than this, because another process may be between writing
    the file and committing its row.
    """

    large_payload_tokens: int = 25_000
    busy_timeout_ms: int = 5_000
    synchronous: Synchronous = "FULL"
    group_commit: bool = False
    """Commit the engine's writes at ``synchronous=NORMAL`` and make them durable with an
    fsync of the WAL that concurrent writers share (``brain.store.groupsync``): each
    write still returns only once it survives power loss, as at FULL, but writers
    arriving together pay one fsync. Only with ``synchronous`` FULL or EXTRA."""
    orphan_file_grace_s: float = 600.0
    recall_mode: RecallMode = "off"
    """``assemble``'s recall block when a request does not say: off, shadow or on."""
    trace_max_count: int = 10_000
    """Query traces kept: storing one more deletes the oldest beyond this many."""
    trace_max_age_days: float = 30.0
    """Maintenance (the ``prune`` task) deletes traces older than this."""
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    read_connections: int = 4
    """Connections the engine reads on beside its write connection (``brain.store.readpool``):
    reads (grep, assemble, describe, expand, query, info) never wait for a write on
    them. 0: every read takes the write connection and its lock, one at a time."""

    def __post_init__(self) -> None:
        # Traces are written by every recorded query (and every assemble with
        # recall shadow or on): a retention that keeps nothing or never expires
        # is a mistake to refuse, not a setting to honour.
        if self.read_connections < 0:
            raise ValueError(f"read_connections must be 0 or more, got {self.read_connections}")
        if self.trace_max_count < 1:
            raise ValueError(f"trace_max_count must be at least 1, got {self.trace_max_count}")
        if not (math.isfinite(self.trace_max_age_days) and self.trace_max_age_days > 0):
            raise ValueError(
                f"trace_max_age_days must be a positive number, got {self.trace_max_age_days}"
            )
