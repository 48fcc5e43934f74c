"""Under systemd: the unit files verify, and a real daemon notifies a real socket.

The notification tests stand in for systemd: they bind the datagram socket
that ``$NOTIFY_SOCKET`` names and read what ``brain serve`` sends there.

``systemd-analyze`` ships with systemd, which the CI machine image has
(``/usr/bin/systemd-analyze``; ``./scripts/test`` runs on that same image), so
the verify test skips only on a machine without systemd at all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from protocol.framing import encode_frame
from tests.e2e.conftest import (
    BRAIN,
    DEADLINE,
    Spawn,
    ingest_frame,
    request_frame,
    serve_argv,
    user_message,
    write_lock_held,
)

UNITS = Path(__file__).resolve().parent.parent.parent / "systemd"


@pytest.fixture
def notify_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A datagram socket standing in for systemd's, named in ``$NOTIFY_SOCKET``.

    It lives in a short temporary directory: a Unix socket path must fit in
    108 bytes, which pytest's per-test directories can exceed.
    """
    with tempfile.TemporaryDirectory(prefix="brain-notify-") as directory:
        path = os.path.join(directory, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(DEADLINE)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
        try:
            yield sock
        finally:
            sock.close()


def queued(sock: socket.socket) -> list[bytes]:
    """Every datagram already waiting on ``sock``, without waiting for more."""
    out = []
    sock.setblocking(False)
    try:
        while True:
            out.append(sock.recv(4096))
    except BlockingIOError:
        return out
    finally:
        sock.settimeout(DEADLINE)


def test_the_daemon_is_ready_before_it_answers_pings_its_watchdog_and_says_it_is_stopping(
    tmp_path: Path,
    spawn: Spawn,
    notify_socket: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    daemon = spawn(serve_argv(tmp_path / "d.db"))
    daemon.send(request_frame(1, "ping"))
    assert daemon.frame()["id"] == 1
    # READY=1 is sent before the daemon reads its first request, so by the time
    # the answer is out the datagram is already queued on our socket.
    early = queued(notify_socket)
    ready = [i for i, d in enumerate(early) if d.startswith(b"READY=1\n")]
    assert len(ready) == 1, early
    assert early[ready[0]].startswith(b"READY=1\nSTATUS=serving ")
    ready_index = ready[0]
    pings = sum(d == b"WATCHDOG=1" for d in early[ready_index:])
    while pings < 2:
        datagram = notify_socket.recv(4096)  # bounded by the socket's DEADLINE timeout
        assert b"STOPPING=1" not in datagram
        pings += datagram == b"WATCHDOG=1"
    daemon.send(request_frame(2, "shutdown"))
    assert daemon.frame()["id"] == 2
    assert daemon.wait() == 0
    late = queued(notify_socket)
    stopping = [d for d in late if d.startswith(b"STOPPING=1")]
    assert stopping == [b"STOPPING=1\nSTATUS=stopping: shutdown"]
    assert not any(b"READY=1" in d for d in late)


def _quiet_spell(sock: socket.socket, quiet_s: float) -> list[bytes] | None:
    """Datagrams read until ``quiet_s`` passed without a ``WATCHDOG=1`` (None: never quiet)."""
    give_up = time.monotonic() + DEADLINE
    last = time.monotonic()
    seen: list[bytes] = []
    try:
        while time.monotonic() < give_up:
            sock.settimeout(max(0.01, quiet_s - (time.monotonic() - last)))
            try:
                datagram = sock.recv(4096)
            except TimeoutError:
                return seen
            seen.append(datagram)
            if datagram == b"WATCHDOG=1":
                last = time.monotonic()
        return None
    finally:
        sock.settimeout(DEADLINE)


def test_the_watchdog_stops_while_database_work_cannot_complete_and_resumes_after(
    tmp_path: Path,
    spawn: Spawn,
    notify_socket: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "200000")  # a ping every 0.1 s
    db = tmp_path / "d.db"
    argv = serve_argv(db, "--watchdog-stall-s", "0.5", "--busy-timeout-ms", "600000")
    daemon = spawn(argv)
    assert daemon.call(1, "ping")["result"] == {"pong": True}
    while notify_socket.recv(4096) != b"WATCHDOG=1":
        pass
    with write_lock_held(db):
        # The ingest waits for the lock inside the engine; the loop still answers.
        daemon.send(ingest_frame("stuck", "s", [user_message(0)]) + request_frame(2, "ping"))
        assert daemon.frame()["id"] == 2
        # Thirty ping periods, six stall periods without a WATCHDOG=1: systemd would kill.
        seen = _quiet_spell(notify_socket, 3.0)
        assert seen is not None, "WATCHDOG=1 kept coming with the engine stuck"
        assert b"STATUS=stalled: database work does not complete" in seen
    assert daemon.frame()["id"] == "stuck"  # the lock is free: the write completes
    while notify_socket.recv(4096) != b"WATCHDOG=1":  # and the pings come back
        pass
    code, _ = daemon.finish()
    assert code == 0
    assert "engine stalled" in daemon.stderr()


def test_end_of_input_is_announced_as_stopping(
    tmp_path: Path, spawn: Spawn, notify_socket: socket.socket
) -> None:
    daemon = spawn(serve_argv(tmp_path / "d.db"))
    assert daemon.call(1, "ping")["result"] == {"pong": True}
    code, frames = daemon.finish()
    assert (code, frames) == (0, [])
    datagrams = queued(notify_socket)
    assert datagrams[0] == b"READY=1\nSTATUS=serving " + str(tmp_path / "d.db").encode()
    assert datagrams[-1] == b"STOPPING=1\nSTATUS=stopping: eof"


def test_a_notify_socket_nobody_listens_on_is_logged_once_and_the_daemon_serves_on(
    tmp_path: Path, spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "missing"))
    monkeypatch.setenv("WATCHDOG_USEC", "100000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    daemon = spawn(serve_argv(tmp_path / "d.db"))
    assert daemon.call(1, "ping")["result"] == {"pong": True}
    assert daemon.call(2, "info")["result"]["messages"] == 0
    code, _ = daemon.finish()
    assert code == 0
    assert daemon.stderr().count("systemd notification failed") == 1


def test_a_connected_socket_as_stdin_and_stdout_is_served_as_brain_at_service_does(
    tmp_path: Path,
) -> None:
    client, daemon_end = socket.socketpair()
    with client, contextlib.closing(daemon_end):
        proc = subprocess.Popen(
            serve_argv(tmp_path / "d.db"),
            stdin=daemon_end.fileno(),
            stdout=daemon_end.fileno(),
            stderr=subprocess.DEVNULL,
        )
        daemon_end.close()
        try:
            client.settimeout(DEADLINE)
            client.sendall(request_frame(1, "ping"))
            reader = client.makefile("rb")
            assert reader.readline() == b'{"id":1,"result":{"pong":true}}\n'
            client.shutdown(socket.SHUT_WR)  # the client is done: the instance ends
            assert reader.read() == b""
            assert proc.wait(DEADLINE) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(DEADLINE)


def test_a_fifo_held_open_as_stdin_is_served_until_sigterm_as_brain_service_does(
    tmp_path: Path,
) -> None:
    inbox = tmp_path / "inbox"
    os.mkfifo(inbox)
    # systemd opens a ListenFIFO read-write and non-blocking: the reader never sees EOF.
    held = os.open(inbox, os.O_RDWR | os.O_NONBLOCK)
    try:
        proc = subprocess.Popen(
            serve_argv(tmp_path / "d.db"),
            stdin=held,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    finally:
        os.close(held)
    assert proc.stdout is not None
    try:
        writer = os.open(inbox, os.O_WRONLY)
        message = {"role": "user", "content": "hello"}
        # A notification (no id): fire and forget, the inbox's usual traffic.
        os.write(
            writer,
            encode_frame({"method": "ingest", "params": {"session": "s", "message": message}}),
        )
        # ``info`` runs on no lane, so it may be answered before the notification's
        # ingest commits: ask until the message shows (the answer is what is tested).
        messages = 0
        for request_id in range(2, 2 + 50):
            os.write(writer, request_frame(request_id, "info"))
            frame = orjson.loads(proc.stdout.readline())
            assert frame["id"] == request_id
            messages = frame["result"]["messages"]
            if messages == 1:
                break
            time.sleep(0.05)
        os.close(writer)
        assert messages == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(DEADLINE)
        proc.stdout.close()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd is not installed")
def test_the_unit_files_pass_systemd_analyze_verify_without_a_warning(tmp_path: Path) -> None:
    units = sorted(p.name for p in UNITS.iterdir() if p.suffix in (".service", ".socket", ".timer"))
    assert {
        "brain.service",
        "brain.socket",
        "brain@.service",
        "brain-inbox.socket",
        "brain-maintain.service",
        "brain-maintain.timer",
    } <= set(units)
    for name in units:
        text = (UNITS / name).read_text()
        assert "ExecStart=/usr/bin/env brain " in text or not name.endswith(".service")
        # verify checks that ExecStart's binary exists: point it at the
        # installed script, which is what /usr/bin/env finds on a real host.
        (tmp_path / name).write_text(text.replace("/usr/bin/env brain ", f"{BRAIN} "))
    # A template verifies through an instance name.
    targets = [n.replace("@.", "@1.") for n in units]
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "--generators=no", *targets],
        cwd=tmp_path,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice", "SYSTEMD_LOG_COLOR": "0"},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    # Unknown keys and bad values are only warnings (exit 0): none may appear.
    assert (result.returncode, result.stderr, result.stdout) == (0, "", "")


@pytest.mark.parametrize("unit", ["brain.service", "brain@.service"])
def test_the_daemon_units_cap_memory_and_stop_within_the_bounded_shutdown(unit: str) -> None:
    settings = dict(
        line.split("=", 1)
        for line in (UNITS / unit).read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert settings["MemoryMax"] == "2G"
    assert settings["MemoryHigh"] == "1536M"
    # shutdown_timeout_s (30 s) for in-flight work, then a few seconds of bounded steps.
    assert int(settings["TimeoutStopSec"]) > 30 + 3 + 2
