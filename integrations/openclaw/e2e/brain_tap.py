"""A transparent NDJSON tap between the OpenClaw plugin and the real ``brain serve``.

The end-to-end run points the plugin's command at a wrapper that runs this
file with the plugin's own arguments (``serve --db PATH ...``). It starts the
real brain with them, copies every line both ways unchanged, and appends one
JSON record per line to ``$BRAIN_TAP_LOG``::

    {"pid": 123, "dir": "request", "t": 1.5, "line": {...}}
    {"pid": 123, "dir": "answer", "t": 1.52, "line": {...}}

so the run can see what the plugin asked brain and what brain answered, and
time the round trips (``t`` is ``time.time()``, taken when the line crossed
the tap).

The fault it can inject, for the retry check: when the file named by
``$BRAIN_TAP_DROP_ONCE`` exists, the answer to the first ``ingest`` that
follows an ``assemble`` in this process (the turn's commit: brain has stored
it) is not passed on. The tap removes the file, logs ``{"dir": "dropped"}``,
kills brain and exits 1, as a crash between brain's commit and the plugin's
reading of the answer would look. What the plugin and OpenClaw do next (a
restart and retry, or a failed commitTurn that the host retries on its next
run) must store nothing twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

_lock = threading.Lock()


def _record(log: IO[str], direction: str, raw: bytes) -> dict[str, Any] | None:
    """Append one record for a line; returns the parsed line (None if not JSON)."""
    try:
        line = json.loads(raw)
    except ValueError:
        line = None
    entry = {"pid": os.getpid(), "dir": direction, "t": time.time(), "line": line}
    if line is None:
        entry["raw"] = raw.decode("utf-8", "replace")
    with _lock:
        log.write(json.dumps(entry) + "\n")
        log.flush()
    return line if isinstance(line, dict) else None


def main(argv: list[str]) -> int:
    """Run ``$BRAIN_TAP_BRAIN argv...`` behind the tap until either side closes."""
    brain = os.environ["BRAIN_TAP_BRAIN"]
    drop_flag = os.environ.get("BRAIN_TAP_DROP_ONCE")
    log = Path(os.environ["BRAIN_TAP_LOG"]).open("a", encoding="utf-8")  # noqa: SIM115
    _record(log, "start", b"null")
    child = subprocess.Popen([brain, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None
    assert child.stdout is not None
    # The id of the commit whose answer is to be lost; set once an assemble was seen.
    state: dict[str, Any] = {"assembled": False, "victim": None}
    stdout = sys.stdout.buffer

    def upstream() -> None:
        """Plugin -> brain."""
        assert child.stdin is not None
        for raw in sys.stdin.buffer:
            line = _record(log, "request", raw)
            if line is not None:
                method = line.get("method")
                if method == "assemble":
                    state["assembled"] = True
                elif (
                    method == "ingest"
                    and state["assembled"]
                    and state["victim"] is None
                    and drop_flag
                    and Path(drop_flag).exists()
                ):
                    state["victim"] = line.get("id")
            try:
                child.stdin.write(raw)
                child.stdin.flush()
            except BrokenPipeError:
                break
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()

    threading.Thread(target=upstream, daemon=True).start()
    for raw in child.stdout:
        line = _record(log, "answer", raw)
        victim = state["victim"]
        if line is not None and victim is not None and line.get("id") == victim and drop_flag:
            Path(drop_flag).unlink(missing_ok=True)
            _record(log, "dropped", raw)
            child.kill()
            child.wait()
            return 1
        stdout.write(raw)
        stdout.flush()
    return child.wait()


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    # Not sys.exit: the reader thread may still block on stdin, and a normal
    # interpreter shutdown would then abort on stdin's buffer lock.
    os._exit(code)
