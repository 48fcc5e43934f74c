"""Clients that spawn ``brain serve`` as a child process and call its methods.

``Client`` is synchronous and thread-safe (a reader thread matches responses to
waiting callers by id); ``AsyncClient`` is the anyio equivalent. Both raise the
typed errors of ``protocol.errors`` for error responses. Notifications from the
daemon (e.g. ``progress``) are collected in ``notifications``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

import anyio
import anyio.abc
import orjson

from protocol.errors import RPCError, error_from_obj
from protocol.framing import LineSplitter, encode_frame

_NO_LIMIT: Final = 1 << 62  # the daemon's answers are trusted to be sane


def _decode(line: bytes) -> dict[str, Any] | None:
    """A response or notification frame, or None for a line that is neither."""
    try:
        frame = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return frame if isinstance(frame, dict) else None


def _lines(fd: int) -> Iterator[bytes]:
    """Lines from a file descriptor, read in large chunks.

    Iterating an unbuffered pipe object reads one byte per system call (a
    32 KB answer took ~10 ms); ``os.read`` returns whatever the pipe holds.
    """
    splitter = LineSplitter(_NO_LIMIT)
    while chunk := os.read(fd, 1 << 16):
        for line in splitter.feed(chunk):
            assert isinstance(line, bytes)
            yield line


def daemon_command(
    db: str | os.PathLike[str], args: Sequence[str] = (), python: str | None = None
) -> list[str]:
    """The argv that starts a daemon on ``db`` with this interpreter."""
    return [python or sys.executable, "-m", "daemon", "--db", os.fspath(db), *args]


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    response: dict[str, Any] | None = None


class ClientClosed(RuntimeError):
    """The daemon exited or closed its stdout before answering."""


class Client:
    """A synchronous client over a child daemon's stdin/stdout."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.stdin is None or proc.stdout is None:
            raise ValueError("the process needs stdin and stdout pipes")
        self.proc = proc
        self._stdin: IO[bytes] = proc.stdin
        self._stdout: IO[bytes] = proc.stdout
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = False
        self.notifications: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self.unmatched: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read_loop, name="brain-client", daemon=True)
        self._reader.start()

    @classmethod
    def spawn(
        cls,
        db: str | os.PathLike[str],
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        stderr: int | IO[Any] | None = None,
        cwd: str | Path | None = None,
    ) -> Self:
        """Start ``python -m daemon --db DB [args]`` and connect to it."""
        proc = subprocess.Popen(
            daemon_command(db, args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=None if env is None else dict(env),
            cwd=cwd,
            bufsize=0,
        )
        return cls(proc)

    def call(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float = 60.0
    ) -> Any:
        """Send a request and wait for its result; raise the typed error on failure."""
        response = self.request(method, params, timeout=timeout)
        if "error" in response:
            raise error_from_obj(response["error"])
        return response.get("result")

    def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Send a request and return the whole response frame."""
        request_id = next(self._ids)
        pending = _Pending()
        with self._lock:
            if self._closed:
                raise ClientClosed("the daemon is gone")
            self._pending[request_id] = pending
        frame: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            frame["params"] = dict(params)
        try:
            self.send_raw(encode_frame(frame))
        except (BrokenPipeError, OSError) as exc:
            with self._lock:
                self._pending.pop(request_id, None)
            raise ClientClosed(f"cannot write to the daemon: {exc}") from exc
        if not pending.done.wait(timeout):
            with self._lock:
                self._pending.pop(request_id, None)
            raise TimeoutError(f"no answer to {method} within {timeout}s")
        if pending.response is None:
            raise ClientClosed("the daemon exited before answering")
        return pending.response

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (no id, no answer)."""
        frame: dict[str, Any] = {"method": method}
        if params is not None:
            frame["params"] = dict(params)
        self.send_raw(encode_frame(frame))

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the daemon's stdin as they are (tests send malformed lines)."""
        with self._write_lock:
            self._stdin.write(data)
            self._stdin.flush()

    def close(self, timeout: float = 30.0) -> int:
        """Close stdin (EOF asks the daemon to stop) and wait for it to exit."""
        with self._write_lock:
            if not self._stdin.closed:
                with contextlib.suppress(BrokenPipeError):
                    self._stdin.close()
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        self._release_pipes()
        return code

    def kill(self) -> None:
        """SIGKILL the daemon (for crash tests) and reap it."""
        self.proc.kill()
        self.proc.wait()
        self._reader.join(10)
        self._release_pipes()

    def _release_pipes(self) -> None:
        # Popen leaves its pipes open; left to the garbage collector they raise
        # ResourceWarning. stdout is closed only once the reader has finished
        # with it, never under a blocked read.
        with self._write_lock, contextlib.suppress(BrokenPipeError):
            self._stdin.close()
        if not self._reader.is_alive():
            self._stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            try:
                self.close()
            except subprocess.TimeoutExpired:
                self.kill()

    def _read_loop(self) -> None:
        try:
            for line in _lines(self._stdout.fileno()):
                frame = _decode(line)
                if frame is None:
                    continue
                if "id" not in frame:
                    self.notifications.put(frame)
                    continue
                with self._lock:
                    pending = (
                        self._pending.pop(frame["id"], None)
                        if isinstance(frame["id"], int)
                        else None
                    )
                if pending is None:
                    self.unmatched.put(frame)
                    continue
                pending.response = frame
                pending.done.set()
        finally:
            with self._lock:
                self._closed = True
                waiting = list(self._pending.values())
                self._pending.clear()
            for pending in waiting:
                pending.done.set()


class AsyncClient:
    """An anyio client over a child daemon; use ``async with AsyncClient.spawn(db)``."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self._command = list(command)
        self._env = None if env is None else dict(env)
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self._proc: anyio.abc.Process | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._write_lock = anyio.Lock()
        self.notifications: list[dict[str, Any]] = []

    @classmethod
    def spawn(
        cls,
        db: str | os.PathLike[str],
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> Self:
        """A client that starts ``python -m daemon --db DB`` when entered."""
        return cls(daemon_command(db, args), env)

    async def __aenter__(self) -> Self:
        self._proc = await anyio.open_process(self._command, env=self._env, stderr=None)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._read_loop)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._proc is not None
        assert self._tg is not None
        if self._proc.stdin is not None:
            await self._proc.stdin.aclose()
        with anyio.move_on_after(30):
            await self._proc.wait()
        if self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        await self._tg.__aexit__(exc_type, exc, tb)

    @property
    def returncode(self) -> int | None:
        """The daemon's exit code once it has exited."""
        return None if self._proc is None else self._proc.returncode

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send a request and await its result; raise the typed error on failure."""
        assert self._proc is not None
        assert self._proc.stdin is not None
        request_id = next(self._ids)
        event = anyio.Event()
        slot: list[dict[str, Any]] = []
        self._pending[request_id] = (event, slot)
        frame: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            frame["params"] = dict(params)
        async with self._write_lock:
            await self._proc.stdin.send(encode_frame(frame))
        await event.wait()
        if not slot:
            raise ClientClosed("the daemon exited before answering")
        response = slot[0]
        if "error" in response:
            raise error_from_obj(response["error"])
        return response.get("result")

    async def _read_loop(self) -> None:
        assert self._proc is not None
        assert self._proc.stdout is not None
        splitter = LineSplitter(_NO_LIMIT)
        try:
            async for chunk in self._proc.stdout:
                for line in splitter.feed(chunk):
                    assert isinstance(line, bytes)
                    self._deliver(line)
        finally:
            for event, _slot in self._pending.values():
                event.set()
            self._pending.clear()

    def _deliver(self, line: bytes) -> None:
        frame = _decode(line)
        if frame is None:
            return
        if "id" not in frame:
            self.notifications.append(frame)
            return
        waiter = self._pending.pop(frame["id"], None) if isinstance(frame["id"], int) else None
        if waiter is not None:
            waiter[1].append(frame)
            waiter[0].set()


__all__ = ["AsyncClient", "Client", "ClientClosed", "RPCError", "daemon_command"]
