"""Storage and start-up on one shared dataset: database bytes, the daemon's first answer, the
file check."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import orjson

from benches.core import (
    BATCH_SIZE,
    CALL_TIMEOUT_S,
    INGEST_SESSIONS,
    SEED,
    Metrics,
    Settings,
    Shared,
)
from benches.corpus import batches, make_messages
from benches.procs import child_env, client_daemon, frame, raw_daemon, read_answer, stop_process
from benches.stats import dir_bytes, file_bytes

# -- storage and start-up (on one shared dataset) -----------------------------------------


def dataset_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": s.n(20_000, BATCH_SIZE),
        "batch_size": BATCH_SIZE,
        "sessions": INGEST_SESSIONS,
        "built_through": "daemon ingest batches, then save",
    }


def dataset(shared: Shared) -> Path:
    """A database with the realistic messages, ingested through a daemon and saved (cached)."""
    if shared.dataset_db is not None:
        return shared.dataset_db
    params = dataset_params(shared.settings)
    total = params["messages"]
    messages = make_messages(total, INGEST_SESSIONS, SEED + 3)
    content_bytes = sum(len(m["content"].encode()) for _, m in messages)
    request_bytes = sum(len(orjson.dumps(m)) for _, m in messages)
    work = shared.settings.root / "dataset"
    work.mkdir()
    db = work / "dataset.db"
    files = db.with_name(db.name + "-files")
    wal = db.with_name(db.name + "-wal")
    print(f"  building the shared dataset ({total} messages)", file=sys.stderr)
    with client_daemon(db, work / "daemon.log") as client:
        for session, msgs in batches(messages, BATCH_SIZE):
            client.call("ingest", {"session": session, "messages": msgs}, timeout=CALL_TIMEOUT_S)
        client.call("save", timeout=CALL_TIMEOUT_S)
        live_db, live_wal, live_files = file_bytes(db), file_bytes(wal), dir_bytes(files)
    closed_total = file_bytes(db) + file_bytes(wal) + dir_bytes(files)
    live_total = live_db + live_wal + live_files
    shared.dataset_db = db
    shared.dataset_messages = total
    shared.dataset_metrics = {
        "bytes_per_msg": live_total / total,
        "content_bytes_per_msg": content_bytes / total,
        "request_json_bytes_per_msg": request_bytes / total,
        "overhead_ratio": live_total / content_bytes,
        "db_bytes": float(live_db),
        "wal_bytes": float(live_wal),
        "payload_bytes": float(live_files),
        "bytes_per_msg_after_close": closed_total / total,
    }
    return db


def bench_db_bytes(shared: Shared, work: Path) -> Metrics:
    """(db file + WAL + payload files) / messages after a save, vs the content size."""
    dataset(shared)
    return dict(shared.dataset_metrics)


def startup_params(s: Settings) -> dict[str, Any]:
    return {"db_messages": dataset_params(s)["messages"]}


def _spawn_ms(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
    return (time.perf_counter() - started) * 1000


def bench_startup(shared: Shared, work: Path) -> Metrics:
    """Spawn to first ping answer on the existing dataset, plus bare-interpreter baselines."""
    db = dataset(shared)
    started = time.perf_counter()
    with raw_daemon(db, work / "daemon.log") as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(frame(1, "ping"))
        proc.stdin.flush()
        answer = read_answer(proc.stdout)
        startup_ms = (time.perf_counter() - started) * 1000
        if answer.get("result") != {"pong": True}:
            raise RuntimeError(f"unexpected ping answer: {answer}")
        eof_at = time.perf_counter()
        stop_process(proc)
        exit_ms = (time.perf_counter() - eof_at) * 1000
    python_ms = _spawn_ms([sys.executable, "-c", "pass"])
    import_ms = _spawn_ms([sys.executable, "-c", "import daemon.cli, daemon.runner, daemon.stdio"])
    # Medians of several runs: a cold start is noisy on a shared machine.
    bare = statistics.median(_spawn_ms([sys.executable, "-c", "pass"]) for _ in range(STARTUP_RUNS))
    brain_exe = str(Path(sys.executable).parent / "brain")
    call_info = statistics.median(
        _spawn_ms([brain_exe, "call", "info", "--db", str(db)], env=child_env())
        for _ in range(STARTUP_RUNS)
    )
    first_info = statistics.median(
        _first_info_ms(db, work / "daemon.log") for _ in range(STARTUP_RUNS)
    )
    return {
        "startup_ms": startup_ms,
        "exit_ms": exit_ms,
        "python_bare_ms": python_ms,
        "python_import_daemon_ms": import_ms,
        "python_bare_median_ms": bare,
        "call_info_median_ms": call_info,
        "daemon_first_info_median_ms": first_info,
        "call_info_vs_bare": call_info / bare,
        "daemon_first_info_vs_bare": first_info / bare,
    }


STARTUP_RUNS: Final = 5
"""Runs of each start-up measurement; the median is reported."""


def _first_info_ms(db: Path, log: Path) -> float:
    """ms from spawning a daemon to its first ``info`` answer."""
    started = time.perf_counter()
    with raw_daemon(db, log) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(frame(1, "info"))
        proc.stdin.flush()
        answer = read_answer(proc.stdout)
        took = (time.perf_counter() - started) * 1000
        if "result" not in answer:
            raise RuntimeError(f"unexpected info answer: {answer}")
    return took


def file_check_params(s: Settings) -> dict[str, Any]:
    return {"checks": s.n(200_000, 1_000), "commits": s.n(300, 20)}


def bench_file_check(shared: Shared, work: Path) -> Metrics:
    """The database-file identity check (one ``stat``) every write makes before it commits,
    next to the commit it guards (a one-row transaction, synchronous FULL)."""
    from brain import open_store

    params = file_check_params(shared.settings)
    store = open_store(work / "bench.db")
    try:
        started = time.perf_counter()
        for _ in range(params["checks"]):
            store.check_file()
        check_s = (time.perf_counter() - started) / params["checks"]
        started = time.perf_counter()
        for i in range(params["commits"]):
            with store.transaction():
                store.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('bench', ?)", (i,))
        commit_s = (time.perf_counter() - started) / params["commits"]
    finally:
        store.close()
    return {"check_us": check_s * 1e6, "commit_us": commit_s * 1e6}
