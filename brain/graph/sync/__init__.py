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

from brain.graph.sync.apply import (
    REMOVE_BATCH,
    SEQUENCE_WEIGHT,
    FileSync,
    chunk_key,
    delete_nodes,
    pending_nodes,
    remove_missing,
    sync_file,
    workspace_nodes,
)
from brain.graph.sync.chunks import CHUNK_CHARS, Chunk, chunk_markdown, split_lines
from brain.graph.sync.report import SyncIndexed, SyncReport
from brain.graph.sync.run import index_workspace
from brain.graph.sync.workspace import (
    DEFAULT_AUTHORITY,
    DEFAULT_FILES,
    MEMORY_DIR,
    REFUSALS,
    Listed,
    Refusal,
    Workspace,
    WorkspaceFile,
    authority_levels,
    read_workspace,
    workspace_paths,
)

__all__ = [
    "index_workspace",
    "CHUNK_CHARS",
    "DEFAULT_AUTHORITY",
    "DEFAULT_FILES",
    "MEMORY_DIR",
    "REFUSALS",
    "REMOVE_BATCH",
    "SEQUENCE_WEIGHT",
    "Chunk",
    "FileSync",
    "Listed",
    "Refusal",
    "SyncIndexed",
    "SyncReport",
    "Workspace",
    "WorkspaceFile",
    "authority_levels",
    "chunk_key",
    "chunk_markdown",
    "delete_nodes",
    "pending_nodes",
    "read_workspace",
    "remove_missing",
    "split_lines",
    "sync_file",
    "workspace_nodes",
    "workspace_paths",
]
