"""A sync's database part, run: the workspace read, each file applied in its own short
transaction, the files gone removed in batches, the report so far.

Tested through ``Brain.sync``: ``tests/brain/graph/sync/test_apply.py`` and
``tests/e2e/test_sync_daemon.py``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from brain.graph.sync.apply import remove_missing, sync_file, workspace_nodes
from brain.graph.sync.chunks import CHUNK_CHARS
from brain.graph.sync.report import SyncIndexed, SyncReport
from brain.graph.sync.workspace import read_workspace
from brain.progress import Progress, ignore
from brain.store.connection import StoreLease


def index_workspace(
    lease: StoreLease,
    workspace: str | Path,
    paths: Sequence[str | Path] = (),
    authority: Mapping[str, str] | None = None,
    *,
    max_chars: int | None = None,
    progress: Progress = ignore,
) -> SyncIndexed:
    """A sync's database part: the workspace's files indexed as nodes, new nodes left queued.

    Files are read with no store held; each file is then one short transaction on a
    store ``lease`` lends, and so is each batch of removals, so other requests and
    other processes' writes go on between them. ``progress`` hears files indexed
    (phase ``index``).
    """
    started = time.perf_counter()
    chars = CHUNK_CHARS if max_chars is None else max_chars
    read = read_workspace(workspace, paths, authority, max_chars=chars)
    added = kept = moved = removed = edges = 0
    new_rows: list[int] = []
    for n, file in enumerate(read.files):
        progress(n, len(read.files), "index")
        with lease() as store:
            done = sync_file(store, read.root, file)
        added, kept, moved = added + done.added, kept + done.kept, moved + done.moved
        removed, edges = removed + done.removed, edges + done.edges
        new_rows.extend(done.new_rows)
    progress(len(read.files), len(read.files), "index")
    sources = [f.source for f in read.files]
    while True:
        with lease() as store:
            gone, left = remove_missing(store, read.root, sources)
        removed += gone
        if not left:
            break
    with lease() as store:
        nodes = workspace_nodes(store, read.root)
    report = SyncReport(
        workspace=str(read.root),
        files=len(read.files),
        added=added,
        kept=kept,
        moved=moved,
        removed=removed,
        nodes=nodes,
        edges=edges,
        embedded=0,
        pending=len(new_rows),
        took_ms=0.0,
        refused=read.refused,
    )
    return SyncIndexed(report, tuple(new_rows), started)
