"""systemd's notification protocol (``sd_notify``) with the standard library alone.

Under ``Type=notify`` systemd hands the daemon a datagram socket in
``$NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace) and waits
for ``READY=1`` before it counts the service as started. With ``WatchdogSec=``
it also sets ``$WATCHDOG_USEC`` and expects ``WATCHDOG=1`` at least that often,
else it kills the service (and ``Restart=on-failure`` starts it again).

The watchdog pings come from a task on the daemon's own event loop, not from a
thread: a loop that is stuck (a blocking call where an ``await`` should be)
stops the pings, which is exactly what the watchdog is there to catch. A live
loop is not enough: while ``healthy`` (``daemon.health``: can database work
still complete?) says no, the pings are withheld as well.

Without ``$NOTIFY_SOCKET`` every method is a no-op. A failed send is logged
once and never raised: a notification that cannot be delivered must not take
down a daemon that can still answer its client.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, MutableMapping
from typing import Final

import anyio

from daemon.logs import log

_SEND_TIMEOUT_S: Final = 1.0
"""Bound on one send: systemd's queue being full must not stall the loop for long."""


def parse_address(value: str) -> str | None:
    """The ``sendto`` address for a ``$NOTIFY_SOCKET`` value, or None if unusable.

    ``/path`` is a filesystem socket; ``@name`` is ``name`` in Linux's abstract
    namespace, which Python spells with a leading NUL byte. Anything else
    (empty, relative, ``vsock:``) is not a socket we can reach.
    """
    if value.startswith("/"):
        return value
    if value.startswith("@") and len(value) > 1:
        return "\0" + value[1:]
    return None


def watchdog_interval(environ: MutableMapping[str, str], pid: int) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings (half of ``$WATCHDOG_USEC``), or None.

    None when the watchdog is off, malformed, or meant for another process:
    systemd sets ``$WATCHDOG_PID`` when the variable may reach children, and
    only the process it names should ping.
    """
    raw = environ.get("WATCHDOG_USEC", "")
    try:
        usec = int(raw)
    except ValueError:
        return None
    if usec <= 0:
        return None
    owner = environ.get("WATCHDOG_PID")
    if owner is not None:
        try:
            if int(owner) != pid:
                return None
        except ValueError:
            return None
    # Half the period, as sd_watchdog_enabled(3) advises: one late ping is not a kill.
    return usec / 2 / 1_000_000


class Notifier:
    """Sends ``READY=1``, ``WATCHDOG=1``, ``STOPPING=1`` and ``STATUS=`` to systemd."""

    def __init__(self, address: str | None, watchdog_s: float | None = None) -> None:
        self.address = address
        self.watchdog_s = watchdog_s if address is not None else None
        self._socket: socket.socket | None = None
        self._failed = False
        self._stopping = False
        self.healthy: Callable[[], bool] | None = None
        """Asked before each ``WATCHDOG=1``; False withholds it (None: always healthy)."""

    @classmethod
    def from_environ(
        cls, environ: MutableMapping[str, str] | None = None, pid: int | None = None
    ) -> Notifier:
        """A notifier for this process's environment, which it then removes.

        The variables are unset (as ``sd_notify(unset_environment=1)`` does) so
        that no child process inherits them and notifies in our name.
        """
        env = os.environ if environ is None else environ
        value = env.pop("NOTIFY_SOCKET", None)
        interval = watchdog_interval(env, os.getpid() if pid is None else pid)
        env.pop("WATCHDOG_USEC", None)
        env.pop("WATCHDOG_PID", None)
        if value is None:
            return cls(None)
        address = parse_address(value)
        if address is None:
            log.warning("NOTIFY_SOCKET is not a unix socket address; not notifying", value=value)
        return cls(address, interval)

    @property
    def enabled(self) -> bool:
        """Whether there is a socket to notify."""
        return self.address is not None

    def notify(self, *assignments: str) -> bool:
        """Send one datagram of ``KEY=VALUE`` lines; False if it could not be sent."""
        if self.address is None or not assignments:
            return False
        message = "\n".join(assignments)
        try:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._socket.settimeout(_SEND_TIMEOUT_S)
            self._socket.sendto(message.encode(), self.address)
        except OSError as exc:
            if not self._failed:  # once: a missing socket would otherwise log every ping
                self._failed = True
                log.warning("systemd notification failed", message=message, error=repr(exc))
            return False
        return True

    def ready(self, status: str | None = None) -> None:
        """The daemon answers requests from now on."""
        self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def stopping(self, status: str | None = None) -> None:
        """Shutdown has begun (sent once, however many times it is called)."""
        if self._stopping:
            return
        self._stopping = True
        self.notify("STOPPING=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> None:
        """A free-form line shown by ``systemctl status``."""
        self.notify(f"STATUS={text}")

    async def watchdog(self) -> None:
        """Ping every half watchdog period while healthy, until cancelled; off: return at once."""
        if self.watchdog_s is None:
            return
        withheld = False
        while True:
            if self.healthy is None or self.healthy():
                if withheld:
                    withheld = False
                    self.status("serving")
                self.notify("WATCHDOG=1")
            elif not withheld:
                withheld = True
                self.status("stalled: database work does not complete")
            await anyio.sleep(self.watchdog_s)

    def close(self) -> None:
        """Release the socket."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
