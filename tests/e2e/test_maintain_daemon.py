"""Maintenance against a live daemon: ``brain maintain`` in another process, and the method."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from brain import open_store
from brain.graph.nodes import NewNode, insert_node
from protocol.framing import encode_frame
from tests.e2e.conftest import (
    BRAIN,
    DEADLINE,
    Spawn,
    ingest_frame,
    integrity,
    request_frame,
    serve_argv,
    stored_client_ids,
    user_message,
)

NOVA = "the staging database lives on host nova"


def test_brain_maintain_beside_a_serving_daemon_merges_prunes_and_loses_no_write(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path, "--embedder", "hash"))
    first = daemon.call(1, "teach", {"content": NOVA})["result"]
    twin = daemon.call(2, "teach", {"content": NOVA})["result"]  # no dedup key: a duplicate
    other = daemon.call(3, "teach", {"content": "lunch is at noon on fridays"})["result"]
    related = daemon.call(12, "teach", {"content": "the staging database on nova is backed up"})
    assert related["result"]["connected"]  # an edge for prune to take, besides the twins'
    before = daemon.call(4, "query", {"query": "where does the staging database live"})
    assert {first["node_id"], twin["node_id"]} <= set(before["result"]["fired_nodes"])
    assert daemon.call(5, "info")["result"]["edges"] >= 2

    # A half-life of under a millisecond decays every fresh edge below the prune threshold.
    maintain = subprocess.Popen(
        [
            str(BRAIN),
            "maintain",
            "--db",
            str(db_path),
            "--embedder",
            "hash",
            "--tasks",
            "decay,merge,prune",
            "--half-life-days",
            "0.00000001",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # The daemon keeps writing while maintenance runs.
    for i in range(20):
        daemon.send(ingest_frame(100 + i, "s", [user_message(i)]))
    answers = daemon.frames(20)
    assert all("result" in a for a in answers), answers
    out, err = maintain.communicate(timeout=DEADLINE)
    assert maintain.returncode == 0, err.decode()
    report = orjson.loads(out)
    assert report["tasks"]["merge"]["ids"] == [twin["node_id"]]
    assert report["tasks"]["prune"]["edges"] >= 2
    assert report["health_after"]["nodes"] == 3

    # The daemon's next answers reflect it: its mirror and vector index reload.
    info = daemon.call(6, "info")["result"]
    assert (info["nodes"], info["edges"]) == (3, 0)
    after = daemon.call(7, "query", {"query": "where does the staging database live"})["result"]
    assert twin["node_id"] not in after["fired_nodes"]
    assert after["fired_nodes"][0] == first["node_id"]
    health = daemon.call(8, "health")["result"]
    assert (health["nodes"], health["edges"], health["orphans"]) == (3, 0, 3)
    later = daemon.call(9, "teach", {"content": "the staging database backups run nightly"})
    assert later["result"]["created"] is True
    assert daemon.call(10, "info")["result"]["nodes"] == 4
    assert (
        other["node_id"]
        in daemon.call(11, "query", {"query": "lunch on fridays"})["result"]["fired_nodes"]
    )
    code, _ = daemon.finish()
    assert code == 0
    assert stored_client_ids(db_path, "s") == [f"m{i:04d}" for i in range(20)]
    assert integrity(db_path) == [("ok",)]


def test_the_maintain_method_reports_a_dry_run_then_does_it(db_path: Path, spawn: Spawn) -> None:
    daemon = spawn(serve_argv(db_path, "--embedder", "hash"))
    daemon.call(1, "teach", {"content": NOVA})
    daemon.call(2, "teach", {"content": NOVA})
    dry = daemon.call(3, "maintain", {"dry_run": True, "tasks": ["merge", "health"]})["result"]
    assert dry["dry_run"] is True
    assert list(dry["tasks"]) == ["merge"]
    assert dry["tasks"]["merge"]["merged"] == 1
    assert dry["health_after"]["nodes"] == 1
    assert daemon.call(4, "info")["result"]["nodes"] == 2
    done = daemon.call(5, "maintain", {"tasks": ["merge"]})["result"]
    assert done["tasks"]["merge"]["ids"] == dry["tasks"]["merge"]["ids"]
    assert daemon.call(6, "info")["result"]["nodes"] == 1
    assert daemon.call(7, "ping")["result"] == {"pong": True}
    bad = daemon.call(8, "maintain", {"tasks": ["defrag"]})
    assert bad["error"]["code"] == -32602
    bad_knob = daemon.call(9, "maintain", {"merge_similarity": 2})
    assert bad_knob["error"]["code"] == -32602
    code, _ = daemon.finish()
    assert code == 0


# -- long work never holds the engine ------------------------------------------------

_LONG_AGO = "2025-01-01T00:00:00.000Z"


def _big_graph(db_path: Path, nodes: int, fanout: int) -> None:
    """Build a graph with SQL in this process (fast): every edge old enough to decay."""
    store = open_store(db_path)
    try:
        with store.transaction():
            rows = [
                insert_node(store, NewNode("teaching", f"fact number {i}"), embed=False)[0]
                for i in range(nodes)
            ]
            store.conn.executemany(
                "INSERT INTO edges (source, target, weight, kind, updated_at) "
                "VALUES (?, ?, 0.8, 'learned', ?)",
                (
                    (rows[i], rows[(i + 1 + k * 7) % nodes], _LONG_AGO)
                    for i in range(nodes)
                    for k in range(fanout)
                ),
            )
    finally:
        store.close()


def test_info_and_ingest_are_answered_while_a_maintain_is_still_running(
    db_path: Path, spawn: Spawn
) -> None:
    _big_graph(db_path, nodes=6_000, fanout=10)
    daemon = spawn(serve_argv(db_path, "--embedder", "hash"))
    assert daemon.call(1, "info")["result"]["edges"] == 60_000
    daemon.send(encode_frame({"id": 2, "method": "maintain", "params": {}, "progress": True}))
    first = daemon.frame()
    assert first.get("method") == "progress", first  # maintain has started
    daemon.send(request_frame(3, "info"))
    daemon.send(ingest_frame(4, "s", [user_message(1)]))
    seen: list[dict[str, Any]] = []
    while not any(f.get("id") == 2 for f in seen):
        seen.append(daemon.frame())
    order = [f.get("id") or f"progress:{f['params']['phase']}" for f in seen]
    # Both answered before maintain reported its last step: it held nothing they needed.
    assert order.index(3) < order.index("progress:done"), order
    assert order.index(4) < order.index("progress:done"), order
    assert next(f for f in seen if f.get("id") == 3)["result"]["nodes"] == 6_000
    report = next(f for f in seen if f.get("id") == 2)["result"]
    assert report["tasks"]["decay"]["decayed"] == 60_000
    assert report["tasks"]["prune"]["edges"] == 60_000  # two years at 14 days: all weak
    assert daemon.call(5, "info")["result"]["edges"] == 0  # the daemon sees what it did
    code, _ = daemon.finish()
    assert code == 0
    assert stored_client_ids(db_path, "s") == ["m0001"]
    assert integrity(db_path) == [("ok",)]


def _edges(db_path: Path) -> list[tuple[Any, ...]]:
    store = open_store(db_path)
    try:
        return [tuple(r) for r in store.execute("SELECT * FROM edges ORDER BY source, target")]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("flag", "value", "knob"),
    [("--prune-below", "5", "prune_below"), ("--half-life-days", "0", "half_life_days")],
)
def test_brain_maintain_refuses_a_knob_out_of_range_and_changes_nothing(
    db_path: Path, flag: str, value: str, knob: str
) -> None:
    _big_graph(db_path, nodes=20, fanout=2)
    before = _edges(db_path)
    done = subprocess.run(
        [str(BRAIN), "maintain", "--db", str(db_path), "--embedder", "hash", flag, value],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert knob in err
    assert "Traceback" not in err
    assert _edges(db_path) == before


def test_a_daemon_with_recall_shadow_keeps_its_traces_within_the_configured_count(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(
        serve_argv(
            db_path, "--embedder", "hash", "--recall-mode", "shadow", "--trace-max-count", "4"
        )
    )
    daemon.call(1, "teach", {"content": "deploys go to the kestrel staging cluster"})
    daemon.send(ingest_frame(2, "s", [user_message(1)]))
    assert "result" in daemon.frame()
    traces = []
    for i in range(10):
        assembled = daemon.call(10 + i, "assemble", {"session": "s", "budget": 2_000})["result"]
        traces.append(assembled["recall"]["trace_id"])
    assert daemon.call(3, "health")["result"]["traces"] == 4
    assert daemon.call(4, "trace", {"trace_id": traces[-4]})["result"]["trace_id"] == traces[-4]
    assert daemon.call(5, "trace", {"trace_id": traces[-5]})["error"]["code"] == -32001
    code, _ = daemon.finish()
    assert code == 0


def test_a_teach_sent_during_a_maintain_is_found_by_the_next_query(
    db_path: Path, spawn: Spawn
) -> None:
    _big_graph(db_path, nodes=6_000, fanout=10)
    daemon = spawn(serve_argv(db_path, "--embedder", "hash"))
    daemon.send(encode_frame({"id": 2, "method": "maintain", "params": {}, "progress": True}))
    assert daemon.frame().get("method") == "progress"  # maintain has started
    daemon.send(request_frame(3, "teach", {"content": "zebra crossings need a guard"}))
    seen: list[dict[str, Any]] = []
    while not any(f.get("id") == 3 for f in seen):
        seen.append(daemon.frame())
    taught = next(f for f in seen if f.get("id") == 3)["result"]["node_id"]
    daemon.send(request_frame(4, "query", {"query": "zebra crossings need a guard"}))
    while not all(any(f.get("id") == i for f in seen) for i in (2, 4)):
        seen.append(daemon.frame())
    assert taught in next(f for f in seen if f.get("id") == 4)["result"]["fired_nodes"]
    assert next(f for f in seen if f.get("id") == 2)["result"]["tasks"]["decay"]["decayed"]
    after = daemon.call(5, "query", {"query": "zebra crossings need a guard"})["result"]
    assert taught in after["fired_nodes"]
    assert daemon.call(6, "info")["result"]["nodes"] == 6_001
    code, _ = daemon.finish()
    assert code == 0


def _maintenance_processes(db_path: Path) -> list[int]:
    """Processes running maintenance on ``db_path`` (the child names it on its command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"brain.graph.maintain.child" in command and str(db_path).encode() in command:
            found.append(int(entry.name))
    return found


def test_a_daemon_killed_during_a_maintain_leaves_no_maintenance_process_behind(
    db_path: Path, spawn: Spawn
) -> None:
    _big_graph(db_path, nodes=6_000, fanout=10)
    daemon = spawn(serve_argv(db_path, "--embedder", "hash"))
    daemon.send(encode_frame({"id": 2, "method": "maintain", "params": {}, "progress": True}))
    assert daemon.frame().get("method") == "progress"  # the child is at work
    assert _maintenance_processes(db_path)
    daemon.kill()
    deadline = time.monotonic() + DEADLINE
    while _maintenance_processes(db_path) and time.monotonic() < deadline:
        time.sleep(0.05)  # the child sees its stdin close and exits
    assert _maintenance_processes(db_path) == []
    assert integrity(db_path) == [("ok",)]
