"""systemd notifications: addresses, the watchdog period, and datagrams on a real socket."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

import anyio
import pytest

from daemon.notify import Notifier, parse_address, watchdog_interval


@pytest.fixture
def abstract_socket() -> Iterator[tuple[str, socket.socket]]:
    """A bound datagram socket in the abstract namespace, and its ``@name`` spelling."""
    name = f"brain-test-notify-{os.getpid()}-{os.urandom(4).hex()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(10)
    try:
        yield "@" + name, sock
    finally:
        sock.close()


def test_a_path_is_used_as_it_is() -> None:
    assert parse_address("/run/systemd/notify") == "/run/systemd/notify"


def test_an_at_sign_means_the_abstract_namespace() -> None:
    assert parse_address("@brain/notify") == "\0brain/notify"


@pytest.mark.parametrize("value", ["", "@", "relative/notify", "vsock:2:1234"])
def test_addresses_that_are_not_unix_sockets_are_refused(value: str) -> None:
    assert parse_address(value) is None


def test_the_watchdog_pings_at_half_the_period() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}, pid=7) == 15.0


def test_the_watchdog_pings_when_watchdog_pid_is_ours() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "7"}, pid=7) == 0.1


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"WATCHDOG_USEC": "0"},
        {"WATCHDOG_USEC": "soon"},
        {"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "8"},
        {"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "x"},
    ],
)
def test_the_watchdog_is_off_when_unset_malformed_or_meant_for_another_process(
    environ: dict[str, str],
) -> None:
    assert watchdog_interval(environ, pid=7) is None


def test_reading_the_environment_unsets_it_so_children_do_not_notify_in_our_name() -> None:
    environ = {"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "7", "HOME": "/"}
    notifier = Notifier.from_environ(environ, pid=7)
    assert environ == {"HOME": "/"}
    assert notifier.address == "\0x"
    assert notifier.watchdog_s == 0.1


def test_without_notify_socket_nothing_is_sent_and_no_watchdog_runs() -> None:
    notifier = Notifier.from_environ({"WATCHDOG_USEC": "200000"}, pid=7)
    assert not notifier.enabled
    assert notifier.watchdog_s is None
    assert notifier.notify("READY=1") is False


def test_messages_arrive_as_one_datagram_each_on_an_abstract_socket(
    abstract_socket: tuple[str, socket.socket],
) -> None:
    value, receiver = abstract_socket
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": value}, pid=7)
    notifier.ready("serving x.db")
    notifier.status("busy")
    notifier.stopping("stopping: eof")
    notifier.stopping("again")
    notifier.close()
    assert receiver.recv(4096) == b"READY=1\nSTATUS=serving x.db"
    assert receiver.recv(4096) == b"STATUS=busy"
    assert receiver.recv(4096) == b"STOPPING=1\nSTATUS=stopping: eof"
    receiver.setblocking(False)
    with pytest.raises(BlockingIOError):
        receiver.recv(4096)


def test_a_send_error_is_reported_as_false_never_raised() -> None:
    notifier = Notifier("\0brain-test-nobody-listens-" + os.urandom(8).hex())
    assert notifier.notify("READY=1") is False
    assert notifier.notify("WATCHDOG=1") is False
    notifier.close()


@pytest.mark.anyio
async def test_the_watchdog_task_pings_until_cancelled(
    abstract_socket: tuple[str, socket.socket],
) -> None:
    value, receiver = abstract_socket
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": value, "WATCHDOG_USEC": "2000"}, pid=7)
    async with anyio.create_task_group() as tg:
        tg.start_soon(notifier.watchdog)
        for _ in range(3):
            assert await anyio.to_thread.run_sync(receiver.recv, 4096) == b"WATCHDOG=1"
        tg.cancel_scope.cancel()
    notifier.close()


@pytest.mark.anyio
async def test_the_watchdog_withholds_pings_while_unhealthy_and_says_why(
    abstract_socket: tuple[str, socket.socket],
) -> None:
    value, receiver = abstract_socket
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": value, "WATCHDOG_USEC": "2000"}, pid=7)
    healthy = [True, False, False, False, True]
    ticks = anyio.Event()

    def health() -> bool:
        if len(healthy) == 1:
            ticks.set()
        return healthy.pop(0) if len(healthy) > 1 else healthy[0]

    notifier.healthy = health
    async with anyio.create_task_group() as tg:
        tg.start_soon(notifier.watchdog)
        await ticks.wait()
        tg.cancel_scope.cancel()
    notifier.close()
    receiver.setblocking(False)
    datagrams = []
    with contextlib.suppress(BlockingIOError):
        while True:
            datagrams.append(receiver.recv(4096))
    assert datagrams[:4] == [
        b"WATCHDOG=1",
        b"STATUS=stalled: database work does not complete",
        b"STATUS=serving",
        b"WATCHDOG=1",
    ]
