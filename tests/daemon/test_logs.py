"""daemon.logs renders a plain event without structlog into the very line structlog renders."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

DEADLINE = 30.0

_SCRIPT = """
import sys
from daemon.logs import configure_logging, log

configure_logging(sys.argv[2], sys.argv[1])
events = [
    ("info", "serving", {"db": "/tmp/some dir/brain.db", "pid": 4242}),
    ("warning", "auto-save failed", {"error": "StoreBusy('database is locked')"}),
    ("debug", "auto-saved", {"writes": 3, "wal_frames": 0}),
    ("error", "engine stalled: no database work completes", {"stall_s": 2.5}),
    ("warn", "old name", {"value": "x"}),
    ("info", "no values", {}),
    ("info", "an event longer than the thirty columns it is padded to", {"k": 1}),
    ("info", "values", {
        "empty": "", "none": None, "yes": True, "quote": "it's", "eq": "a=b", "tab": "a\\tb",
        "nl": "a\\nb", "dq": 'say "hi"', "uni": "h\\u00e9llo \\u4e16", "neg": -1, "big": 1e300,
        "zero": 0.0, "b": "z", "a": "first",
    }),
]
for method, event, values in events:
    getattr(log, method)(event, **values)
assert "structlog" not in sys.modules, "the plain path loaded structlog"
print("--- structlog ---", file=sys.stderr, flush=True)
for method, event, values in events:
    getattr(log._structlog_logger(), method)(event, **values)
"""


def _without_timestamp(fmt: str, line: str) -> str:
    if fmt == "json":
        record = json.loads(line)
        assert record.pop("timestamp").endswith("Z")
        return json.dumps(record)
    stamp, rest = line.split(" ", 1)
    assert stamp.endswith("Z")
    return rest


@pytest.mark.parametrize(
    ("fmt", "level"), [("console", "debug"), ("json", "debug"), ("console", "info")]
)
def test_a_plain_event_is_logged_without_structlog_exactly_as_structlog_logs_it(
    fmt: str, level: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, fmt, level],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    plain, structlogs = done.stderr.decode().split("--- structlog ---\n")
    plain_lines = [_without_timestamp(fmt, line) for line in plain.splitlines()]
    structlog_lines = [_without_timestamp(fmt, line) for line in structlogs.splitlines()]
    assert plain_lines == structlog_lines
    assert len(plain_lines) == (8 if level == "debug" else 7)
