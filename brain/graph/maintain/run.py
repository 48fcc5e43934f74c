"""The scheduler: ``maintain`` runs the asked tasks in order over one snapshot, and its report.

Tested in tests/brain/graph/maintain/test_run.py (dry runs, transactions, constitutional
nodes, the engine).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Final

from brain.graph.maintain.connect import connect
from brain.graph.maintain.decay import decay
from brain.graph.maintain.measure import Health, health, measure
from brain.graph.maintain.merge import merge
from brain.graph.maintain.options import TASKS, MaintainOptions, check_tasks
from brain.graph.maintain.prune import prune
from brain.graph.maintain.scale import scale
from brain.graph.maintain.snapshot import FULL_COLLECTIONS, Snapshot
from brain.graph.maintain.writer import Writer
from brain.graph.mirror import Graph, Step
from brain.graph.nodes import graph_epoch
from brain.progress import Progress, ignore
from brain.store.connection import Store
from brain.store.groupsync import GroupSync

__all__ = ["MaintainReport", "maintain"]


@dataclass(frozen=True, slots=True)
class MaintainReport:
    """What a run measured and changed (or, dry, would change)."""

    health_before: Health
    health_after: Health
    tasks: dict[str, dict[str, Any]]
    dry_run: bool
    took_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return asdict(self)


_TaskFn = Callable[[Snapshot, Writer, MaintainOptions, datetime], dict[str, Any]]
_RUNNERS: Final[dict[str, _TaskFn]] = {
    "decay": decay,
    "merge": merge,
    "prune": prune,
    "connect": connect,
    "scale": scale,
}


def maintain(
    store: Store,
    graph: Graph | None = None,
    tasks: Sequence[str] = TASKS,
    *,
    dry_run: bool = False,
    options: MaintainOptions | None = None,
    now: datetime | None = None,
    progress: Progress = ignore,
    on_commit: Callable[[Step], None] | None = None,
) -> MaintainReport:
    """Run ``tasks`` (always in ``TASKS`` order); ``dry_run`` reports without writing.

    ``progress`` hears each task as it starts (done = tasks finished), then "done".

    ``graph`` (this process's mirror) follows every committed chunk (``Graph.advance``),
    and ``on_commit`` hears each one too (a child process sends them to its parent's
    mirror); other processes' mirrors reload, since every chunk bumps the epoch.
    """
    check_tasks(tasks)
    options = options or MaintainOptions()
    hear = on_commit
    if graph is not None:
        follow = graph

        def hear(step: Step) -> None:
            follow.advance([step], now=False)  # applied by the first reader that needs it
            if on_commit is not None:
                on_commit(step)

    following = graph.following() if graph is not None else contextlib.nullcontext()
    try:
        with (
            FULL_COLLECTIONS.held_off(),
            following,
            _synced_once(store, dry_run),
            _roomy_cache(store),
        ):
            return _run(store, tasks, dry_run, options, now or datetime.now(UTC), progress, hear)
    finally:
        if graph is not None:
            graph.advance([])  # the steps no reader needed yet, now


def _run(
    store: Store,
    tasks: Sequence[str],
    dry_run: bool,
    options: MaintainOptions,
    moment: datetime,
    progress: Progress,
    on_commit: Callable[[Step], None] | None,
) -> MaintainReport:
    started = time.perf_counter()
    epoch: int | None = graph_epoch(store)
    snap = Snapshot.load(store)
    if graph_epoch(store) != epoch:
        epoch = None  # another process wrote while it was read
    before = measure(snap)
    writer = Writer(store, options.chunk, dry_run, on_commit)
    reports: dict[str, dict[str, Any]] = {}
    wanted = [name for name in TASKS if name in tasks and name in _RUNNERS]
    for name in wanted:
        progress(len(reports), len(wanted), name)
        task_started = time.perf_counter()
        report = _RUNNERS[name](snap, writer, options, moment)
        report["took_ms"] = round((time.perf_counter() - task_started) * 1000, 3)
        reports[name] = report
    progress(len(reports), len(wanted), "done")
    after = measure(snap) if dry_run else _stored(store, snap, writer, epoch)
    return MaintainReport(
        health_before=before,
        health_after=after,
        tasks=reports,
        dry_run=dry_run,
        took_ms=round((time.perf_counter() - started) * 1000, 3),
    )


def _stored(store: Store, snap: Snapshot, writer: Writer, epoch: int | None) -> Health:
    """The graph's health as a real run left it stored.

    When nothing but this run wrote the graph since its snapshot was read (the epoch
    moved by this run's transactions alone, and as many nodes and edges are stored
    as the snapshot holds) the snapshot is what was stored: it is measured as it is
    (reading a million edges again was a sixth of a run at 100k nodes). Otherwise a
    row changed meanwhile was skipped, and the graph is read again. Traces are
    counted afresh either way (every query stores one, without touching the epoch).
    """
    if (
        epoch is not None
        and graph_epoch(store) == epoch + writer.bumps
        and int(store.scalar("SELECT count(*) FROM nodes")) == len(snap.nodes)
        and int(store.scalar("SELECT count(*) FROM edges")) == len(snap.edges)
    ):
        snap.traces = int(store.scalar("SELECT count(*) FROM traces"))
        return measure(snap)
    return health(store)


RUN_CACHE_KIB: Final = 131_072
"""SQLite's page cache while a run works (KiB; the default is 2,000)."""


@contextlib.contextmanager
def _roomy_cache(store: Store) -> Iterator[None]:
    """A page cache big enough for the edges table and its target index during the run.

    A run reads every edge, then rewrites them span by span: with SQLite's default
    2 MB cache, every page came back from the OS again (a pread each), and a
    prune's deletions at random places of the target index read most of its
    pages once per transaction; at 100k nodes that was a second of system time.
    Pages are allocated as read (a small graph costs nothing), and the cache
    shrinks back when the run ends.
    """
    before = int(store.scalar("PRAGMA cache_size"))
    store.execute(f"PRAGMA cache_size = {-RUN_CACHE_KIB}")
    try:
        yield
    finally:
        store.execute(f"PRAGMA cache_size = {before}")


_NORMAL: Final = 1  # PRAGMA synchronous values: OFF 0, NORMAL 1, FULL 2, EXTRA 3


@contextlib.contextmanager
def _synced_once(store: Store, dry_run: bool) -> Iterator[None]:
    """The run's chunks commit without an fsync each; one fsync of the WAL makes them
    all durable before the run returns.

    A chunk commit at FULL waited ~2.5 ms for the disk: a 100k-node run commits
    ~2,600 chunks (a million decayed edges at 500 a chunk), seconds of waiting. At
    NORMAL each commit still reaches the WAL file (a killed process loses nothing);
    a power cut may lose the last chunks, which is harmless: every write is
    conditional on the row as the snapshot saw it, and the next run does the lost
    ones again (decay from the same ``updated_at``). The report is answered only
    after the fsync, so what it says was done is durable.
    """
    level = int(store.scalar("PRAGMA synchronous"))
    if dry_run or level <= _NORMAL:
        yield
        return
    store.execute("PRAGMA synchronous = NORMAL")
    try:
        yield
    finally:
        store.execute(f"PRAGMA synchronous = {level}")
    GroupSync(store.path.with_name(store.path.name + "-wal")).wait()
