"""Lifecycle and stalls: bounded shutdown, bounded memory with an unread client, a stuck
summary provider."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final

import apsw

from benches.core import CALL_TIMEOUT_S, Metrics, Settings, Shared
from benches.procs import (
    client_daemon,
    frame,
    raw_daemon,
    read_answer,
    spawn_daemon,
    stop_process,
    untrack,
)
from benches.stats import latency_metrics, process_rss_mb, remove_db

# -- lifecycle: bounded shutdown, bounded memory -----------------------------------------

STOP_TIMEOUT_S: Final = 2.0
UNREAD_REQUESTS: Final = (3_000, 30_000)


def stop_params(s: Settings) -> dict[str, Any]:
    return {"shutdown_timeout_s": STOP_TIMEOUT_S, "stuck_writes": 1, "busy_timeout_ms": 600_000}


@contextlib.contextmanager
def _lock_held(db: Path) -> Iterator[None]:
    """This process holds the write lock on ``db``: a daemon's write waits inside the engine."""
    conn = apsw.Connection(str(db))
    conn.set_busy_timeout(30_000)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def _stuck_daemon(db: Path, log: Path) -> subprocess.Popen[bytes]:
    """A daemon whose next write will wait ten minutes for a lock; one write committed first."""
    args = ["--busy-timeout-ms", "600000", "--shutdown-timeout-s", str(STOP_TIMEOUT_S)]
    proc = spawn_daemon(db, log, args, bufsize=0)
    assert proc.stdin is not None
    assert proc.stdout is not None
    message = {"role": "user", "content": "committed before the stop"}
    proc.stdin.write(frame(1, "ingest", {"session": "s", "message": message}))
    read_answer(proc.stdout)
    return proc


def bench_stop(shared: Shared, work: Path) -> Metrics:
    """SIGTERM and ``shutdown`` with a write stuck on another process's lock: ms to exit."""
    out: Metrics = {}
    for way in ("sigterm", "shutdown"):
        db = work / f"{way}.db"
        proc = _stuck_daemon(db, work / f"{way}.log")
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            with _lock_held(db):
                stuck = {"session": "s", "message": {"role": "user", "content": "stuck"}}
                proc.stdin.write(frame(2, "ingest", stuck) + frame(3, "ping"))
                while read_answer(proc.stdout).get("id") != 3:
                    pass
                started = time.perf_counter()
                if way == "sigterm":
                    proc.send_signal(signal.SIGTERM)
                else:
                    proc.stdin.write(frame(4, "shutdown"))
                    while read_answer(proc.stdout).get("id") != 4:
                        pass
                    out["shutdown_answer_ms"] = (time.perf_counter() - started) * 1000
                proc.wait(120)
                out[f"{way}_exit_ms"] = (time.perf_counter() - started) * 1000
        finally:
            stop_process(proc)
            untrack(proc)
    return out


def unread_params(s: Settings) -> dict[str, Any]:
    return {
        "requests": [max(100, int(n * s.size)) for n in UNREAD_REQUESTS],
        "method": "assemble of 30 messages of ~3 kB (~90 kB an answer)",
    }


def bench_unread(shared: Shared, work: Path) -> Metrics:
    """Peak RSS of a daemon whose client writes N assemble requests and reads nothing."""
    out: Metrics = {}
    words = "word " * 600
    history = [{"id": f"h{i}", "role": "user", "content": f"{i} {words}"} for i in range(30)]
    for n in unread_params(shared.settings)["requests"]:
        db = work / f"unread-{n}.db"
        with raw_daemon(db, work / "unread.log") as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            proc.stdin.write(frame(0, "ingest", {"session": "s", "messages": history}))
            proc.stdin.flush()
            read_answer(proc.stdout)
            idle = process_rss_mb(proc.pid)
            params = {"session": "s", "budget": 100_000}
            data = b"".join(frame(i + 1, "assemble", params) for i in range(n))

            def write(data: bytes = data, stdin: IO[bytes] = proc.stdin) -> None:
                with contextlib.suppress(BrokenPipeError):
                    stdin.write(data)
                    stdin.flush()

            writer = threading.Thread(target=write, daemon=True)
            writer.start()
            # Unread until the daemon's memory stops growing (2 s flat) or a minute passes.
            peak, flat_since, give_up = idle, time.monotonic(), time.monotonic() + 60
            while time.monotonic() - flat_since < 2.0 and time.monotonic() < give_up:
                time.sleep(0.1)
                rss = process_rss_mb(proc.pid)
                if rss > peak + 1:
                    flat_since = time.monotonic()
                peak = max(peak, rss)
            for _ in range(n):
                read_answer(proc.stdout)
            writer.join(60)
        out[f"idle_rss_mb_{n}"] = idle
        out[f"peak_rss_mb_{n}"] = peak
        remove_db(db)
    return out


# -- provider stall ---------------------------------------------------------------------


def provider_stall_params(s: Settings) -> dict[str, Any]:
    return {"ingests": s.n(300, 20), "hanging": 8, "warmup": 20}


class _BlockingProvider:
    """An OpenAI-shaped endpoint on loopback that answers nothing until released.

    Every POST (chat completions, embeddings) waits; ``release`` answers the held
    ones and any later one with 503, so the daemon's waits end as a failure.
    """

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.released = threading.Event()
        self._lock = threading.Lock()
        self.held = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with provider._lock:
                    provider.held += 1
                provider.released.wait()
                body = b'{"error": {"message": "released"}}'
                with contextlib.suppress(OSError):
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.released.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def bench_provider_stall(shared: Shared, work: Path) -> Metrics:
    """Ingest latency through the daemon, idle and while 8 provider calls hang.

    The daemon's LLM and embeddings endpoint is a loopback server that holds every
    request. Four ``expand_query`` (waiting on the LLM) and four semantic ``grep``
    (waiting on the embedder) are sent from threads and left hanging; then
    one-message ingests into another session are timed one after another.
    """
    params = provider_stall_params(shared.settings)
    provider = _BlockingProvider()
    args = [
        "--llm-base-url", provider.base_url,
        "--llm-model", "stalled",
        "--embedder", "openai",
        "--embed-base-url", provider.base_url,
        "--embed-model", "stalled",
        "--embed-dim", "32",
        "--provider-deadline-s", "600",
        "--auto-compact", "false",
    ]  # fmt: skip
    history = [
        {"id": f"h{i}", "role": "user", "content": f"the deploy of service {i} failed"}
        for i in range(20)
    ]
    hanging: list[threading.Thread] = []
    try:
        with client_daemon(work / "stall.db", work / "daemon.log", args) as client:
            client.call("ingest", {"session": "s", "messages": history})

            def timed_ingests(prefix: str, count: int) -> list[int]:
                out = []
                for i in range(params["warmup"] + count):
                    message = {"id": f"{prefix}{i}", "role": "user", "content": f"turn {i}"}
                    t0 = time.perf_counter_ns()
                    client.call("ingest", {"session": "other", "message": message})
                    if i >= params["warmup"]:
                        out.append(time.perf_counter_ns() - t0)
                return out

            idle = timed_ingests("idle", params["ingests"])
            held_before = provider.held  # the background embedder's own call
            calls: list[tuple[str, dict[str, Any]]] = []
            for _ in range(params["hanging"] // 2):
                calls.append(("expand_query", {"prompt": "why?", "query": "deploy", "all": True}))
                calls.append(("grep", {"query": "deploy", "mode": "semantic", "all": True}))
            for method, call_params in calls:

                def hang(method: str = method, call_params: dict[str, Any] = call_params) -> None:
                    with contextlib.suppress(Exception):
                        client.call(method, call_params, timeout=CALL_TIMEOUT_S)

                thread = threading.Thread(target=hang, daemon=True)
                thread.start()
                hanging.append(thread)
            give_up = time.monotonic() + CALL_TIMEOUT_S
            reached = held_before + len(calls)
            while provider.held < reached and time.monotonic() < give_up:
                time.sleep(0.01)
            stalled = timed_ingests("stall", params["ingests"])
            hanging_during = provider.held - held_before  # none answered: not released yet
            provider.released.set()
            for thread in hanging:
                thread.join(CALL_TIMEOUT_S)
    finally:
        provider.close()
    return {
        **latency_metrics(idle, "idle_"),
        **latency_metrics(stalled, "stalled_"),
        "provider_calls_hanging": float(hanging_during),
    }
