"""Workspace sync: an agent's markdown files as heading-aware ``chunk`` nodes of the graph.

A workspace is a directory holding ``AGENTS.md``, ``SOUL.md``, ``USER.md``,
``MEMORY.md``, ``TOOLS.md`` and ``memory/*.md`` (any of them may be missing), plus
whatever extra files or directories the caller names (relative to the workspace).
Only regular files that resolve, after symlinks, inside the workspace are read:
anything else (a symlink to ``/proc/self/environ`` or ``/etc/shadow``, a FIFO, a
path leading out) is refused, reported with a reason and never read. Each file is cut into
chunks at its ATX headings (``#`` .. ``######``, not inside code fences); a chunk
keeps its heading path (``A > B``) and its 1-based line range, and a section
longer than ``max_chars`` is cut further at blank lines (never mid-line, never
at a blank line inside a code fence). The chunks of a file, joined, are the
file's text exactly.

Sync is incremental. A chunk's identity is (workspace, path relative to it,
hash of its text, which occurrence of that text in the file it is): a chunk
whose identity is already stored keeps its node (its line range, heading path
and authority are updated in place when they moved), a new or edited chunk
becomes a new node queued for embedding, and the nodes of chunks that are gone
are deleted with their edges (``ON DELETE CASCADE``), vectors and queue rows.
A workspace's chunks are exactly those of the files its last sync read: a file
deleted from disk, or an extra path not named again, loses its nodes.
Consecutive chunks of a file are linked both ways by weak ``sequence`` edges;
an existing edge between them (learned or ``similar``) is left as it is.

Each file is one transaction (and so is each batch of removed nodes), so a sync
never holds the write lock for long while a daemon serves the same database.
Every transaction that changes nodes or edges bumps the graph epoch, and one
that deletes vectors bumps the node vectors' epoch, so every process's mirror
and vector index reload before they answer again.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import orjson

from brain.clock import now_iso
from brain.errors import InvalidInput
from brain.graph.nodes import AUTHORITIES, Authority, NewNode, bump_epoch, insert_node
from brain.store.connection import Store
from brain.store.fileguard import REASONS, Refused, is_system_path, open_regular, resolve
from brain.vectors.index import Pending, note_vectors_changed, pending_batch, text_hash

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
CHUNK_CHARS: Final = 1_500
"""A section longer than this is cut at blank lines (a single longer line stays whole)."""
SEQUENCE_WEIGHT: Final = 0.2
"""Weight of the ``sequence`` edge each way between consecutive chunks of a file."""
REMOVE_BATCH: Final = 500
"""Nodes deleted per transaction when files leave the workspace."""

_HEADING: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE: Final = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


# -- chunking ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a markdown file: its heading path, text and 1-based line range."""

    heading: str
    text: str
    line_start: int
    line_end: int


def split_lines(text: str) -> list[str]:
    r"""``text`` as lines with their ``\n`` kept (the last one may lack it).

    Only ``\n`` ends a line, as in editors and ``wc -l``; ``str.splitlines`` would
    also split at form feeds and Unicode separators and number lines differently.
    """
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def chunk_markdown(text: str, max_chars: int = CHUNK_CHARS) -> list[Chunk]:
    """Chunks of a markdown text, in order; joined, their texts are ``text``.

    A text with nothing but whitespace has no chunks. Blank lines that would be a
    chunk of their own (before the first heading) join the chunk after them.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    lines = split_lines(text)
    fenced = _fenced(lines)
    pieces: list[tuple[str, int, int]] = []
    for heading, start, end in _sections(lines, fenced):
        pieces.extend((heading, s, e) for s, e in _cut(lines, fenced, start, end, max_chars))
    merged: list[tuple[str, int, int]] = []
    carry: int | None = None  # start of blank lines waiting for the next chunk
    for heading, start, end in pieces:
        if not "".join(lines[start:end]).strip():
            if merged:
                last = merged[-1]
                merged[-1] = (last[0], last[1], end)
            elif carry is None:
                carry = start
            continue
        merged.append((heading, start if carry is None else carry, end))
        carry = None
    return [Chunk(h, "".join(lines[s:e]), s + 1, e) for h, s, e in merged]


def _fenced(lines: Sequence[str]) -> list[bool]:
    """Per line, whether it is inside a fenced code block (fence lines included)."""
    out: list[bool] = []
    fence: str | None = None
    for line in lines:
        match = _FENCE.fullmatch(line.rstrip("\r\n"))
        if fence is None:
            if match is not None and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                fence = match.group(1)
                out.append(True)
            else:
                out.append(False)
        else:
            out.append(True)
            if (
                match is not None
                and not match.group(2).strip()
                and match.group(1)[0] == fence[0]
                and len(match.group(1)) >= len(fence)
            ):
                fence = None
    return out


def _sections(lines: Sequence[str], fenced: Sequence[bool]) -> list[tuple[str, int, int]]:
    """(heading path, first line index, end index) of each section, preamble included."""
    sections: list[tuple[str, int, int]] = []
    stack: list[tuple[int, str]] = []
    path, start = "", 0
    for i, line in enumerate(lines):
        if fenced[i]:
            continue
        match = _HEADING.fullmatch(line.rstrip("\r\n"))
        if match is None:
            continue
        if i > start:
            sections.append((path, start, i))
        level = len(match.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, (match.group(2) or "").strip()))
        path = " > ".join(title for _, title in stack if title)
        start = i
    if start < len(lines):
        sections.append((path, start, len(lines)))
    return sections


def _cut(
    lines: Sequence[str], fenced: Sequence[bool], start: int, end: int, max_chars: int
) -> list[tuple[int, int]]:
    """Line ranges covering [start, end) of at most ``max_chars`` where it can be helped.

    Blocks end after a run of blank lines outside code fences; blocks are packed
    greedily, and a block longer than the cap is cut between lines.
    """
    if sum(len(line) for line in lines[start:end]) <= max_chars:
        return [(start, end)]
    blocks: list[tuple[int, int]] = []
    block_start = start
    for i in range(start, end):
        blank = not lines[i].strip() and not fenced[i]
        next_blank = i + 1 < end and not lines[i + 1].strip() and not fenced[i + 1]
        if blank and not next_blank:
            blocks.append((block_start, i + 1))
            block_start = i + 1
    if block_start < end:
        blocks.append((block_start, end))
    units: list[tuple[int, int]] = []
    for s, e in blocks:
        if sum(len(line) for line in lines[s:e]) <= max_chars:
            units.append((s, e))
        else:
            units.extend((i, i + 1) for i in range(s, e))
    ranges: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    size = 0
    for s, e in units:
        cost = sum(len(line) for line in lines[s:e])
        if current is not None and size + cost <= max_chars:
            current, size = (current[0], e), size + cost
            continue
        if current is not None:
            ranges.append(current)
        current, size = (s, e), cost
    if current is not None:
        ranges.append(current)
    return ranges


# -- reading a workspace -------------------------------------------------------------


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


# -- applying a sync ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileSync:
    """What syncing one file changed, and the row ids of the nodes it added."""

    added: int
    kept: int
    moved: int
    removed: int
    edges: int
    new_rows: tuple[int, ...]


def chunk_key(root: Path, source: str, text: str, occurrence: int) -> str:
    """A chunk's identity as stored in ``nodes.dedup_key``.

    ``occurrence`` tells apart equal chunks of one file (the nth with this text).
    """
    raw = f"{root}\0{source}\0{text_hash(text).hex()}\0{occurrence}"
    return (
        "chunk:" + hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    )


def sync_file(store: Store, root: Path, file: WorkspaceFile) -> FileSync:
    """Bring one file's nodes and sequence edges in line with its chunks (one transaction)."""
    seen: dict[str, int] = {}
    wanted: list[tuple[str, Chunk]] = []
    for chunk in file.chunks:
        digest = text_hash(chunk.text)
        n = seen.get(digest.hex(), 0)
        seen[digest.hex()] = n + 1
        wanted.append((chunk_key(root, file.source, chunk.text, n), chunk))
    workspace = str(root)
    with store.transaction():
        existing = {
            str(r[1]): r
            for r in store.execute(
                "SELECT id, dedup_key, line_start, line_end, authority, metadata FROM nodes "
                "WHERE kind = 'chunk' AND source = ? AND metadata ->> '$.workspace' = ?",
                (file.source, workspace),
            )
        }
        order: list[int] = []
        new_rows: list[int] = []
        kept = moved = 0
        for key, chunk in wanted:
            metadata: dict[str, Any] = {"workspace": workspace, "heading": chunk.heading}
            row = existing.pop(key, None)
            if row is None:
                row_id, _node_id, created = insert_node(
                    store,
                    NewNode(
                        kind="chunk",
                        text=chunk.text,
                        authority=file.authority,
                        source=file.source,
                        line_start=chunk.line_start,
                        line_end=chunk.line_end,
                        metadata=metadata,
                        dedup_key=key,
                    ),
                )
                if created:
                    new_rows.append(row_id)
                order.append(row_id)
                continue
            row_id = int(row[0])
            order.append(row_id)
            stored_heading = orjson.loads(row[5]).get("heading") if row[5] else None
            if (row[2], row[3], row[4], stored_heading) == (
                chunk.line_start,
                chunk.line_end,
                file.authority,
                chunk.heading,
            ):
                kept += 1
                continue
            store.execute(
                "UPDATE nodes SET line_start = ?, line_end = ?, authority = ?, "
                "metadata = json_set(metadata, '$.heading', ?) WHERE id = ?",
                (chunk.line_start, chunk.line_end, file.authority, chunk.heading, row_id),
            )
            moved += 1
        gone = [int(r[0]) for r in existing.values()]
        delete_nodes(store, gone)
        edges = _sequence(store, order)
        if new_rows or moved or gone or edges:
            bump_epoch(store)
    return FileSync(len(new_rows), kept, moved, len(gone), edges, tuple(new_rows))


def delete_nodes(store: Store, row_ids: Sequence[int]) -> None:
    """Delete nodes with their edges, vectors and queue rows (inside the caller's transaction).

    The caller bumps the graph epoch; the node vectors' epoch is bumped here when
    a vector went, so no index keeps serving a row that is gone.
    """
    if not row_ids:
        return
    ids = orjson.dumps(list(row_ids))
    store.execute(
        "DELETE FROM embed_queue WHERE kind = 'node' "
        "AND row_id IN (SELECT value FROM json_each(?))",
        (ids,),
    )
    vectors = store.one(
        "SELECT count(*) FROM vectors WHERE kind = 'node' "
        "AND row_id IN (SELECT value FROM json_each(?))",
        (ids,),
    )
    if vectors is not None and int(vectors[0]):
        store.execute(
            "DELETE FROM vectors WHERE kind = 'node' "
            "AND row_id IN (SELECT value FROM json_each(?))",
            (ids,),
        )
        note_vectors_changed(store, ("node",))
    store.execute("DELETE FROM nodes WHERE id IN (SELECT value FROM json_each(?))", (ids,))


def _sequence(store: Store, order: Sequence[int]) -> int:
    """Make the ``sequence`` edges among a file's nodes follow ``order``; edges written.

    Sequence edges between nodes no longer next to each other go; missing ones are
    added at ``SEQUENCE_WEIGHT`` each way. An edge already present between
    neighbours (of any kind, with whatever weight learning gave it) stays.
    """
    ids = orjson.dumps(list(order))
    have = {
        (int(r[0]), int(r[1]))
        for r in store.execute(
            "SELECT source, target FROM edges WHERE kind = 'sequence' "
            "AND source IN (SELECT value FROM json_each(?)) "
            "AND target IN (SELECT value FROM json_each(?))",
            (ids, ids),
        )
    }
    want: set[tuple[int, int]] = set()
    for a, b in itertools.pairwise(order):
        want |= {(a, b), (b, a)}
    stale = sorted(have - want)
    before = store.total_changes()
    store.executemany(
        "DELETE FROM edges WHERE source = ? AND target = ? AND kind = 'sequence'", stale
    )
    missing = sorted(want - have)
    stamp = now_iso()
    store.executemany(
        "INSERT INTO edges (source, target, weight, kind, updated_at) "
        "VALUES (?, ?, ?, 'sequence', ?) ON CONFLICT (source, target) DO NOTHING",
        [(a, b, SEQUENCE_WEIGHT, stamp) for a, b in missing],
    )
    return int(store.total_changes() - before)


def remove_missing(store: Store, root: Path, keep: Iterable[str]) -> tuple[int, int]:
    """Delete up to ``REMOVE_BATCH`` nodes of the workspace's files not in ``keep``.

    One transaction; returns (nodes deleted, nodes left to delete). Call until
    nothing is left.
    """
    kept = orjson.dumps(sorted(set(keep)))
    with store.transaction():
        rows = [
            int(r[0])
            for r in store.execute(
                "SELECT id FROM nodes WHERE kind = 'chunk' AND metadata ->> '$.workspace' = ? "
                "AND source NOT IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?",
                (str(root), kept, REMOVE_BATCH + 1),
            )
        ]
        batch = rows[:REMOVE_BATCH]
        delete_nodes(store, batch)
        if batch:
            bump_epoch(store)
    return len(batch), len(rows) - len(batch)


def workspace_nodes(store: Store, root: Path) -> int:
    """How many chunk nodes the workspace has."""
    return int(
        store.scalar(
            "SELECT count(*) FROM nodes WHERE kind = 'chunk' AND metadata ->> '$.workspace' = ?",
            (str(root),),
        )
    )


def pending_nodes(store: Store, row_ids: Sequence[int]) -> Pending:
    """The nodes among ``row_ids`` still queued, as a batch for ``VectorIndex.put``.

    Texts with a stored vector (the same text elsewhere) are copied, not embedded
    again; each other text is embedded once.
    """
    rows = list(
        store.execute(
            # CROSS JOIN keeps the id list outermost: SQLite otherwise walked the whole
            # queue per batch, rescanning the list for each row (quadratic in a sync).
            "SELECT n.id, n.content || coalesce(char(10) || (n.metadata ->> '$.query'), '') "
            "FROM json_each(?) j CROSS JOIN embed_queue q "
            "ON q.kind = 'node' AND q.row_id = j.value "
            "JOIN nodes n ON n.id = q.row_id ORDER BY n.id",
            (orjson.dumps(list(row_ids)),),
        )
    )
    return pending_batch(
        store,
        [("node", int(r[0])) for r in rows],
        [0] * len(rows),
        [str(r[1]) for r in rows],
    )


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What a sync did.

    ``added`` + ``kept`` + ``moved`` is the number of chunks the files have now:
    ``kept`` nodes did not change at all, ``moved`` ones kept their node but got a
    new line range, heading path or authority. ``removed`` nodes were deleted.
    ``embedded`` of the added nodes have a vector on return; ``pending`` wait for
    the background embedder (another process owns the index with another
    embedder, or the provider failed). ``refused`` files were never read and
    have no chunks (any they had are removed).
    """

    workspace: str
    files: int
    added: int
    kept: int
    moved: int
    removed: int
    nodes: int
    edges: int
    embedded: int
    pending: int
    took_ms: float
    refused: tuple[Refusal, ...] = ()
    """Files listed but not read (``{path, reason}``, reasons in ``REFUSALS``)."""


@dataclass(frozen=True, slots=True)
class SyncIndexed:
    """A sync before embedding: its report so far, the nodes it added, when it started."""

    indexed: SyncReport
    new_rows: tuple[int, ...]
    started: float

    def report(self, embedded: int) -> SyncReport:
        """The sync's report once ``embedded`` of the new nodes got their vectors."""
        took_ms = round((time.perf_counter() - self.started) * 1000, 3)
        pending = len(self.new_rows) - embedded
        return replace(self.indexed, embedded=embedded, pending=pending, took_ms=took_ms)
