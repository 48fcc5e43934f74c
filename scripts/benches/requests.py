"""Round trips of cheap requests: ping through the client and in a loop, pipelined requests,
and cheap requests beside running ones."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from benches.core import CALL_TIMEOUT_S, PIPELINE_SESSIONS, SEED, Metrics, Settings, Shared
from benches.corpus import make_messages
from benches.procs import (
    child_env,
    client_daemon,
    frame,
    raw_daemon,
    read_answer,
    stop_process,
    track,
    untrack,
)
from benches.startup import dataset
from benches.stats import latency_metrics
from brain import Brain

# -- ping -------------------------------------------------------------------------------


def ping_params(s: Settings) -> dict[str, Any]:
    return {"pings": s.n(2_000, 100), "warmup": 200}


def bench_ping_roundtrip(shared: Shared, work: Path) -> Metrics:
    """Sequential pings through the subprocess pipes with ``protocol.client.Client``."""
    params = ping_params(shared.settings)
    latencies: list[int] = []
    with client_daemon(work / "bench.db", work / "daemon.log") as client:
        for _ in range(params["warmup"]):
            client.call("ping")
        for _ in range(params["pings"]):
            t0 = time.perf_counter_ns()
            client.call("ping")
            latencies.append(time.perf_counter_ns() - t0)
    return latency_metrics(latencies)


def loop_params(s: Settings) -> dict[str, Any]:
    return {"pings": s.n(10_000, 100), "warmup": 500}


def bench_ping_in_loop(shared: Shared, work: Path) -> Metrics:
    """``Dispatcher.prepare`` + ``await Dispatcher.execute`` for a ping, inside anyio.run."""
    import anyio
    import anyio.to_thread

    from daemon.context import Context
    from daemon.dispatch import Answer, Dispatcher

    params = loop_params(shared.settings)
    total: list[int] = []
    prepare: list[int] = []
    execute: list[int] = []

    async def measure() -> None:
        brain = await anyio.to_thread.run_sync(Brain, work / "bench.db")
        try:
            dispatcher = Dispatcher(Context(brain))
            warmup = params["warmup"]
            for i in range(warmup + params["pings"]):
                line = frame(i, "ping")
                t0 = time.perf_counter_ns()
                call = dispatcher.prepare(line)
                t1 = time.perf_counter_ns()
                if isinstance(call, Answer):
                    raise RuntimeError(f"ping rejected: {call.frame!r}")
                answer = await dispatcher.execute(call)
                t2 = time.perf_counter_ns()
                if answer is None or b'"pong"' not in answer:
                    raise RuntimeError(f"unexpected ping answer: {answer!r}")
                if i >= warmup:
                    total.append(t2 - t0)
                    prepare.append(t1 - t0)
                    execute.append(t2 - t1)
        finally:
            await anyio.to_thread.run_sync(brain.close)

    anyio.run(measure)
    return {
        **latency_metrics(total),
        "prepare_p50_ms": latency_metrics(prepare)["p50_ms"],
        "execute_p50_ms": latency_metrics(execute)["p50_ms"],
    }


# -- pipelined --------------------------------------------------------------------------


def pipelined_params(s: Settings) -> dict[str, Any]:
    return {
        "ping_requests": s.n(20_000, 100),
        "ingest_requests": s.n(10_000, 50),
        "ingest_sessions": PIPELINE_SESSIONS,
    }


@dataclass
class _Drain:
    """What a reader thread saw while draining ``expected`` answers."""

    expected: int
    answered: int = 0
    errors: int = 0
    first_error: Any = None
    last_answer_at: float = 0.0
    failure: BaseException | None = None


def _drain(stdout: IO[bytes], state: _Drain) -> None:
    try:
        while state.answered < state.expected:
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"stdout closed after {state.answered} answers")
            answer = orjson.loads(line)
            state.answered += 1
            if "error" in answer:
                state.errors += 1
                if state.first_error is None:
                    state.first_error = answer["error"]
        state.last_answer_at = time.perf_counter()
    except BaseException as exc:
        state.failure = exc


def pipeline(proc: subprocess.Popen[bytes], blob: bytes, expected: int) -> float:
    """Write ``blob`` in one go while a thread reads ``expected`` answers; return seconds."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    state = _Drain(expected)
    reader = threading.Thread(target=_drain, args=(proc.stdout, state), daemon=True)
    reader.start()
    started = time.perf_counter()
    proc.stdin.write(blob)
    proc.stdin.flush()
    reader.join(CALL_TIMEOUT_S)
    if reader.is_alive():
        raise TimeoutError(f"only {state.answered} of {expected} answers in {CALL_TIMEOUT_S}s")
    if state.failure is not None:
        raise state.failure
    if state.errors:
        raise RuntimeError(f"{state.errors} error answers, first: {state.first_error}")
    return state.last_answer_at - started


def bench_pipelined(shared: Shared, work: Path) -> Metrics:
    """Write N requests without waiting, then read every answer (pings, then ingests)."""
    params = pipelined_params(shared.settings)
    pings = params["ping_requests"]
    ingests = params["ingest_requests"]
    ping_blob = b"".join(frame(i, "ping") for i in range(1, pings + 1))
    ingest_blob = b"".join(
        frame(pings + 1 + i, "ingest", {"session": session, "message": message})
        for i, (session, message) in enumerate(
            make_messages(ingests, params["ingest_sessions"], SEED + 2)
        )
    )
    with raw_daemon(work / "bench.db", work / "daemon.log") as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(frame(0, "ping"))
        proc.stdin.flush()
        read_answer(proc.stdout)  # ready
        ping_s = pipeline(proc, ping_blob, pings)
        ingest_s = pipeline(proc, ingest_blob, ingests)
    return {
        "ping_reqs_per_s": pings / ping_s,
        "ingest_reqs_per_s": ingests / ingest_s,
        "ping_took_s": ping_s,
        "ingest_took_s": ingest_s,
    }


# -- cheap requests ---------------------------------------------------------------------


def requests_params(s: Settings) -> dict[str, Any]:
    return {"calls": s.n(2_000, 100), "warmup": 200, "database": "the shared dataset"}


_SINGLE_THREADED = """
import sqlite3, sys, orjson
db = sqlite3.connect(sys.argv[1])
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    request = orjson.loads(line)
    if request["method"] == "info":
        try:
            counts = dict(db.execute("SELECT name, n FROM counts"))
        except sqlite3.OperationalError:  # a database from before the counters
            counts = {"messages": db.execute("SELECT count(*) FROM messages").fetchone()[0]}
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        result = {"messages": counts["messages"], "pages": pages}
    else:
        result = {"pong": True}
    out.write(orjson.dumps({"id": request["id"], "result": result}) + b"\\n")
    out.flush()
"""
"""The reference: one thread reading lines and answering each in turn (``info`` from
the same database's counters on a plain sqlite3 connection), as a single-threaded
daemon does. Nothing to hop between, so it is the floor a daemon's pipes allow."""


def bench_requests(shared: Shared, work: Path) -> Metrics:
    """``ping`` and ``info`` round trips through the pipes, brain vs a single-threaded loop.

    Sequential calls over raw pipes, alternating between a brain daemon and the
    reference loop call by call, so both see the same load (the machine is shared:
    compare the ratios). The database is the shared dataset.
    """
    params = requests_params(shared.settings)
    db = dataset(shared)
    reference = subprocess.Popen(
        [sys.executable, "-c", _SINGLE_THREADED, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env(),
    )
    track(reference)
    samples: dict[str, list[int]] = {}
    try:
        with raw_daemon(db, work / "daemon.log") as proc:
            pair = {"brain": proc, "single": reference}
            for who in pair.values():
                assert who.stdin is not None
                assert who.stdout is not None
            for i in range(params["warmup"] + params["calls"]):
                for method in ("ping", "info"):
                    for name, who in pair.items():
                        assert who.stdin is not None
                        assert who.stdout is not None
                        t0 = time.perf_counter_ns()
                        who.stdin.write(frame(i, method))
                        who.stdin.flush()
                        answer = read_answer(who.stdout)
                        took = time.perf_counter_ns() - t0
                        if "result" not in answer:
                            raise RuntimeError(f"{name} {method}: {answer}")
                        if i >= params["warmup"]:
                            samples.setdefault(f"{method}_{name}", []).append(took)
    finally:
        stop_process(reference)
        untrack(reference)
    out: Metrics = {}
    for key, ns in samples.items():
        out.update(latency_metrics(ns, f"{key}_"))
    for method in ("ping", "info"):
        for p in ("p50", "p95"):
            mine, floor = out[f"{method}_brain_{p}_ms"], out[f"{method}_single_{p}_ms"]
            out[f"{method}_{p}_vs_single"] = mine / floor
    return out
