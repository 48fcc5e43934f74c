"""``brain serve`` and ``brain mcp`` shorten the interpreter's switch interval before
they serve, so a request line never waits 5 ms for a background thread's Python.

Each case runs the entry point in a fresh interpreter with the serving loop replaced
by one that reports the interval it runs under.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.switching import SWITCH_INTERVAL_S

_PROBE = (
    "import sys\n"
    "import daemon.runner, daemon.mcp.runner\n"
    "async def run(*args, **kwargs):\n"
    "    print(sys.getswitchinterval(), file=sys.__stderr__)\n"
    "    return 0\n"
    "daemon.runner.run = daemon.mcp.runner.run = run\n"
    "from daemon.cli import main\n"
    "main([sys.argv[1], '--db', sys.argv[2]])\n"
)


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_the_serving_commands_wait_at_most_half_a_millisecond_for_the_interpreter_lock(
    command: str, tmp_path: Path
) -> None:
    if command == "mcp":
        pytest.importorskip("mcp")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, command, str(tmp_path / "brain.db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reported = [line for line in done.stderr.splitlines() if line.strip()[:1].isdigit()]
    assert reported, done.stderr
    assert float(reported[-1]) == SWITCH_INTERVAL_S == 0.0005
    assert sys.getswitchinterval() > SWITCH_INTERVAL_S  # this process keeps the default
