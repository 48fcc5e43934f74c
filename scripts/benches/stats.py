"""Latency percentiles and sizes on disk: how a run's raw timings become figures."""

from __future__ import annotations

import math
import shutil
import statistics
from collections.abc import Sequence
from pathlib import Path

from benches.core import Metrics

# -- statistics -------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_metrics(ns: list[int], prefix: str = "") -> Metrics:
    """p50/p95/p99/mean in milliseconds of nanosecond samples."""
    ms = sorted(v / 1e6 for v in ns)
    return {
        f"{prefix}p50_ms": percentile(ms, 50),
        f"{prefix}p95_ms": percentile(ms, 95),
        f"{prefix}p99_ms": percentile(ms, 99),
        f"{prefix}mean_ms": statistics.fmean(ms) if ms else math.nan,
    }


def dir_bytes(path: Path) -> int:
    """Total size of the regular files under ``path`` (0 when absent)."""
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def file_bytes(path: Path) -> int:
    """Size of a file, 0 when absent."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def remove_db(db: Path) -> None:
    """Delete a database with its WAL, shm and payload files (frees disk between sizes)."""
    for path in db.parent.glob(db.name + "*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def process_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0
