"""The ``brain`` entry point gives numpy one BLAS thread unless the user set a count.

Each case runs the entry point in a fresh interpreter (numpy reads the count once,
when it loads), then loads numpy and reports the variable and its own threads.
"""

from __future__ import annotations

import os
import subprocess
import sys

from daemon.blas import BLAS_THREAD_VARIABLES

_PROBE = (
    "import io, os, sys\n"
    "from daemon.cli import main\n"
    "out, sys.stdout = sys.stdout, io.TextIOWrapper(io.BytesIO())\n"
    "main(['tools'])\n"
    "sys.stdout = out\n"
    "assert 'numpy' not in sys.modules, 'numpy loaded before the entry point limited it'\n"
    "import numpy\n"
    "numpy.ones((64, 64)) @ numpy.ones((64, 64))\n"
    "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))\n"
)


def _probe(**env: str) -> tuple[str, int]:
    base = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    value, threads = done.stdout.split()
    return value, int(threads)


def test_the_brain_entry_point_starts_numpy_with_one_blas_thread() -> None:
    value, threads = _probe()
    assert value == "1"
    assert threads == 1  # the interpreter's own: no BLAS pool beside it


def test_a_blas_thread_count_the_user_set_is_kept() -> None:
    value, _ = _probe(OPENBLAS_NUM_THREADS="2")
    assert value == "2"
