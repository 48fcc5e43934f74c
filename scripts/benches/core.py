"""The benchmark runner's vocabulary: settings from the command line, state shared by one
invocation, a named benchmark, a skipped one, and the seed and sizes every workload shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

SEED: Final = 20240501
BATCH_SIZE: Final = 500
INGEST_SESSIONS: Final = 10
PIPELINE_SESSIONS: Final = 8
CALL_TIMEOUT_S: Final = 300.0

Metrics = dict[str, float]
Message = dict[str, Any]


# -- settings and results ---------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What the command line chose."""

    runs: int
    size: float
    root: Path
    heavy: bool = False  # build the 100k-message variants (only with --only)
    grep_messages: tuple[int, ...] = (10_000,)
    vector_rows: tuple[int, ...] = (100_000, 1_000_000)
    graph_nodes: tuple[int, ...] = (1_000, 5_000)
    peer_nodes: tuple[int, ...] = (1_000, 5_000)
    graph_daemon_nodes: tuple[int, ...] = (1_000, 5_000, 100_000)
    locomo: Path | None = None  # a LoCoMo file for ``replay``
    million_db: str | None = None  # ``million``'s database: built if missing, else reused

    def n(self, base: int, minimum: int = 1) -> int:
        """A workload count scaled by ``--size``."""
        return max(minimum, round(base * self.size))


@dataclass
class Shared:
    """State shared between benchmarks of one invocation (built lazily)."""

    settings: Settings
    dataset_db: Path | None = None
    dataset_messages: int = 0
    dataset_metrics: Metrics = field(default_factory=dict)


@dataclass(frozen=True)
class Bench:
    """One named benchmark: ``run`` returns one run's metrics."""

    name: str
    summary: str
    params: Callable[[Settings], dict[str, Any]]
    run: Callable[[Shared, Path], Metrics]
    deterministic: bool = False
    opt_in: bool = False  # runs only when named in --only
    max_runs: int | None = None  # caps --runs (a bench too long to repeat)


class BenchSkipped(Exception):
    """A benchmark that cannot run here (its message says why); reported, not an error."""
