"""The ``files`` check and its repair: the payload files on disk against ``large_files``.

A missing or damaged payload is lost and only reported; the repair moves orphan files
aside (never deleting them) and removes stale temp files. Tested through the runner in
tests/brain/ops/doctor/test_runner.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Final

from brain.errors import NotFound
from brain.ops.doctor.report import Finding
from brain.payloads.files import FILE_ID_RE, file_path, stray_files
from brain.store.connection import Store

__all__ = ["check", "repair"]

_ORPHANS_DIR: Final = "orphans"
_HASH_CHUNK: Final = 1024 * 1024


def check(store: Store, deep: bool) -> Finding:
    """Check each payload file by presence and size (and sha256 when ``deep``); count strays."""
    found = Finding("files")
    rows = list(store.execute("SELECT file_id, byte_size, sha256 FROM large_files"))
    missing = wrong_size = wrong_hash = 0
    for file_id, size, digest in rows:
        try:
            path = file_path(store.files_dir, str(file_id))
            actual = path.stat().st_size
        except (NotFound, FileNotFoundError):
            missing += 1
            continue
        if actual != int(size):
            wrong_size += 1
        elif deep and _sha256(path) != str(digest):
            wrong_hash += 1
    found.count("large_files", len(rows))
    lost = "payload lost: not repairable; restoring its message fails"
    found.problem("error", "missing", missing, f"payload files missing on disk ({lost})")
    found.problem("error", "wrong_size", wrong_size, f"payload files with the wrong size ({lost})")
    found.problem(
        "error", "wrong_sha256", wrong_hash, f"payload files with the wrong sha256 ({lost})"
    )
    orphans, temps = _strays(store)
    found.problem(
        "warning",
        "orphans",
        len(orphans),
        "payload files no row names (older than the grace period)",
    )
    found.problem(
        "warning", "temp_files", len(temps), "leftover temp files (older than the grace period)"
    )
    return found


def _strays(store: Store) -> tuple[list[Path], list[Path]]:
    """Files no row names and temp files, older than the grace (younger ones may be mid-write)."""
    known = {str(r[0]) for r in store.execute("SELECT file_id FROM large_files")}
    strays = stray_files(store.files_dir, known, store.config.orphan_file_grace_s)
    orphans = [p for p in strays if FILE_ID_RE.fullmatch(p.name)]
    return orphans, [p for p in strays if not FILE_ID_RE.fullmatch(p.name)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def repair(store: Store, found: Finding) -> list[str]:
    """Move old orphan payload files to ``orphans/`` and remove old temp files."""
    done: list[str] = []
    orphans, temps = _strays(store)
    if orphans and found.has("orphans"):
        target = store.files_dir / _ORPHANS_DIR
        target.mkdir(exist_ok=True)
        moved = 0
        for path in orphans:
            # Checked again just before moving: a row naming it may have committed since.
            if store.scalar("SELECT 1 FROM large_files WHERE file_id = ?", (path.name,)):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.replace(path, target / path.name)
                moved += 1
        done.append(f"moved {moved} orphan payload files to {target}")
    if temps and found.has("temp_files"):
        removed = 0
        for path in temps:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
        done.append(f"removed {removed} temp files")
    return done
