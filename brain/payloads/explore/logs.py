"""Log payloads: the time range, level or HTTP status counts, and the first errors.

Levels are counted over the first 8 MiB, bytes-wise. Tested through
``explore`` in tests/brain/payloads/test_explore.py (its log tests).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Final

from brain.payloads.explore.summary import LINE_CHARS, SCAN_BYTES, clip, human_size, oneline

TIMESTAMP: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}"
    r"|\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2}(?: [+-]\d{4})?"
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}",
    re.ASCII,
)
_LEVEL_SOURCE: Final = (
    r"\b(ERROR|ERR|FATAL|CRITICAL|CRIT|SEVERE|PANIC|EMERG|ALERT|WARNING|WARN"
    r"|INFO|NOTICE|DEBUG|TRACE)\b"
    r"|\[(error|crit|alert|emerg|warn|warning|notice|info|debug)\]"
    r"|\blevel[=:]\"?([A-Za-z]+)"
    r"|\"(?:level|severity)\": ?\"([A-Za-z]+)\""
)
_LEVEL: Final = re.compile(_LEVEL_SOURCE)
_LEVEL_BYTES: Final = re.compile(_LEVEL_SOURCE.encode())
_LEVEL_CLASS: Final = {
    **dict.fromkeys(
        ["error", "err", "fatal", "critical", "crit", "severe", "panic", "emerg", "alert"], "ERROR"
    ),
    **dict.fromkeys(["warn", "warning"], "WARN"),
    **dict.fromkeys(["info", "notice"], "INFO"),
    **dict.fromkeys(["debug", "trace"], "DEBUG"),
}
_HTTP_STATUS: Final = re.compile(rb'" ([1-5])\d\d ')
_DIGITS: Final = re.compile(r"\d+")
DATE: Final = re.compile(r"\d{4}[-/]\d{2}[-/]\d{2}\b", re.ASCII)
_ERROR_LINES: Final = 3


def log_share(sample: list[str]) -> float:
    """The share of the first non-empty lines with a timestamp or level near their start."""
    lines = [line[:64] for line in itertools.islice(filter(str.strip, sample), 200)]
    if not lines:
        return 0.0
    stamped = sum(1 for line in lines if TIMESTAMP.search(line))
    leveled = sum(1 for line in lines if _LEVEL.search(line))
    return max(stamped, leveled) / len(lines)


def log_lines(data: bytes, sample: list[str], size: str) -> list[str]:
    """The lines shown for a log: time span, level and HTTP status counts, distinct errors."""
    window = data[:SCAN_BYTES]
    levels: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    errors: dict[str, str] = {}  # first lines of distinct errors, keyed with digits masked
    for raw in window.split(b"\n"):
        found = _LEVEL_BYTES.search(raw, 0, 160)
        level = _LEVEL_CLASS.get(found[found.lastindex or 0].decode().lower()) if found else None
        status = None if level else _HTTP_STATUS.search(raw, 0, 2000)
        if level:
            levels[level] += 1
        elif status:
            statuses[status[1].decode() + "xx"] += 1
        failed = level == "ERROR" or (status is not None and status[1] == b"5")
        if failed and len(errors) < _ERROR_LINES:
            line = _strip_timestamp(oneline(raw[:400].decode("utf-8", "replace")))
            errors.setdefault(_DIGITS.sub("#", line), line)
    scope = "" if len(data) <= SCAN_BYTES else f"; counts from the first {human_size(SCAN_BYTES)}"
    out = [f"Log ({size}){scope}"]
    first = next((m[0] for line in sample if (m := TIMESTAMP.search(line[:64]))), None)
    last = _last_timestamp(data)
    if first:
        out.append(f"time: {first} → {last}" if last and last != first else f"time: {first}")
    if levels:
        order = ("ERROR", "WARN", "INFO", "DEBUG")
        out.append("levels: " + ", ".join(f"{n} {levels[n]:,}" for n in order if levels[n]))
    if statuses:
        out.append("HTTP status: " + ", ".join(f"{k} {n:,}" for k, n in sorted(statuses.items())))
    if tracebacks := window.count(b"Traceback (most recent call last)"):
        out.append(f"Python tracebacks: {tracebacks:,}")
    if errors:
        out.append("first errors:")
        out += [f"  {clip(line, LINE_CHARS - 2)}" for line in errors.values()]
    return out


def _strip_timestamp(line: str) -> str:
    """The line without a leading timestamp (and any address or bracket before it)."""
    found = TIMESTAMP.search(line, 0, 64)
    if found is None:
        return line.strip()
    return line[found.end() :].lstrip(" ]:-,|\t").rstrip()


def _last_timestamp(data: bytes) -> str | None:
    tail = data[-64 * 1024 :].decode("utf-8", "replace").split("\n")
    for line in reversed(tail[-400:]):
        if found := TIMESTAMP.search(line[:64]):
            return found[0]
    return None
