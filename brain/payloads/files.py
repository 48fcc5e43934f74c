"""Payload files: large values kept beside the database, one file per ``file_`` id.

A file is written to a temporary name, fsynced, renamed into place and its
directory fsynced before the row that names it commits, so a committed row
never points at a missing or partial file. Ids are generated
(``brain.lcm.content.new_file_id``) and checked against a strict pattern before
they touch the filesystem, so no input can name a path outside the directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from pathlib import Path
from typing import Final

from brain.errors import NotFound, PayloadMissing, StorageError
from brain.store.connection import Store

FILE_ID_RE: Final = re.compile(r"file_[0-9a-f]{16}")
_TMP_PREFIX: Final = ".tmp-"


def file_path(files_dir: Path, file_id: str) -> Path:
    """The path of a payload file; refuses anything that is not a generated id."""
    if not FILE_ID_RE.fullmatch(file_id):
        raise NotFound(f"no such file: {file_id!r}", file_id=file_id)
    return files_dir / file_id


def write_file(files_dir: Path, file_id: str, data: bytes) -> Path:
    """Durably write ``data`` as ``file_id`` (temp file, fsync, rename, fsync dir)."""
    final = file_path(files_dir, file_id)
    tmp = files_dir / f"{_TMP_PREFIX}{file_id}"
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except FileNotFoundError:
            # The directory was removed under a running process: make it again
            # (not its parents: a database directory that is gone is a real failure).
            files_dir.mkdir(exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        _fsync_dir(files_dir)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StorageError(f"cannot write payload file {file_id}: {exc}") from exc
    return final


def open_payload(files_dir: Path, file_id: str) -> int:
    """An fd open for reading on a payload file, refusing anything but a regular file.

    ``O_NOFOLLOW`` because a symlink planted in the directory would otherwise
    serve an outside file's bytes; ``O_NONBLOCK`` so a FIFO there cannot hang
    the open; the type is checked on the opened fd, so nothing can be swapped
    in between. A refused entry reads as absent (``NotFound``), which callers
    that hold a stored row report as a missing payload.
    """
    path = file_path(files_dir, file_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFound(f"no such file: {file_id}", file_id=file_id) from None
    except OSError as exc:
        if os.path.islink(path):
            msg = f"no such file: {file_id} (not a regular file)"
            raise NotFound(msg, file_id=file_id) from None
        raise StorageError(f"cannot read payload file {file_id}: {exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotFound(f"no such file: {file_id} (not a regular file)", file_id=file_id)
    return fd


def read_file(files_dir: Path, file_id: str) -> bytes:
    """The bytes of a payload file (a regular file only: see ``open_payload``)."""
    fd = open_payload(files_dir, file_id)
    try:
        with os.fdopen(fd, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise StorageError(f"cannot read payload file {file_id}: {exc}") from exc


def read_stored_file(files_dir: Path, file_id: str) -> bytes:
    """The bytes of a payload file that a stored row names.

    Its absence is damage to report (``PayloadMissing``), not an unknown id.
    """
    try:
        return read_file(files_dir, file_id)
    except NotFound:
        raise PayloadMissing(file_id) from None


def remove_file(files_dir: Path, file_id: str) -> None:
    """Remove a payload file if it exists (used to undo a rolled-back write)."""
    with contextlib.suppress(FileNotFoundError):
        file_path(files_dir, file_id).unlink()


def sweep_stray_files(store: Store, older_than_s: float) -> None:
    """Remove payload files no ``large_files`` row names (a write that never committed:
    a killed process), older than ``older_than_s``."""
    known = {str(r[0]) for r in store.execute("SELECT file_id FROM large_files")}
    for path in stray_files(store.files_dir, known, older_than_s):
        with contextlib.suppress(OSError):
            path.unlink()


def stray_files(files_dir: Path, known: set[str], older_than_s: float) -> list[Path]:
    """Files in the directory that no row names (or leftover temp files), older than a grace.

    The grace period matters because another process may have written a file
    and not yet committed the row naming it.
    """
    cutoff = time.time() - older_than_s
    strays: list[Path] = []
    try:
        entries = list(os.scandir(files_dir))
    except FileNotFoundError:
        return strays
    for entry in entries:
        name = entry.name
        is_tmp = name.startswith(_TMP_PREFIX)
        if not is_tmp and (not FILE_ID_RE.fullmatch(name) or name in known):
            continue
        with contextlib.suppress(FileNotFoundError):
            if entry.stat().st_mtime < cutoff:
                strays.append(Path(entry.path))
    return strays


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
