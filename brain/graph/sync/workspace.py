"""Reading a workspace: which files, at which authority, refusing anything leading out of it.

Tested in tests/brain/graph/sync/test_workspace.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from brain.errors import InvalidInput
from brain.graph.nodes import AUTHORITIES, Authority
from brain.graph.sync.chunks import CHUNK_CHARS, Chunk, chunk_markdown
from brain.store.fileguard import REASONS, Refused, is_system_path, open_regular, resolve

__all__ = [
    "DEFAULT_AUTHORITY",
    "DEFAULT_FILES",
    "MEMORY_DIR",
    "REFUSALS",
    "Listed",
    "Refusal",
    "Workspace",
    "WorkspaceFile",
    "authority_levels",
    "read_workspace",
    "workspace_paths",
]

DEFAULT_FILES: Final[tuple[str, ...]] = ("AGENTS.md", "SOUL.md", "USER.md", "MEMORY.md", "TOOLS.md")
"""Files read from the top of every workspace (besides ``memory/*.md``)."""
MEMORY_DIR: Final = "memory"
DEFAULT_AUTHORITY: Final[Mapping[str, Authority]] = {
    "SOUL.md": "constitutional",
    "AGENTS.md": "constitutional",
    "USER.md": "canonical",
    "TOOLS.md": "canonical",
    "MEMORY.md": "canonical",
}
"""Authority by file name; any other file is ``overlay``."""


@dataclass(frozen=True, slots=True)
class WorkspaceFile:
    """One file read for sync: where it is, what it is called in the graph, its chunks."""

    path: Path
    source: str
    """The resolved path relative to the workspace (POSIX form)."""
    authority: Authority
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A file (or extra path) sync did not read, and why.

    ``path`` is as listed: relative to the workspace, or the extra path as given.
    ``reason`` is one of ``REFUSALS``.
    """

    path: str
    reason: str


REFUSALS: Final = ("absolute_path", *REASONS)
"""Why sync did not read a file: ``absolute_path`` (an extra path that is not
relative), then ``brain.store.fileguard.REASONS`` (``outside_workspace`` above all)."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """A workspace as read from disk: its resolved directory, its files in order, the refused."""

    root: Path
    files: tuple[WorkspaceFile, ...]
    refused: tuple[Refusal, ...] = ()


@dataclass(frozen=True, slots=True)
class Listed:
    """A file sync will try to read: its path as listed (under the root) and its name there."""

    path: Path
    name: str


def authority_levels(overrides: Mapping[str, str] | None = None) -> dict[str, Authority]:
    """The default levels by file name with ``overrides`` (name or relative path) on top."""
    levels: dict[str, Authority] = dict(DEFAULT_AUTHORITY)
    for name, level in (overrides or {}).items():
        if level not in AUTHORITIES:
            raise InvalidInput("authority", f"{name}: must be one of {', '.join(AUTHORITIES)}")
        levels[name] = level
    return levels


def workspace_paths(
    root: Path, paths: Iterable[str | Path] = ()
) -> tuple[list[Listed], list[Refusal]]:
    """The files a sync of ``root`` (resolved) tries to read, and the extra paths it refuses.

    The defaults that exist come first, then ``memory/*.md``, then ``paths``: each
    relative to the workspace and, after symlinks, inside it (an absolute one or
    one leading out is refused, not read, whether it exists or not); a directory
    adds its ``*.md`` files, recursively, without entering symlinked directories.
    An extra path inside the workspace that does not exist is an error (rather
    than a silent removal of its chunks). Whether a listed file may be read is
    decided when it is opened (``brain.store.fileguard.open_regular``).
    """
    listed: list[Listed] = []
    refused: list[Refusal] = []

    def add(path: Path) -> None:
        listed.append(Listed(path, path.relative_to(root).as_posix()))

    for name in DEFAULT_FILES:
        if os.path.lexists(root / name):
            add(root / name)
    memory = root / MEMORY_DIR
    if memory.is_dir():
        if _inside(memory, root):
            for path in _markdown_in(memory, root, refused):
                add(path)
        else:
            refused.append(Refusal(MEMORY_DIR, "outside_workspace"))
    for extra in paths:
        given = str(extra)
        if "\0" in given:
            raise InvalidInput("paths", f"{given!r}: contains a NUL character")
        if os.path.isabs(given) or given.startswith("~"):
            refused.append(Refusal(given, "absolute_path"))
            continue
        path = root / given
        try:
            if not resolve(path).is_relative_to(root):
                refused.append(Refusal(given, "outside_workspace"))
                continue
        except Refused as exc:  # a symlink loop
            refused.append(Refusal(given, exc.reason))
            continue
        if not os.path.lexists(path):
            raise InvalidInput("paths", f"{given}: no such file or directory")
        if path.is_dir():
            for inner in _markdown_under(path, root, refused):
                add(inner)
        else:
            add(path)
    return listed, refused


def _inside(path: Path, root: Path) -> bool:
    try:
        return resolve(path).is_relative_to(root)
    except Refused:
        return False


def _markdown_in(directory: Path, root: Path, refused: list[Refusal]) -> list[Path]:
    """``*.md`` entries of ``directory`` (any type: opening decides), sorted.

    A directory that cannot be listed (gone, no permission) is refused, not an error.
    """
    try:
        with os.scandir(directory) as entries:
            names = [e.name for e in entries if e.name.endswith(".md")]
    except OSError as exc:
        refused.append(_unlistable(directory, root, exc))
        return []
    return [directory / name for name in sorted(names)]


def _markdown_under(directory: Path, root: Path, refused: list[Refusal]) -> list[Path]:
    """``*.md`` entries below ``directory``, sorted; symlinked directories are not entered."""
    found: list[Path] = []

    def failed(exc: OSError) -> None:
        refused.append(_unlistable(Path(exc.filename or directory), root, exc))

    for top, _dirs, names in os.walk(directory, onerror=failed, followlinks=False):
        found.extend(Path(top) / n for n in names if n.endswith(".md"))
    return sorted(found)


def _unlistable(directory: Path, root: Path, exc: OSError) -> Refusal:
    name = directory.relative_to(root).as_posix() if directory.is_relative_to(root) else "."
    return Refusal(name, "vanished" if isinstance(exc, FileNotFoundError) else "unreadable")


def read_workspace(
    workspace: str | Path,
    paths: Iterable[str | Path] = (),
    authority: Mapping[str, str] | None = None,
    *,
    max_chars: int = CHUNK_CHARS,
) -> Workspace:
    """Read and chunk a workspace's files (no database access: run it outside locks).

    Only regular files that resolve inside the workspace are read; every other
    listed file is reported in ``refused`` and never read (not even opened when
    it is a device or FIFO). A file that vanishes while the workspace is read is
    refused as ``vanished``.
    """
    given = Path(workspace).expanduser()
    if not given.is_dir():
        raise InvalidInput("workspace", f"{workspace}: not a directory")
    root = given.resolve()
    if is_system_path(root):
        raise InvalidInput("workspace", f"{workspace}: under /proc, /sys or /dev")
    levels = authority_levels(authority)
    listed, refused = workspace_paths(root, paths)
    files: list[WorkspaceFile] = []
    sources: set[str] = set()  # a file listed twice (or linked to) is read once
    for entry in listed:
        try:
            source = resolve(entry.path).relative_to(root).as_posix()
            if source in sources:
                continue
            with open_regular(entry.path, root) as handle:
                data = handle.read()
        except Refused as exc:
            refused.append(Refusal(entry.name, exc.reason))
            continue
        except ValueError:  # resolves outside the root (open_regular would refuse it too)
            refused.append(Refusal(entry.name, "outside_workspace"))
            continue
        except OSError:  # a read that failed after the open
            refused.append(Refusal(entry.name, "unreadable"))
            continue
        sources.add(source)
        level = levels.get(source) or levels.get(entry.path.name) or "overlay"
        # utf-8-sig: a byte order mark must not hide the first heading.
        text = data.decode("utf-8-sig", errors="replace")
        files.append(
            WorkspaceFile(entry.path, source, level, tuple(chunk_markdown(text, max_chars)))
        )
    refused = list(dict.fromkeys(refused))  # a file listed twice is reported once
    return Workspace(root, tuple(files), tuple(refused))
