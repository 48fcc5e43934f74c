"""Retention: a pass through the daemon, the file before and after."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import apsw

from benches.core import CALL_TIMEOUT_S, Metrics, Settings, Shared
from benches.procs import child_env, client_daemon
from benches.stats import remove_db

# -- retention: a pass through the daemon, the file before and after -----------------------

RETENTION_MESSAGES: Final = 20_000  # half of them 90 days old, in 4 sessions
RETENTION_BATCH: Final = 500


def retention_params(s: Settings) -> dict[str, Any]:
    return {
        "messages": s.n(RETENTION_MESSAGES, 2 * RETENTION_BATCH),
        "old_share": 0.5,
        "sessions": 4,
        "embedder": "hash (256 dims)",
        "limits": "retention_max_age_days 30, retention_max_bytes 60% of the used bytes",
        "reads": "full_text grep and one-message ingest, back to back, during and after the pass",
    }


def _retention_messages(tag: str, n: int, days_ago: float) -> list[dict[str, Any]]:
    at = (datetime.now(UTC) - timedelta(days=days_ago)).isoformat(timespec="milliseconds")
    return [
        {
            "id": f"{tag}-{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"{tag} note {i} " + " ".join(f"w{(i * 7 + k) % 5000}" for k in range(40)),
            "created_at": at.replace("+00:00", "Z"),
        }
        for i in range(n)
    ]


def bench_retention(shared: Shared, work: Path) -> Metrics:
    """A retention pass through the daemon: bytes before and after, the pass's time, and
    request latency while the background worker runs it (against the same requests after),
    plus the one VACUUM that switches a pre-v19 database to incremental vacuum."""
    params = retention_params(shared.settings)
    total = params["messages"]
    db = work / "retention.db"
    log = work / "retention.log"
    hashed = ["--embedder", "hash"]
    with client_daemon(db, log, hashed) as client:
        for b in range(total // RETENTION_BATCH):
            old = b < total // RETENTION_BATCH // 2
            client.call(
                "ingest",
                {
                    "session": f"s{b % 4}",
                    "messages": _retention_messages(f"b{b}", RETENTION_BATCH, 90 if old else 0),
                },
                timeout=CALL_TIMEOUT_S,
            )
        deadline = time.monotonic() + 1800
        while client.call("info")["embeddings"]["pending"]:
            if time.monotonic() > deadline:
                raise RuntimeError("retention bench: embedding never finished")
            time.sleep(0.2)
        used_before = int(client.call("info")["db_bytes"])
        client.call("save")
    file_before = db.stat().st_size
    # The pre-v19 switch: a copy made without a page map, then doctor's VACUUM.
    old_db = work / "retention-old.db"
    shutil.copy(db, old_db)
    conn = apsw.Connection(str(old_db))
    conn.execute("PRAGMA auto_vacuum = NONE")
    conn.execute("VACUUM")
    conn.close()
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "brain"), "doctor", "--db", str(old_db), "--repair"],
        capture_output=True,
        env=child_env(),
        check=False,
    )
    switch_s = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"retention bench: doctor --repair failed: {done.stdout!r}")
    remove_db(old_db)

    limit = int(used_before * 0.6)
    args = [*hashed, "--retention-max-age-days", "30", "--retention-max-bytes", str(limit)]
    samples: list[tuple[float, str, float]] = []  # (sent at, method, ms)
    stop = threading.Event()
    with client_daemon(db, log, args) as client:

        def load() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                for method, call_params in (
                    ("grep", {"query": f"w{n % 5000}", "session": "s1", "limit": 10}),
                    (
                        "ingest",
                        {"session": "live", "message": _retention_messages(f"l{n}", 1, 0)[0]},
                    ),
                ):
                    sent = time.time()
                    t = time.perf_counter()
                    client.call(method, call_params, timeout=CALL_TIMEOUT_S)
                    samples.append((sent, method, (time.perf_counter() - t) * 1000))

        reader = threading.Thread(target=load)
        reader.start()
        try:
            deadline = time.monotonic() + 1800
            while True:
                info = client.call("info")
                if info["retention"]["passes"] >= 1:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("retention bench: no pass ran")
                time.sleep(0.05)
            ended = time.time()
            started = datetime.fromisoformat(
                info["retention"]["last_pass_at"].replace("Z", "+00:00")
            ).timestamp()
            time.sleep(max(3.0, ended - started))  # the same requests after the pass
        finally:
            stop.set()
            reader.join()
        client.call("save")
        info = client.call("info")
    file_after = db.stat().st_size
    out: Metrics = {
        "messages": float(total),
        "file_bytes_before": float(file_before),
        "file_bytes_after": float(file_after),
        "used_bytes_before": float(used_before),
        "max_bytes": float(limit),
        "vectors_dropped": float(info["retention"]["vectors_dropped"]),
        "bytes_reclaimed": float(info["retention"]["bytes_reclaimed"]),
        "messages_after": float(info["messages"]),
        "pass_s": ended - started,
        "vacuum_switch_s": switch_s,
    }
    for method in ("grep", "ingest"):
        during = [ms for at, m, ms in samples if m == method and started <= at <= ended]
        after = [ms for at, m, ms in samples if m == method and at > ended]
        for label, values in (("during", during), ("after", after)):
            if values:
                ordered = sorted(values)
                out[f"{method}_{label}_p50_ms"] = statistics.median(ordered)
                out[f"{method}_{label}_p95_ms"] = ordered[
                    min(len(ordered) - 1, int(len(ordered) * 0.95))
                ]
                out[f"{method}_{label}_max_ms"] = ordered[-1]
                out[f"{method}_{label}_n"] = float(len(ordered))
    remove_db(db)
    return out
