"""Opening a file a request names: only a regular file, never a pseudo-file, never outside a root.

``sync`` and ``bootstrap`` read files named by whoever writes the workspace or
sends the request (the agent itself, often). Read naively, a symlink
``memory/env.md -> /proc/self/environ`` turns the daemon's environment (its
provider keys) into graph nodes, a FIFO blocks a worker thread forever and
``/dev/zero`` grows until memory runs out. ``open_regular`` is the one way those
paths are opened:

1. the path is resolved (every symlink followed); with a ``root`` the result
   must lie inside it, and it never lies under ``/proc``, ``/sys`` or ``/dev``
   (procfs files report themselves as regular files of size 0);
2. ``lstat`` of the resolved path must say regular file, so a device or FIFO is
   refused without ever being opened;
3. it is opened with ``O_NOFOLLOW`` (a final component swapped for a symlink
   since step 1 fails) and ``O_NONBLOCK`` (a FIFO swapped in cannot block the
   open); ``fstat`` of the descriptor must again say regular file, and the
   path the kernel reports for the descriptor (``/proc/self/fd``) must still
   be inside the root: that catches a directory swapped for a symlink between
   the check and the open, the race left by steps 1 and 2.

Refusals are ``Refused`` with a stable short ``reason`` (``REASONS``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO, Final, Literal

Reason = Literal["outside_workspace", "system_path", "not_regular", "unreadable", "vanished"]
REASONS: Final[tuple[Reason, ...]] = (
    "outside_workspace",
    "system_path",
    "not_regular",
    "unreadable",
    "vanished",
)
"""Why a file was not read: it resolves outside the root; under /proc, /sys or /dev;
it is no regular file (directory, FIFO, device, socket); opening or reading it
failed (permissions, I/O); it does not exist (any more), e.g. a dangling symlink."""

SYSTEM_DIRS: Final = (Path("/proc"), Path("/sys"), Path("/dev"))
"""Pseudo-filesystems: never read, whatever their files claim to be."""

_FD_DIR: Final = Path("/proc/self/fd")


class Refused(Exception):
    """A file that must not (or cannot) be read; ``reason`` is one of ``REASONS``."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: Reason = reason
        self.detail = detail


def is_system_path(resolved: Path) -> bool:
    """Whether a resolved path lies under /proc, /sys or /dev."""
    return any(resolved == d or resolved.is_relative_to(d) for d in SYSTEM_DIRS)


def resolve(path: Path) -> Path:
    """``path`` with every symlink followed (missing components allowed).

    A symlink loop or a NUL character is ``Refused("unreadable")``, not a
    RuntimeError or ValueError.
    """
    if "\0" in str(path):
        raise Refused("unreadable", "contains a NUL character")
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:
        raise Refused("unreadable", f"cannot resolve: {exc}") from None


def open_regular(path: Path, root: Path | None = None) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file (inside ``root``, a resolved directory).

    Raises ``Refused`` otherwise; nothing is read from a refused file, and a
    device or FIFO is not even opened. The caller closes the returned file.
    """
    resolved = resolve(path)
    _check_place(resolved, root)
    try:
        before = os.lstat(resolved)
    except FileNotFoundError:
        raise Refused("vanished", "no such file") from None
    except OSError as exc:
        raise Refused("unreadable", exc.strerror or str(exc)) from None
    if not stat.S_ISREG(before.st_mode):
        raise Refused("not_regular", "not a regular file")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(resolved, flags)
    except FileNotFoundError:
        raise Refused("vanished", "no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the file became a symlink since it was resolved
            raise Refused("not_regular", "became a symlink") from None
        raise Refused("unreadable", exc.strerror or str(exc)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused("not_regular", "not a regular file")
        actual = _fd_path(fd)
        if actual is not None:
            _check_place(actual, root)
        # Regular files ignore O_NONBLOCK; cleared anyway so reads behave as usual.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_place(resolved: Path, root: Path | None) -> None:
    if root is not None and not resolved.is_relative_to(root):
        raise Refused("outside_workspace", "resolves outside the workspace")
    if is_system_path(resolved):
        raise Refused("system_path", "under /proc, /sys or /dev")


def _fd_path(fd: int) -> Path | None:
    """Where the kernel says the open file is (None where /proc is not mounted)."""
    try:
        link = os.readlink(_FD_DIR / str(fd))
    except OSError:
        return None
    # A file unlinked since the open reads "<path> (deleted)": the place still counts.
    return Path(link.removesuffix(" (deleted)"))
