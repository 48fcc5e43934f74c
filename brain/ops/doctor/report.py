"""The doctor's report: each check's outcome, the finding a check builds, and their output forms.

``format_report`` and ``report_json`` are the exact text and JSON ``brain doctor``
prints (a stable contract). Tested through the runner in tests/brain/ops/doctor/test_runner.py,
which asserts the report's statuses, problems and repairs; this module has no logic of
its own beyond assembling them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

__all__ = ["CHECKS", "Check", "DoctorReport", "Finding", "Status", "format_report", "report_json"]

Status = Literal["ok", "warning", "error"]
CHECKS: Final = (
    "integrity",
    "schema",
    "fts",
    "vectors",
    "files",
    "context",
    "graph",
    "suppression",
    "rollups",
    "counts",
    "vacuum",
)
"""Every check's name, in the order they run and are reported."""

_SEVERITY: Final[Mapping[Status, int]] = {"ok": 0, "warning": 1, "error": 2}


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome: ``counts`` are what it measured, ``repaired`` what a repair did."""

    name: str
    status: Status
    message: str
    counts: Mapping[str, int]
    problems: tuple[str, ...] = ()
    """The keys of ``counts`` that are problems (stable names, e.g. ``wrong_dim``)."""
    repaired: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The check as plain JSON-ready data."""
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "counts": dict(self.counts),
            "problems": list(self.problems),
            "repaired": list(self.repaired),
        }


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Every check of one run (after repairs, when asked), in ``CHECKS`` order."""

    db: str
    checks: tuple[Check, ...]
    repair: bool
    deep: bool
    took_ms: float

    @property
    def ok(self) -> bool:
        """True when every check is ``ok``."""
        return all(c.status == "ok" for c in self.checks)

    @property
    def status(self) -> Status:
        """The worst status of any check."""
        return max((c.status for c in self.checks), key=_SEVERITY.__getitem__, default="ok")

    def check(self, name: str) -> Check:
        """The check called ``name`` (``KeyError`` if it did not run)."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        return {
            "db": self.db,
            "ok": self.ok,
            "status": self.status,
            "repair": self.repair,
            "deep": self.deep,
            "took_ms": round(self.took_ms, 1),
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclass
class Finding:
    """A check in progress: counts, and the problems among them with their severity."""

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[tuple[Status, str, str]] = field(default_factory=list)  # status, key, text

    def count(self, key: str, value: int) -> None:
        """Record a measured count that is not a problem."""
        self.counts[key] = int(value)

    def problem(self, status: Status, key: str, value: int, text: str) -> None:
        """Record a count that is a problem when it is not zero."""
        self.counts[key] = int(value)
        if value:
            self.problems.append((status, key, f"{value} {text}"))

    def has(self, key: str) -> bool:
        """True when the count ``key`` was recorded as a problem."""
        return any(k == key for _s, k, _t in self.problems)

    def done(self, repaired: tuple[str, ...] = ()) -> Check:
        """The finished check: its worst status, its problems joined into one message."""
        status: Status = max(
            (s for s, _k, _t in self.problems), key=_SEVERITY.__getitem__, default="ok"
        )
        texts = [t for _s, _k, t in self.problems]
        keys = tuple(k for _s, k, _t in self.problems)
        return Check(self.name, status, "; ".join(texts) or "ok", self.counts, keys, repaired)


def format_report(report: DoctorReport) -> str:
    """A readable table: one line per check, then what each repair did."""
    lines = [f"brain doctor {report.db}"]
    width = max(len(n) for n in CHECKS)
    for check in report.checks:
        lines.append(f"  {check.name:<{width}}  {check.status:<7}  {check.message}")
        lines.extend(f"  {'':<{width}}  {'':<7}  repaired: {r}" for r in check.repaired)
    lines.append(f"{'ok' if report.ok else 'problems remain'} ({report.took_ms:.0f} ms)")
    return "\n".join(lines)


def report_json(report: DoctorReport) -> bytes:
    """The report as one JSON line."""
    return orjson.dumps(report.to_dict())
