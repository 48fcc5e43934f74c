"""Ingest through the daemon and in-process (batched, single durable requests) and group commit."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw

from benches.core import (
    BATCH_SIZE,
    CALL_TIMEOUT_S,
    INGEST_SESSIONS,
    PIPELINE_SESSIONS,
    SEED,
    Message,
    Metrics,
    Settings,
    Shared,
)
from benches.corpus import batches, make_messages, message_in
from benches.procs import client_daemon, frame, raw_daemon_args, read_answer
from benches.stats import latency_metrics
from brain import Brain

# -- ingest -----------------------------------------------------------------------------


def ingest_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": s.n(20_000, BATCH_SIZE),
        "batch_size": BATCH_SIZE,
        "sessions": INGEST_SESSIONS,
        "content_chars": "200-800",
    }


def _prepared_batches(s: Settings, seed: int) -> list[tuple[str, list[Message]]]:
    total = ingest_params(s)["messages"]
    return batches(make_messages(total, INGEST_SESSIONS, seed), BATCH_SIZE)


def bench_ingest_batched(shared: Shared, work: Path) -> Metrics:
    """Batched ingest requests through the daemon, one after another."""
    plan = _prepared_batches(shared.settings, SEED)
    total = sum(len(b) for _, b in plan)
    with client_daemon(work / "bench.db", work / "daemon.log") as client:
        started = time.perf_counter()
        stored = 0
        for session, msgs in plan:
            result = client.call(
                "ingest", {"session": session, "messages": msgs}, timeout=CALL_TIMEOUT_S
            )
            stored += int(result["ingested"])
        took = time.perf_counter() - started
    if stored != total:
        raise RuntimeError(f"stored {stored} of {total} messages")
    return {"msgs_per_s": total / took, "ingest_s": took, "batch_ms": took * 1000 / len(plan)}


def bench_ingest_batched_engine(shared: Shared, work: Path) -> Metrics:
    """The same batches straight into ``brain.Brain.ingest`` (no daemon, no JSON)."""
    plan = [
        (session, [message_in(m) for m in msgs])
        for session, msgs in _prepared_batches(shared.settings, SEED)
    ]
    total = sum(len(b) for _, b in plan)
    brain = Brain(work / "bench.db")
    try:
        started = time.perf_counter()
        stored = 0
        for session, msgs in plan:
            stored += brain.ingest(session, msgs).ingested
        took = time.perf_counter() - started
    finally:
        brain.close()
    if stored != total:
        raise RuntimeError(f"stored {stored} of {total} messages")
    return {"msgs_per_s": total / took, "ingest_s": took, "batch_ms": took * 1000 / len(plan)}


def single_params(s: Settings) -> dict[str, Any]:
    return {"requests": s.n(2_000, 50), "sessions": PIPELINE_SESSIONS, "durable": True}


def bench_ingest_single(shared: Shared, work: Path) -> Metrics:
    """One message per ingest request, sequential round trips (each commit is durable).

    Each commit waits for an fsync (synchronous=FULL), so the figure follows
    the disk: ``disk_fsync_commits_per_s`` (bare apsw commits, no daemon) and a
    run with synchronous=NORMAL (durable against a killed process, not a
    power cut) are reported beside it to tell disk from daemon.
    """
    count = single_params(shared.settings)["requests"]
    plan = make_messages(count, PIPELINE_SESSIONS, SEED + 1)

    def run(name: str, args: Sequence[str]) -> tuple[float, list[int]]:
        latencies: list[int] = []
        with client_daemon(work / f"{name}.db", work / "daemon.log", args) as client:
            started = time.perf_counter()
            for session, message in plan:
                t0 = time.perf_counter_ns()
                params = {"session": session, "message": message}
                client.call("ingest", params, timeout=CALL_TIMEOUT_S)
                latencies.append(time.perf_counter_ns() - t0)
            return count / (time.perf_counter() - started), latencies

    full_rate, latencies = run("full", ())
    normal_rate, _ = run("normal", ("--synchronous", "NORMAL"))
    return {
        "reqs_per_s": full_rate,
        **latency_metrics(latencies),
        "reqs_per_s_sync_normal": normal_rate,
        "disk_fsync_commits_per_s": _bare_commit_rate(work / "bare.db", count),
    }


def _bare_commit_rate(path: Path, count: int) -> float:
    """Commits per second of one-row transactions on this disk with synchronous=FULL."""
    conn = apsw.Connection(str(path))
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (x)")
        started = time.perf_counter()
        for i in range(count):
            with conn:
                conn.execute("INSERT INTO t VALUES (?)", (i,))
        return count / (time.perf_counter() - started)
    finally:
        conn.close()


# -- group commit -------------------------------------------------------------------------


def group_params(s: Settings) -> dict[str, Any]:
    return {"single": s.n(400, 40), "pipelined": s.n(1_000, 80), "window": 16, "sessions": [1, 8]}


def _windowed(proc: subprocess.Popen[bytes], lines: list[bytes], window: int) -> list[int]:
    """Send ``lines`` keeping ``window`` requests in flight; each one's ns from send to ack.

    Ids are the lines' indexes; answers may come out of order (other lanes).
    """
    assert proc.stdin is not None
    assert proc.stdout is not None
    sent_at: dict[int, int] = {}
    took: list[int] = []
    following = 0
    while len(took) < len(lines):
        while following < len(lines) and following - len(took) < window:
            sent_at[following] = time.perf_counter_ns()
            proc.stdin.write(lines[following])
            following += 1
        proc.stdin.flush()
        answer = read_answer(proc.stdout)
        if "result" not in answer:
            raise RuntimeError(f"ingest failed: {answer}")
        took.append(time.perf_counter_ns() - sent_at[answer["id"]])
    return took


def bench_group_commit(shared: Shared, work: Path) -> Metrics:
    """Durable ingest through the daemon at synchronous=FULL, alone and with group commit.

    ``single``: sequential one-message ingests (one fsync each either way).
    ``pipelined_<S>``: ``window`` requests kept in flight over ``S`` sessions (1: one
    lane, applied in order); latency from each request's send to its answer. With
    ``group_commit`` the commits skip their own fsync and every answer waits for a
    WAL fsync begun after its commit, shared by the writers in flight.
    """
    params = group_params(shared.settings)
    out: Metrics = {"fsync_p50_ms": _fsync_p50_ms(work / "fsync.bin")}
    for mode, args in (("full", ()), ("group", ("--group-commit", "true"))):
        db = work / f"{mode}.db"
        with raw_daemon_args(db, work / "daemon.log", args) as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            proc.stdin.write(frame(0, "ping"))
            proc.stdin.flush()
            read_answer(proc.stdout)
            single = [
                frame(i, "ingest", {"session": "one", "message": m})
                for i, (_s, m) in enumerate(make_messages(params["single"], 1, SEED + 4))
            ]
            out.update(latency_metrics(_windowed(proc, single, 1), f"{mode}_single_"))
            for sessions in params["sessions"]:
                plan = make_messages(params["pipelined"], sessions, SEED + 5 + sessions)
                lines = [
                    frame(i, "ingest", {"session": f"w{sessions}-{s}", "message": m})
                    for i, (s, m) in enumerate(plan)
                ]
                started = time.perf_counter()
                took = _windowed(proc, lines, params["window"])
                rate = len(lines) / (time.perf_counter() - started)
                out.update(latency_metrics(took, f"{mode}_pipelined_{sessions}_"))
                out[f"{mode}_pipelined_{sessions}_reqs_per_s"] = rate
    for key in [k for k in out if k.startswith("full_") and k.endswith(("p50_ms", "reqs_per_s"))]:
        group = out[key.replace("full_", "group_", 1)]
        out[key.replace("full_", "speedup_", 1)] = (
            group / out[key] if key.endswith("reqs_per_s") else out[key] / group
        )
    return out


def _fsync_p50_ms(path: Path, count: int = 200) -> float:
    """p50 of one 4 KiB write + fsync on this disk (what a FULL commit waits for at least)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    samples: list[int] = []
    try:
        for i in range(count):
            os.pwrite(fd, b"x" * 4096, (i % 16) * 4096)
            t0 = time.perf_counter_ns()
            os.fsync(fd)
            samples.append(time.perf_counter_ns() - t0)
    finally:
        os.close(fd)
    return latency_metrics(samples)["p50_ms"]
