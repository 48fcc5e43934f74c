"""Helper child processes of the engine: starting one, its frames, stopping it.

Some of the engine's pure-Python work runs in a child process so that it never
holds the daemon's interpreter lock: summaries (``brain.lcm.summary_child``) and
the static embedder's large batches (``brain.vectors.embed_child``). Each child
is ``python -m MODULE``, with this ``brain`` package first on its path so it
runs the same code as its parent, talking over its stdin and stdout in frames:
a 4-byte big-endian length, then the bytes. The child exits when its stdin
closes.

Tested through its users: tests/brain/lcm/test_summary_child.py and
tests/brain/vectors/test_embed_child.py.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Final

__all__ = [
    "EXIT_WAIT_S",
    "HasChild",
    "child_output",
    "kill_after",
    "receive_frame",
    "send_frame",
    "start_child",
    "stop_child",
]

_HEADER: Final = struct.Struct(">I")
EXIT_WAIT_S: Final = 5.0
"""How long a child whose stdin closed may take to exit before it is killed."""
CLOSE_WAIT_S: Final = 1.0
"""How long closing waits for a request in flight on the child before killing it."""


class HasChild:
    """Holds at most one helper child (``_proc``): its pid, the running one, stopping it."""

    _proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The running child's process id (None before it started or after a failure)."""
        running = self._running()
        return None if running is None else running.pid

    def _running(self) -> subprocess.Popen[bytes] | None:
        proc = self._proc
        return proc if proc is not None and proc.poll() is None else None

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_child(proc, EXIT_WAIT_S)

    def _stop_within(self, lock: threading.Lock | threading.RLock) -> None:
        """Stop the child under ``lock``, or kill it when ``lock`` is not free within
        ``CLOSE_WAIT_S``: a request in flight (a stopped child would hold it until its
        answer deadline, past the daemon's shutdown bound) then sees the child die and
        does its work in process."""
        if lock.acquire(timeout=CLOSE_WAIT_S):
            try:
                self._stop()
            finally:
                lock.release()
            return
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()


def start_child(
    module: str, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``python -m module args...`` with pipes, this ``brain`` first on its path.

    ``env``: variables set for the child unless the parent's environment has them.
    """
    root = str(Path(__file__).resolve().parents[1])
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [child_env.get("PYTHONPATH")])])
    for name, value in (env or {}).items():
        child_env.setdefault(name, value)
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env,
        close_fds=True,
    )


def stop_child(proc: subprocess.Popen[bytes], wait_s: float) -> None:
    """Close the child's pipes (it exits when its stdin closes); kill it after ``wait_s``."""
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    try:
        # A stopped child (SIGSTOP, as a wedged one looks) never sees its stdin
        # close: waiting for it would only spend the daemon's shutdown bound.
        proc.wait(0 if _stopped(proc.pid) else wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def kill_after(proc: subprocess.Popen[bytes], seconds: float) -> Iterator[None]:
    """Kill ``proc`` if the block has not ended within ``seconds``.

    A child that stopped answering (SIGSTOP, a wedged interpreter) would keep its
    caller blocked on the pipe for good; killed, the pipe ends, the read raises
    EOFError and the caller does the work in process, as when a child dies.
    """
    timer = threading.Timer(seconds, _kill, args=(proc,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (Linux ``/proc``; elsewhere never known, so False)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the command name's closing parenthesis.
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] in ("T", "t")


def send_frame(out: IO[bytes], data: bytes) -> None:
    """Write one frame and flush it."""
    out.write(_HEADER.pack(len(data)) + data)
    out.flush()


def receive_frame(stream: IO[bytes], who: str) -> bytes:
    """Read one frame; EOFError when ``who`` (the other side, for the message) closed."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError(f"{who} closed its output")
    (size,) = _HEADER.unpack(header)
    body = stream.read(size)
    if len(body) < size:
        raise EOFError(f"{who} closed its output mid-frame")
    return body


def child_output() -> IO[bytes]:
    """In a child: its frames' output (the real stdout), with fd 1 sent to stderr so
    stray prints never land inside a frame."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return out
