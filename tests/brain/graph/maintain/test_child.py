"""Maintenance in a child process: the same report, errors as themselves, steps in order,
and a run the caller gives up on ends the child."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from brain import BrainConfig, Store, open_store
from brain.errors import DatabaseFileLost, InvalidInput
from brain.graph.maintain import MaintainOptions, maintain
from brain.graph.maintain.child import APPLY_SHARE, NICENESS, maintain_in_child
from brain.graph.mirror import Step
from brain.graph.nodes import graph_epoch
from tests.brain.graph.maintain.helpers import DAY, T0, G, dump, mixed

APPLY_S = 0.02
EDGES = 300


def _children() -> list[int]:
    """This process's children still running ``brain.graph.maintain.child``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"brain.graph.maintain.child" in command:
            found.append(int(entry.name))
    return found


def _without_times(tasks: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    return {name: {k: v for k, v in r.items() if k != "took_ms"} for name, r in tasks.items()}


def test_a_dry_run_in_a_child_reports_what_one_in_process_does_and_writes_nothing(g: G) -> None:
    mixed(g)
    before = dump(g.store)
    here = maintain(g.store, dry_run=True, now=T0)
    there = maintain_in_child(
        g.store.path, g.store.config, g.store.identity, ["decay", "merge", "prune"], dry_run=True
    )
    assert dump(g.store) == before
    assert there.dry_run
    assert there.health_before == here.health_before
    assert there.tasks.keys() == {"decay", "merge", "prune"}
    # The child's clock is later than T0, which only moves the decayed weights.
    assert _without_times(there.tasks)["merge"] == _without_times(here.tasks)["merge"]


def test_every_committed_chunk_arrives_as_a_step_in_epoch_order(g: G) -> None:
    for i in range(7):
        g.node(f"n{i}")
    for i in range(6):
        g.edge(f"n{i}", f"n{i + 1}", 0.8, at=T0 - 30 * DAY)
    epoch = graph_epoch(g.store)
    steps: list[Step] = []
    phases: list[str] = []

    def heard(batch: Sequence[Step]) -> None:
        steps.extend(batch)

    report = maintain_in_child(
        g.store.path,
        g.store.config,
        g.store.identity,
        ["decay"],
        options=MaintainOptions(chunk=2, sweep=2),
        progress=lambda done, total, phase: phases.append(phase),
        on_commit=heard,
    )
    assert report.tasks["decay"]["decayed"] == 6
    assert [(s.before, s.after) for s in steps] == [(epoch + i, epoch + i + 1) for i in range(3)]
    assert sorted(op[1:3] for s in steps for op in s.delta.ops) == [
        (g.ids[f"n{i}"], g.ids[f"n{i + 1}"]) for i in range(6)
    ]
    assert phases == ["decay", "done"]
    assert graph_epoch(g.store) == epoch + 3


def test_an_error_in_the_child_is_raised_here_as_itself(store: Store) -> None:
    with pytest.raises(InvalidInput) as refused:
        maintain_in_child(store.path, store.config, store.identity, ["decay", "defrag"])
    assert refused.value.field == "tasks"
    assert "defrag" in refused.value.message
    with pytest.raises(DatabaseFileLost):  # another file at the path: never worked on
        maintain_in_child(store.path, store.config, (0, 0), ["decay"])
    assert _children() == []


def test_a_run_the_caller_gives_up_on_ends_the_child_and_leaves_the_database_whole(
    db_path: Path,
) -> None:
    store = open_store(db_path, BrainConfig())
    try:
        g = G(store, {})
        for i in range(50):
            g.node(f"n{i}")
        for i in range(49):
            g.edge(f"n{i}", f"n{i + 1}", 0.8, at=T0 - 30 * DAY)

        def give_up(done: int, total: int | None, phase: str) -> None:
            if phase == "merge":
                raise KeyboardInterrupt  # what a cancelled caller's thread sees

        with pytest.raises(KeyboardInterrupt):
            maintain_in_child(
                store.path,
                store.config,
                store.identity,
                ["decay", "merge", "prune"],
                options=MaintainOptions(chunk=5, sweep=5),
                progress=give_up,
            )
        assert _children() == []
        assert store.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        store.close()


def test_the_child_runs_at_a_lower_cpu_priority_than_its_parent(g: G) -> None:
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    if mine >= 19:
        pytest.skip("this process already runs at the lowest priority")
    g.node("a")
    seen: list[int] = []

    def heard(done: int, total: int, phase: str) -> None:
        seen.extend(os.getpriority(os.PRIO_PROCESS, pid) for pid in _children())

    maintain_in_child(g.store.path, g.store.config, g.store.identity, ["health"], progress=heard)
    assert seen
    assert set(seen) == {min(mine + NICENESS, 19)}


def test_the_pump_rests_after_applying_steps_and_hands_over_those_that_came_meanwhile_at_once(
    g: G,
) -> None:
    for i in range(EDGES + 1):
        g.node(f"n{i}")
    for i in range(EDGES):
        g.edge(f"n{i}", f"n{i + 1}", 0.8, at=T0 - 30 * DAY)
    calls: list[tuple[float, float, int]] = []

    def slow(batch: Sequence[Step]) -> None:  # applying takes the lock for APPLY_S
        started = time.monotonic()
        time.sleep(APPLY_S)
        calls.append((started, time.monotonic(), len(batch)))

    maintain_in_child(
        g.store.path,
        g.store.config,
        g.store.identity,
        ["decay"],
        options=MaintainOptions(chunk=1, sweep=1),
        on_commit=slow,
    )
    assert sum(n for _, _, n in calls) == EDGES
    assert len(calls) < EDGES  # steps that came while it applied or rested: one call
    # Between two calls the pump rested as long as it had applied (APPLY_SHARE 0.5);
    # only the last may come sooner: everything is handed over before the report.
    rest = APPLY_S * (1 - APPLY_SHARE) / APPLY_SHARE
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(calls[:-1])]
    assert all(gap >= rest * 0.9 for gap in gaps), gaps
