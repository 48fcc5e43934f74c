"""Daemons this script starts (``python -m daemon`` over pipes), tracked so every one is
reaped, and the raw newline-delimited JSON frames some benchmarks write by hand."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from benches.core import CALL_TIMEOUT_S
from protocol.client import Client, daemon_command

# -- child processes --------------------------------------------------------------------

_CHILDREN: list[subprocess.Popen[bytes]] = []
_CHILDREN_LOCK = threading.Lock()


def track(proc: subprocess.Popen[bytes]) -> None:
    with _CHILDREN_LOCK:
        _CHILDREN.append(proc)


def untrack(proc: subprocess.Popen[bytes]) -> None:
    with _CHILDREN_LOCK, contextlib.suppress(ValueError):
        _CHILDREN.remove(proc)


def reap_children() -> None:
    """Kill and reap every daemon this script started that is still running."""
    with _CHILDREN_LOCK:
        children = list(_CHILDREN)
        _CHILDREN.clear()
    for proc in children:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Close stdin (EOF asks the daemon to stop), wait, kill if it does not exit."""
    try:
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    finally:
        if proc.stdout is not None:
            with contextlib.suppress(OSError):
                proc.stdout.close()
        untrack(proc)


def child_env() -> dict[str, str]:
    """This environment minus ``BRAIN_*`` settings, so daemons run on their defaults."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}


def log_tail(log: Path, lines: int = 20) -> str:
    """The last lines of a daemon's stderr log, for error reports."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _show_log_tail(log: Path, exc: BaseException) -> None:
    """A failed benchmark's daemon log tail on stderr (not for Ctrl-C: nothing failed)."""
    tail = log_tail(log)
    if tail and not isinstance(exc, KeyboardInterrupt):
        print(f"  daemon log tail ({log}):\n{tail}", file=sys.stderr)


def spawn_daemon(
    db: Path, log: Path, args: Sequence[str], bufsize: int = -1
) -> subprocess.Popen[bytes]:
    """A tracked daemon on pipes, its stderr appended to ``log``; the caller stops it."""
    with log.open("ab") as err:
        proc = subprocess.Popen(
            daemon_command(db, args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=child_env(),
            bufsize=bufsize,
        )
    track(proc)
    return proc


def close_client(client: Client, timeout: float) -> None:
    """Close a tracked daemon's client (killed past ``timeout``) and stop tracking it."""
    try:
        client.close(timeout=timeout)
    except subprocess.TimeoutExpired:
        client.kill()
    finally:
        untrack(client.proc)


@contextlib.contextmanager
def client_daemon(db: Path, log: Path, args: Sequence[str] = ()) -> Iterator[Client]:
    """A ``protocol.client.Client`` over a fresh daemon, answering pings before it is yielded."""
    with log.open("ab") as err:
        client = Client.spawn(db, args=args, stderr=err, env=child_env())
    track(client.proc)
    try:
        client.call("ping", timeout=CALL_TIMEOUT_S)
        yield client
    except BaseException as exc:
        _show_log_tail(log, exc)
        raise
    finally:
        close_client(client, 60)


@contextlib.contextmanager
def raw_daemon(db: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A daemon on buffered pipes, for benchmarks that bypass the client."""
    with raw_daemon_args(db, log, ()) as proc:
        yield proc


@contextlib.contextmanager
def raw_daemon_args(db: Path, log: Path, args: Sequence[str]) -> Iterator[subprocess.Popen[bytes]]:
    """``raw_daemon`` with extra command-line arguments."""
    proc = spawn_daemon(db, log, args)
    try:
        yield proc
    except BaseException as exc:
        _show_log_tail(log, exc)
        raise
    finally:
        stop_process(proc)


def frame(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    """One request line."""
    obj: dict[str, Any] = {"id": request_id, "method": method}
    if params is not None:
        obj["params"] = params
    return orjson.dumps(obj) + b"\n"


def read_answer(stdout: IO[bytes]) -> dict[str, Any]:
    """Read one response line; fail if the daemon closed its stdout."""
    line = stdout.readline()
    if not line:
        raise RuntimeError("the daemon closed stdout before answering")
    answer: dict[str, Any] = orjson.loads(line)
    return answer
