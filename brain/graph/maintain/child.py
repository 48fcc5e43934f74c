"""Running ``maintain`` in a child process, so its planning never holds this process's GIL.

A maintenance run is seconds to minutes of CPU-bound Python (a snapshot of
every node and edge, then each task's plan). In a daemon that time was taken
from every other thread by the interpreter lock: grep and assemble answered
2-4x slower while it ran. The child is a fresh interpreter (``python -m
brain.graph.maintain.child``, the same ``brain`` package first on its path)
that opens its own connection to the file, checks it is the same file, runs
``maintain`` and sends back, in order, over its stdout: progress reports, each
committed chunk's ``Step`` (the parent advances its mirror with them) and the
report, or the error. It runs at a lower CPU priority (``NICENESS``), so
the daemon's readers win a busy machine's cores, and the parent's pump hands
the steps to the mirror in batches with rests between (``APPLY_SHARE``), so
applying them never takes most of the parent's interpreter lock. The parent
passes the request on the child's stdin and keeps that pipe open: when the
parent goes away (or gives up on the run) the pipe closes and the child exits
at once, as a thread would have died with the process; an open chunk is rolled
back by SQLite like any crash.

Frames are pickles behind a 4-byte length, between two processes running the
same code. Tested in tests/brain/graph/maintain/test_child.py.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Final

from brain.config import BrainConfig
from brain.errors import BrainError, DatabaseFileLost, DatabaseMissing, StorageError
from brain.graph.maintain.options import MaintainOptions
from brain.graph.maintain.run import MaintainReport, maintain
from brain.graph.mirror import Step
from brain.progress import Progress, ignore
from brain.store.connection import open_store

__all__ = ["APPLY_SHARE", "NICENESS", "REST_MAX_S", "maintain_in_child", "main"]

_HEADER: Final = struct.Struct(">I")
_EXIT_WAIT_S: Final = 10.0
APPLY_SHARE: Final = 0.5
"""The pump applies the child's steps for at most this share of its time (see ``_pump``)."""
REST_MAX_S: Final = 0.25
"""The longest the pump holds the steps that arrived while it rests."""
NICENESS: Final = 10
"""Added to the child's niceness: on a busy machine the daemon's readers win the cores
(a run is batch work; a query waiting for a core is a user waiting)."""


def maintain_in_child(
    path: Path,
    config: BrainConfig,
    identity: tuple[int, int],
    tasks: Sequence[str],
    *,
    dry_run: bool = False,
    options: MaintainOptions | None = None,
    progress: Progress = ignore,
    on_commit: Callable[[Sequence[Step]], object] | None = None,
) -> MaintainReport:
    """``maintain`` on the database at ``path`` (the file whose identity is ``identity``),
    run by a child process; its errors are raised here.

    ``on_commit`` hears the committed chunks in order, several at once when they
    arrived together (one swap of the mirror for all of them).
    """
    request = {
        "path": str(path),
        "config": config,
        "identity": identity,
        "tasks": list(tasks),
        "dry_run": dry_run,
        "options": options,
    }
    proc = subprocess.Popen(
        # The path is only for ``ps``: the request carries what the child works on.
        [sys.executable, "-m", "brain.graph.maintain.child", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_child_env(),
        close_fds=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    replies: queue.Queue[tuple[str, Any]] = queue.Queue()
    pump = threading.Thread(
        target=_pump, args=(proc.stdout.fileno(), replies, on_commit), daemon=True
    )
    try:
        _send(proc.stdin, request)
        pump.start()
        while True:
            kind, body = replies.get()
            if kind == "progress":
                progress(*body)
            elif kind == "report":
                return body  # type: ignore[no-any-return]
            elif kind == "error":
                raise _unpacked(body)
            else:  # the pipe ended without a report
                code = proc.wait(_EXIT_WAIT_S)
                raise StorageError(f"maintenance process exited with code {code} before its report")
    finally:
        # Closing its stdin ends a child still running (this side gave up or failed).
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if pump.is_alive():
            pump.join(_EXIT_WAIT_S)
        proc.stdout.close()


def _pump(
    fd: int,
    replies: queue.Queue[tuple[str, Any]],
    on_commit: Callable[[Sequence[Step]], object] | None,
) -> None:
    """Read the child's frames: steps go to ``on_commit``, the rest to ``replies``.

    Its own thread, so the mirror follows the chunks even while the caller's thread
    is held up by a progress report (a client slow to read its notifications).
    Applying steps is Python holding this process's interpreter lock (a million
    edge weights over a 100k-node run), so after each call the pump rests
    (``_rest``) and hands what arrived meanwhile over in one call: the readers
    keep most of the lock, and a bigger batch copies each touched row once.
    Everything is handed over before any other frame (the report comes after
    the last step).
    """
    frames = _Frames(fd)
    pending: list[Step] = []
    rest_until = 0.0

    def hand_over() -> None:
        nonlocal rest_until
        if pending and on_commit is not None:
            started = time.monotonic()
            on_commit(list(pending))
            rest_until = time.monotonic() + _rest(time.monotonic() - started)
        pending.clear()

    try:
        while True:
            wait = max(0.0, rest_until - time.monotonic()) if pending else None
            batch = frames.next_batch(wait)
            if batch is None:  # rested with steps waiting
                hand_over()
                continue
            pending.extend(body for kind, body in batch if kind == "step")
            others = [(kind, body) for kind, body in batch if kind != "step"]
            if not batch or others or time.monotonic() >= rest_until:
                hand_over()
            for frame in others:
                replies.put(frame)
            if not batch:
                break
    except Exception as exc:
        replies.put(("error", ("other", exc)))
    replies.put(("end", None))


def _rest(took: float) -> float:
    """How long the pump waits after applying steps for ``took`` seconds: as long again
    (half the interpreter lock at most), never past ``REST_MAX_S`` (a teach waiting for
    a step the pump holds waits that long at most)."""
    return min(took * (1 - APPLY_SHARE) / APPLY_SHARE, REST_MAX_S)


def _child_env() -> dict[str, str]:
    """This environment with this ``brain`` package's directory first on the path."""
    root = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _send(out: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(data)) + data)
    out.flush()


class _Frames:
    """Length-prefixed pickles read from a pipe, as many as have arrived at once."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()

    def _complete(self) -> list[Any]:
        frames = []
        while len(self._buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer)
            if len(self._buffer) < _HEADER.size + size:
                break
            body = bytes(self._buffer[_HEADER.size : _HEADER.size + size])
            del self._buffer[: _HEADER.size + size]
            frames.append(pickle.loads(body))  # noqa: S301 (our own child's frames)
        return frames

    def next_batch(self, timeout: float | None = None) -> list[Any] | None:
        """The frames complete now, waiting for at least one; empty at the end of the pipe,
        None when ``timeout`` seconds passed without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            frames = self._complete()
            if frames:
                return frames
            if deadline is not None:
                left = max(0.0, deadline - time.monotonic())
                if not select.select([self._fd], [], [], left)[0]:
                    return None
            chunk = os.read(self._fd, 1 << 20)
            if not chunk:
                return []
            self._buffer += chunk


# -- the child -------------------------------------------------------------------------


def _packed(exc: BaseException) -> tuple[Any, ...]:
    """``exc`` as the parent rebuilds it: an engine error by class, message and data.

    Engine errors do not pickle as themselves (``InvalidInput(field, problem)`` keeps
    only its message in ``args``); anything that cannot cross is a StorageError
    naming what it was.
    """
    if isinstance(exc, BrainError):
        packed: tuple[Any, ...] = ("brain", type(exc), exc.message, exc.data)
    else:
        packed = ("other", exc)
    try:
        pickle.loads(pickle.dumps(packed))  # noqa: S301 (made here)
    except Exception:
        return ("other", StorageError(f"maintenance failed: {type(exc).__name__}: {exc}"))
    return packed


def _unpacked(packed: tuple[Any, ...]) -> BaseException:
    """The error ``_packed`` sent, as raised in the child."""
    if packed[0] != "brain":
        return packed[1]  # type: ignore[no-any-return]
    cls, message, data = packed[1:]
    exc = cls.__new__(cls)
    BrainError.__init__(exc, message, **data)
    for name, value in data.items():  # the subclasses keep their data as attributes too
        setattr(exc, name, value)
    return exc  # type: ignore[no-any-return]


def _read_exactly(fd: int, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            os._exit(3)  # the parent went away before sending the request
        data += chunk
    return bytes(data)


def _exit_when_parent_goes(fd: int) -> None:
    """End this process as soon as the parent closes our stdin (it went away or gave up).

    Raw reads of the descriptor: a thread blocked in a buffered reader would hold
    its lock through the interpreter's shutdown.
    """
    with contextlib.suppress(OSError):
        while os.read(fd, 1 << 16):
            pass
    os._exit(3)


def main() -> None:
    """The child: read the request, run it, send progress, steps and the report."""
    with contextlib.suppress(OSError):  # a platform without it runs at the parent's
        os.nice(NICENESS)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to stderr, never into the frames
    (size,) = _HEADER.unpack(_read_exactly(0, _HEADER.size))
    request = pickle.loads(_read_exactly(0, size))  # noqa: S301 (our parent's frame)
    threading.Thread(target=_exit_when_parent_goes, args=(0,), daemon=True).start()
    sending = threading.Lock()

    def send(kind: str, body: Any) -> None:
        with sending:
            _send(out, (kind, body))

    try:
        try:
            store = open_store(request["path"], request["config"], create=False)
        except DatabaseMissing:
            raise DatabaseFileLost() from None
        try:
            if store.identity != request["identity"]:  # another file now: never work on it
                raise DatabaseFileLost()
            report = maintain(
                store,
                None,
                request["tasks"],
                dry_run=request["dry_run"],
                options=request["options"],
                progress=lambda done, total, phase: send("progress", (done, total, phase)),
                on_commit=lambda step: send("step", step),
            )
        finally:
            store.close()
    except Exception as exc:
        send("error", _packed(exc))
    else:
        send("report", report)
    out.close()


if __name__ == "__main__":
    main()
